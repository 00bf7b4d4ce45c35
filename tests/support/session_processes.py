"""The processes a test session started: those below it in the process tree, and those carrying a
mark in their environment. The session sets DDPBENCH_TEST_SESSION in its own environment, and
every process it starts inherits it, with the processes those start (torchrun's ranks under the CLI
under test, the daemons' helpers), wherever they moved: an orphan that init adopted keeps it.

Not found: an orphan that started with an environment of its own making (sshd's login sessions
and what runs in them, a container's processes, a Slurm job's) or that wrote its title over its
environment (sshd does: /proc shows its title there). Each fixture ends what it started; this
finds what a fixture missed."""

from __future__ import annotations

import os
import secrets
import signal
import time
from dataclasses import dataclass
from pathlib import Path

MARK = "DDPBENCH_TEST_SESSION"


@dataclass(frozen=True)
class Process:
    pid: int
    started: int  # clock ticks after boot: with the pid, one process even where the pid is reused
    command: str

    def __str__(self) -> str:
        return f"{self.command} (pid {self.pid})"


@dataclass(frozen=True)
class _Entry:
    process: Process
    parent: int
    running: bool  # not a zombie
    environment: list


def mark_this_session() -> str:
    """Mark every process this one starts from now on; the mark's value, unique to this session."""
    os.environ[MARK] = f"{os.getpid()}-{secrets.token_hex(4)}"
    return os.environ[MARK]


def started_by(root: int, name: str, value: str) -> list[Process]:
    """The running processes below root in the process tree, or whose environment held name=value
    at their start (root and this process left out)."""
    entries = _table()
    wanted = f"{name}={value}".encode()
    below, found = {root}, True
    while found:
        found = {pid for pid, entry in entries.items() if entry.parent in below and pid not in below}
        below |= found
    return [entry.process for pid, entry in entries.items()
            if entry.running and pid not in (root, os.getpid()) and (pid in below or wanted in entry.environment)]


def still_running(processes: list[Process], grace_s: float = 0) -> list[Process]:
    """Those of processes still running after grace_s (those ending now end)."""
    deadline = time.monotonic() + grace_s
    while True:
        entries = _table()
        running = [p for p in processes if p.pid in entries and entries[p.pid].running and entries[p.pid].process.started == p.started]
        if not running or time.monotonic() >= deadline:
            return running
        time.sleep(0.1)


def end(processes: list[Process], grace_s: float = 10) -> None:
    """SIGTERM each, and SIGKILL those still running after grace_s."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for process in still_running(processes):
            try:
                os.kill(process.pid, sig)
            except ProcessLookupError:
                pass
        if not still_running(processes, grace_s):
            return


def _table() -> dict:
    entries = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:  # gone
            continue
        try:
            environment = (entry / "environ").read_bytes().split(b"\0")  # a zombie's reads empty
        except OSError:  # another user's
            environment = []
        # /proc/PID/stat after the command: state, ppid, ... starttime is the 22nd field, 20th here.
        entries[int(entry.name)] = _Entry(Process(int(entry.name), int(fields[19]), command[:200]), int(fields[1]),
                                          fields[0] not in ("Z", "X"), environment)
    return entries
