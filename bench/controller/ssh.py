"""SSH to a host with Fabric: the connection policy, one-line errors, remote commands, and
`SSHShell`, the `shell.Shell` of a host.

Every remote command is an argv list, shlex-quoted into the one command line SSH carries:
nothing from a hosts file or a plan is ever read by the remote shell as shell syntax. A
command announces its process-group id first, so that a timeout or a Ctrl-C can end it and
everything it started on the host.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import posixpath
import re
import select
import shlex
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import paramiko
from fabric import Config, Connection

from bench.controller.hosts import Host
from bench.controller.errors import HostError
from bench.controller.shell import CommandNotFound, Result, Shell

PID_MARK = "ddpbench-remote-pid="
logging.getLogger("paramiko").addHandler(logging.NullHandler())  # its tracebacks are not the user's; HostError says it in one line

NOT_FOUND = re.compile(r"not found|No such file or directory", re.IGNORECASE)  # a remote shell's exit 127
POLL_S = 0.5
STDERR_KEPT_BYTES = 64 * 1024  # enough for the last lines, which say why a command failed
GRACE_S = 15.0  # the agent ends its ranks (TERM, then KILL after 5 s each) before it exits


class UnknownHostKey(paramiko.SSHException):
    pass


class _RefuseUnknownKey(paramiko.MissingHostKeyPolicy):
    def missing_host_key(self, client, hostname, key):
        raise UnknownHostKey(hostname)


class _AcceptNewKey(paramiko.MissingHostKeyPolicy):
    """Trust a key seen for the first time, for this connection only: a throwaway rented
    machine's key would otherwise linger in known_hosts and clash with the next one."""

    def missing_host_key(self, client, hostname, key):
        client.get_host_keys().add(hostname, key.get_name(), key)


def where(host: Host) -> str:
    return f"{host.address}:{host.port}"


def connect(host: Host) -> Connection:
    """An open connection to the host (through its jump host, if any), or a HostError saying
    why not and what to fix."""
    identity = str(Path(host.identity_file).expanduser()) if host.identity_file else ""
    if identity and not Path(identity).is_file():
        raise HostError(f"identity_file {identity} does not exist; fix identity_file in the hosts file")
    gateway = None
    if host.jump:
        jump_user, _, jump_address = host.jump.rpartition("@")
        jump_name, _, jump_port = jump_address.partition(":")
        jump = dataclasses.replace(host, address=jump_name, port=int(jump_port or 22), user=jump_user or host.user, jump="")
        gateway = _open(jump, identity, None, f"jump host {host.jump}: ")
    try:
        connection = _open(host, identity, gateway)
    except HostError:
        if gateway is not None:
            gateway.close()
        raise
    connection.transport.set_keepalive(int(host.keepalive_s))
    return connection


def close(connection: Connection) -> None:
    """Close the connection and the jump host's under it (Fabric leaves that one open)."""
    connection.close()
    if isinstance(connection.gateway, Connection):
        connection.gateway.close()


def _open(host: Host, identity: str, gateway: "Connection | None", context: str = "") -> Connection:
    # The hosts file is the whole truth: no ~/.ssh/config rewriting users, ports or keys.
    config = Config(overrides={"load_ssh_configs": False})
    connect_kwargs = {
        "banner_timeout": host.connect_timeout_s, "auth_timeout": host.connect_timeout_s,
        "look_for_keys": not identity, "allow_agent": not identity,
    }
    if identity:
        connect_kwargs["key_filename"] = [identity]
    connection = Connection(
        host.address, user=host.user, port=host.port, config=config, gateway=gateway or False,
        connect_timeout=max(1, round(host.connect_timeout_s)), connect_kwargs=connect_kwargs,
    )
    known_hosts = Path(host.known_hosts_file).expanduser()
    if known_hosts.is_file():
        connection.client.load_system_host_keys(str(known_hosts))
    connection.client.set_missing_host_key_policy(_AcceptNewKey() if host.accept_new_host_key else _RefuseUnknownKey())
    try:
        connection.open()
    except Exception as err:  # noqa: BLE001 - every way a connection fails becomes one line
        connection.close()
        raise HostError(context + explain_connect_error(host, err)) from None
    return connection


