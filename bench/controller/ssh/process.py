"""One command on a host over an open connection: an argv list, shlex-quoted into the one
command line SSH carries, so nothing from a hosts file or a plan is ever read by the remote
shell as shell syntax. The command announces its process-group id first, so that a timeout or
a Ctrl-C can end it and everything it started on the host."""

from __future__ import annotations

import select
import shlex
import threading
import time
from typing import Callable

import paramiko
from fabric import Connection

from bench.controller.errors import HostError
from bench.controller.inventory import Host
from bench.controller.shell import Result
from bench.controller.ssh.connection import where

PID_MARK = "ddpbench-remote-pid="
POLL_S = 0.5
# sshd may send a command's exit status before the last output it still holds (its EOF follows that
# output): a command that exits is read on until EOF, or this long where a child it left holds the pipes.
EOF_GRACE_S = 2.0
STDERR_KEPT_BYTES = 64 * 1024  # enough for the last lines, which say why a command failed
GRACE_S = 15.0  # the agent ends its ranks (TERM, then KILL after 5 s each) before it exits


def command_line(argv: list[str], cwd: str = "") -> str:
    """The one line the remote shell gets: announce the process group, then exec the argv."""
    run = " ".join(shlex.quote(str(part)) for part in argv)
    enter = f"cd {shlex.quote(cwd)} && " if cwd else ""
    return f"echo {PID_MARK}$$ >&2 && {enter}exec {run}"


def lost(host: Host) -> str:
    return f"lost the connection to {where(host)} (the host went away or its sshd stopped)"


class RemoteProcess:
    """One command on the host; its stdout arrives line by line while it runs.

    Not Fabric's `Connection.run`: on a timeout or an interrupt it only closes the channel,
    which leaves the command (an agent and its ranks) running on a host without a terminal, and
    it has no idle timeout (a command that sends nothing for so long is stuck). This one ends
    the command's whole process group (TERM, then KILL) for either, or when stop() is called."""

    def __init__(self, connection: Connection, host: Host, argv: list[str], what: str, cwd: str = "") -> None:
        self.connection, self.host, self.what = connection, host, what
        self.pgid: "int | None" = None
        self._stop_reason = ""
        self._stop_requested = threading.Event()
        self._stopping = False
        self._stderr = b""
        try:
            self.channel = connection.transport.open_session(timeout=host.command_timeout_s)
            self.channel.exec_command(command_line(argv, cwd))
        except (paramiko.SSHException, OSError, EOFError, AttributeError):
            raise HostError(f"{what}: {lost(host)}") from None

    def wait(self, on_line: "Callable[[str], None] | None" = None, *, timeout_s: "float | None" = None,
             idle_timeout_s: "float | None" = None, timeout_name: str) -> Result:
        """Hand stdout lines to on_line (else collect them as the Result's stdout) until the command
        exits; end it when it runs past timeout_s, sends nothing for idle_timeout_s, or stop() is called."""
        started = last_output = time.monotonic()
        exited_at = None
        pending, collected = b"", []
        deliver = on_line or collected.append
        while True:
            if self.channel.eof_received:  # nothing more to read: select() would return at once, again and again
                self.channel.status_event.wait(POLL_S)
            else:
                select.select([self.channel], [], [], POLL_S)
            while self.channel.recv_ready():
                pending += self.channel.recv(65536)
                last_output = time.monotonic()
            while self.channel.recv_stderr_ready():
                self._stderr += self.channel.recv_stderr(65536)
                last_output = time.monotonic()
            *complete, pending = pending.split(b"\n")
            for raw in complete:
                deliver(raw.decode(errors="replace"))
            if self.pgid is None:
                self._read_pgid()
            self._stderr = self._stderr[-STDERR_KEPT_BYTES:]
            if self.channel.exit_status_ready() and not self.channel.recv_ready() and not self.channel.recv_stderr_ready():
                exited_at = exited_at or time.monotonic()
                if self.channel.eof_received or self.channel.closed or time.monotonic() - exited_at > EOF_GRACE_S:
                    break
            now = time.monotonic()
            if timeout_s is not None and now - started > timeout_s:
                self.stop(f"did not finish within {timeout_s:g} s ({timeout_name}) and was ended")
            elif idle_timeout_s is not None and now - last_output > idle_timeout_s:
                self.stop(f"sent nothing for {idle_timeout_s:g} s ({timeout_name}) and was ended")
            if self._stop_requested.is_set():
                self._end_process_group()
        if pending:
            deliver(pending.decode(errors="replace"))
        if self._stop_reason:
            raise HostError(f"{self.what} {self._stop_reason}")
        if self.channel.exit_status == -1 and not self.connection.transport.is_active():
            raise HostError(f"{self.what}: {lost(self.host)}")
        return Result(self.channel.exit_status, "\n".join(collected), self._stderr_text())

    def _stderr_text(self) -> str:
        lines = self._stderr.decode(errors="replace").splitlines()
        return "\n".join(line for line in lines if not line.startswith(PID_MARK))

    def _read_pgid(self) -> None:
        first, newline, _ = self._stderr.partition(b"\n")
        if newline and first.startswith(PID_MARK.encode()):
            self.pgid = int(first[len(PID_MARK):])

    def stop(self, reason: str) -> None:
        """End the command (from any thread): wait() then raises HostError(what + reason)."""
        if not self._stop_requested.is_set():
            self._stop_reason = reason
            self._stop_requested.set()

    def _end_process_group(self) -> None:
        if not self._stopping:
            self._stopping = True
            threading.Thread(target=self._signal_group, daemon=True, name=f"stop-{self.host.name}").start()

    def _signal_group(self) -> None:
        """TERM the command's process group, KILL it after GRACE_S; close the channel if that fails."""
        for signal_name, grace_s in (("TERM", GRACE_S), ("KILL", 5.0)):
            if self.pgid is None or not self.connection.transport.is_active():
                break
            # The pgid is passed as an argument, never pasted into the script.
            kill = ["sh", "-c", f'kill -s {signal_name} -- "-$1"', "sh", str(self.pgid)]
            try:
                RemoteProcess(self.connection, self.host, kill, f"kill -{signal_name}").wait(
                    timeout_s=self.host.command_timeout_s, timeout_name="command_timeout_s")
            except HostError:
                break
            if self.channel.status_event.wait(grace_s):
                return
        self.channel.close()
