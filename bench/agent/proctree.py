"""The processes below a process, from /proc (Linux, standard library only).

torchrun starts every rank in a session of its own, so signalling torchrun's process group
does not reach a rank; a rank that hangs would outlive torchrun and keep its GPU. The runner
finds the ranks here while torchrun still lives, and ends them by id.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


def _stat_fields(pid: int) -> "list[str] | None":
    """/proc/PID/stat from field 3 on (state, ppid, ...); the command name may hold spaces and ')'."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()


@dataclass(frozen=True)
class Process:
    pid: int
    start_ticks: int  # start time since boot: tells this process from a later one with the same pid

    def alive(self) -> bool:
        fields = _stat_fields(self.pid)
        return fields is not None and int(fields[19]) == self.start_ticks and fields[0] != "Z"

    def signal(self, sig: int) -> None:
        if self.alive():
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass


def descendants(pid: int) -> list[Process]:
    """Every process below pid, children before grandchildren; empty where /proc is not there."""
    children: dict = {}
    for entry in PROC.glob("[0-9]*"):
        fields = _stat_fields(int(entry.name))
        if fields is not None:
            children.setdefault(int(fields[1]), []).append(Process(int(entry.name), int(fields[19])))
    found, parents = [], [pid]
    while parents:
        for child in children.get(parents.pop(0), []):
            found.append(child)
            parents.append(child.pid)
    return found


def cpu_s(process: Process) -> float:
    """CPU-seconds of a live process and of the children it has waited for (0 once it is gone)."""
    fields = _stat_fields(process.pid) if process.alive() else None
    if fields is None:
        return 0.0
    return sum(int(fields[i]) for i in (11, 12, 13, 14)) / os.sysconf("SC_CLK_TCK")  # utime, stime, cutime, cstime