def explain_connect_error(host: Host, err: Exception) -> str:
    at = where(host)
    if isinstance(err, UnknownHostKey):
        return (
            f"host key of {at} is not in {host.known_hosts_file}; check it and add it "
            f"(ssh-keyscan -p {host.port} {host.address} >> {host.known_hosts_file}), "
            "or set accept_new_host_key: true for a throwaway machine"
        )
    if isinstance(err, paramiko.BadHostKeyException):
        return (
            f"host key of {at} differs from the one in {host.known_hosts_file}: another machine answers at this "
            "address, or someone is in between; remove the old key only if you know the machine changed"
        )
    if isinstance(err, paramiko.AuthenticationException):
        key = host.identity_file or "your default keys"
        return (
            f"authentication as {host.user} with {key} was refused by {at}; check user and identity_file, "
            "and that the public key is in the host's authorized_keys"
        )
    if isinstance(err, paramiko.ChannelException):
        return f"the jump host could not reach {at} ({err.text}); check the address and port as the jump host sees them"
    if isinstance(err, paramiko.ssh_exception.NoValidConnectionsError) or isinstance(err, ConnectionRefusedError):
        return f"connection refused by {at}; check the address and port in the hosts file and that sshd runs there"
    if isinstance(err, socket.gaierror):
        return f"cannot resolve {host.address!r}; check the address in the hosts file"
    # paramiko stops waiting for the key exchange after the same timeout as for the banner:
    # whichever gives up first, the server did not answer in time.
    if isinstance(err, (socket.timeout, TimeoutError)) or str(err) in ("Error reading SSH protocol banner", "No existing session"):
        return (
            f"no SSH answer from {at} within {host.connect_timeout_s:g} s (connect_timeout_s); "
            "check the address and port, and that the machine is up"
        )
    if isinstance(err, OSError):
        return f"cannot reach {at}: {err.strerror or err}; check the address, the port and the network"
    return f"SSH to {at} failed: {' '.join(str(err).split()) or type(err).__name__}"


def command_line(argv: list[str], cwd: str = "") -> str:
    """The one line the remote shell gets: announce the process group, then exec the argv."""
    run = " ".join(shlex.quote(str(part)) for part in argv)
    enter = f"cd {shlex.quote(cwd)} && " if cwd else ""
    return f"echo {PID_MARK}$$ >&2 && {enter}exec {run}"


@dataclass
class Finished:
    exit_status: int
    stdout: str
    stderr_lines: list

    def last_error_line(self) -> str:
        return next((l.strip() for l in reversed(self.stderr_lines) if l.strip()), "")


class RemoteProcess:
    """One command on the host; its stdout arrives line by line while it runs.

    Every runtime that reaches its host over SSH uses it (native; docker runs `docker`
    commands through it)."""

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

    def wait(self, on_line: Callable[[str], None] = lambda line: None, *, timeout_s: "float | None" = None,
             idle_timeout_s: "float | None" = None, timeout_name: str = "command_timeout_s") -> Finished:
        """Stream stdout lines to on_line until the command exits; end it when it runs past
        timeout_s, sends nothing for idle_timeout_s, or stop() is called."""
        started = last_output = time.monotonic()
        pending, collected = b"", []
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
                collected.append(raw.decode(errors="replace"))
                on_line(collected[-1])
            if self.pgid is None:
                self._read_pgid()
            self._stderr = self._stderr[-STDERR_KEPT_BYTES:]
            if self.channel.exit_status_ready() and not self.channel.recv_ready() and not self.channel.recv_stderr_ready():
                break
            now = time.monotonic()
            if timeout_s is not None and now - started > timeout_s:
                self.stop(f"did not finish within {timeout_s:g} s ({timeout_name}) and was ended")
            elif idle_timeout_s is not None and now - last_output > idle_timeout_s:
                self.stop(f"sent nothing for {idle_timeout_s:g} s ({timeout_name}) and was ended")
            if self._stop_requested.is_set():
                self._end_process_group()
        if pending:
            collected.append(pending.decode(errors="replace"))
            on_line(collected[-1])
        if self._stop_reason:
            raise HostError(f"{self.what} {self._stop_reason}")
        if self.channel.exit_status == -1 and not self.connection.transport.is_active():
            raise HostError(f"{self.what}: {lost(self.host)}")
        return Finished(self.channel.exit_status, "\n".join(collected), self._stderr_lines())

    def _stderr_lines(self) -> list:
        return [l for l in self._stderr.decode(errors="replace").splitlines() if not l.startswith(PID_MARK)]

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
            try:
                # The pgid is passed as an argument, never pasted into the script.
                run(self.connection, self.host, ["sh", "-c", f'kill -s {signal_name} -- "-$1"', "sh", str(self.pgid)],
                    f"kill -{signal_name}", check=False)
            except HostError:
                break
            if self.channel.status_event.wait(grace_s):
                return
        self.channel.close()


def lost(host: Host) -> str:
    return f"lost the connection to {where(host)} (the host went away or its sshd stopped)"


def run(connection: Connection, host: Host, argv: list[str], what: str, *, cwd: str = "", check: bool = True) -> Finished:
    """A short command: its output once it has finished, within the host's command_timeout_s."""
    done = RemoteProcess(connection, host, argv, what, cwd).wait(timeout_s=host.command_timeout_s)
    if check and done.exit_status != 0:
        detail = done.last_error_line() or f"exit status {done.exit_status}"
        raise HostError(f"{what} failed on {where(host)}: {detail}")
    return done


def sftp_of(connection: Connection, host: Host) -> paramiko.SFTPClient:
    sftp = connection.sftp()
    sftp.get_channel().settimeout(host.command_timeout_s)
    return sftp


def put_bytes(connection: Connection, host: Host, data: bytes, path: str) -> None:
    """Write a file on the host by SFTP."""
    try:
        with sftp_of(connection, host).open(path, "wb") as remote:
            remote.write(data)
    except (OSError, EOFError, paramiko.SSHException) as err:
        raise HostError(f"copying {posixpath.basename(path)} to {host.address}:{path} failed: {err}") from None


def put_file(connection: Connection, host: Host, local: Path, path: str) -> None:
    """Copy a local file to the host by SFTP, through a .part file: a cut copy never passes for the file."""
    partial = path + ".part"
    try:
        sftp = sftp_of(connection, host)
        sftp.put(str(local), partial)
        sftp.posix_rename(partial, path)
    except (OSError, EOFError, paramiko.SSHException) as err:
        # sftp-server reports a full disk as a bare "Failure" (SFTP v3 has no code for it).
        # A write that does not fit can also pass unnoticed until the sizes are compared.
        full = str(err) in ("Failure", "No space left on device") or str(err).startswith("size mismatch")
        reason = f"no space left on the host's disk ({err})" if full else str(err)
        raise HostError(f"copying {local} to {host.address}:{path} failed: {reason}; free space in its workdir or set workdir: to a bigger disk") from None


def fetch_results(connection: Connection, out_dir: str, result_dir: Path, progress: Callable[[dict], None]) -> bool:
    """raw.json and launches/*.log of an agent's out_dir, whatever state the agent left them in.
    True when everything there is here and raw.json (if any) reads as JSON: only then may the
    host's copy be removed."""
    if not connection.transport or not connection.transport.is_active():
        return False
    progress({"event": "stage", "stage": "collect"})
    logs = result_dir / "launches"
    logs.mkdir(parents=True, exist_ok=True)
    try:
        sftp = connection.sftp()
        wanted = [("raw.json", result_dir / "raw.json")]
        try:
            names = sftp.listdir(posixpath.join(out_dir, "launches"))
        except FileNotFoundError:
            names = []
        wanted += [(f"launches/{name}", logs / name) for name in sorted(names) if name.endswith(".log")]
        for remote, local in wanted:
            partial = local.with_name(local.name + ".part")  # a failed copy must not pass for a result
            try:
                sftp.get(posixpath.join(out_dir, remote), str(partial))
                partial.replace(local)
            except FileNotFoundError:
                partial.unlink(missing_ok=True)
    except (OSError, EOFError, paramiko.SSHException) as err:
        progress({"event": "warning", "message": f"could not fetch the results: {err}"})
        return False
    return fetched_intact(result_dir)


def fetched_intact(result_dir: Path) -> bool:
    """Whether the raw.json fetched into result_dir, if one came, is whole JSON."""
    raw = result_dir / "raw.json"
    try:
        if raw.exists():
            json.loads(raw.read_bytes())
    except (OSError, ValueError):
        return False
    return True


class SSHShell(Shell):
    """Commands on a host over an open SSH connection; `env` is set by `env NAME=VALUE` in front
    of each command (sshd passes no environment of the client's)."""

    def __init__(self, connection: Connection, host: Host, env: "dict | None" = None) -> None:
        super().__init__(env)
        self.connection, self.host = connection, host
        self.where = f"host {host.name} ({where(host)})"
        self._process: "RemoteProcess | None" = None
        self._lock = threading.Lock()

    def _argv(self, argv: list[str]) -> list[str]:
        return ["env", *(f"{k}={v}" for k, v in self.env.items()), *argv] if self.env else list(argv)

    @staticmethod
    def _result(done: Finished, argv: list[str]) -> Result:
        stderr = "\n".join(done.stderr_lines)
        if done.exit_status == 127 and NOT_FOUND.search(stderr):
            raise CommandNotFound(argv[0])
        return Result(done.exit_status, done.stdout, stderr)

    def run(self, argv: list[str], timeout: "float | None" = None) -> Result:
        process = RemoteProcess(self.connection, self.host, self._argv(argv), argv[0])
        return self._result(process.wait(timeout_s=timeout, timeout_name="its time limit"), argv)

    def stream(self, argv: list[str], on_line: Callable[[str], None], *, idle_timeout_s: "float | None" = None,
               timeout_name: str = "") -> Result:
        with self._lock:
            self._process = RemoteProcess(self.connection, self.host, self._argv(argv), argv[0])
        done = self._process.wait(on_line, idle_timeout_s=idle_timeout_s, timeout_name=timeout_name)
        return Result(self._result(done, argv).code, "", "\n".join(done.stderr_lines))

    def stop(self, reason: str) -> None:
        with self._lock:
            process = self._process
        if process is not None:
            process.stop(reason)

    def put(self, data: bytes, path: str) -> None:
        put_bytes(self.connection, self.host, data, path)

    def fetch_results(self, out_dir: str, result_dir: Path, progress: Callable[[dict], None]) -> bool:
        return fetch_results(self.connection, out_dir, result_dir, progress)

    def close(self) -> None:
        close(self.connection)
