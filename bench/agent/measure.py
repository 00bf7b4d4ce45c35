"""What the agent measures of a job while its launches run, beside what the ranks record: where each
launch is (its marks: bench.common.protocol.Mark) and where its time went, the CPU that other
processes took meanwhile, and each configuration the ranks finish, reported as it comes.
"""

from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path
from typing import Callable

from bench import suites
from bench.agent import proctree
from bench.agent.planning import Launch
from bench.common import protocol


class JobMarks:
    """The marks of a job's launches, read as the job goes: which launch is in flight, since when."""

    def __init__(self, paths: "list[Path]", started_s: float):
        self.paths = paths
        self.started_s = started_s  # the job's start (CLOCK_MONOTONIC): the first launch's

    def read(self) -> "list[list[protocol.Mark]]":
        return [protocol.Mark.read_all(path) for path in self.paths]

    def in_flight(self) -> "tuple[int, float]":
        """The first launch not ended (the last one where all have), and since when it runs: its first
        mark, or the end of the launch before it, or the job's start."""
        since = self.started_s
        for index, marks in enumerate(self.read()):
            if marks and index > 0:
                since = marks[0].at_s
            if not marks or marks[-1].phase != "end":
                return index, since
            since = marks[-1].at_s
        return len(self.paths) - 1, since


def ended_at(marks: "list[protocol.Mark]", job_ended_s: float) -> float:
    """When a launch ended: its end mark, or, where it has none (the job's processes ended in it), when they ended."""
    return next((mark.at_s for mark in marks if mark.phase == "end"), job_ended_s)


def phases_s(marks: "list[protocol.Mark]", begun_s: float, ended_s: float, first_of_job: bool, last_of_job: bool) -> dict:
    """Where a launch's time went: {PHASE_s: seconds} over PHASES, summing to ended_s - begun_s. Before
    its first mark: the job's spawn where it starts the job; after its end mark: the ranks' exit where
    it is the job's last."""
    spent = dict.fromkeys(protocol.PHASES, 0.0)
    phase, at = ("spawn" if first_of_job else "other"), begun_s
    for mark in marks:
        when = min(max(mark.at_s, begun_s), ended_s)
        spent[phase] += when - at
        phase, at = (("teardown" if last_of_job else "other") if mark.phase == "end" else mark.phase), when
    spent[phase] += ended_s - at
    return {f"{name}_s": round(seconds, 3) for name, seconds in spent.items()}


def _machine_busy_s() -> "float | None":
    """CPU-seconds the whole machine has been busy (all cores, every process), from /proc/stat."""
    try:
        with open("/proc/stat") as stat:
            fields = [int(x) for x in stat.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _own_cpu_s(processes: "list[proctree.Process]") -> float:
    """CPU-seconds of this process, of the children it has waited for, and of `processes` while they live
    (a job's torchrun and ranks: a child's time joins RUSAGE_CHILDREN only once it is waited for)."""
    live = sum(proctree.cpu_s(process) for process in processes)
    return live + sum(getattr(resource.getrusage(who), f) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
                      for f in ("ru_utime", "ru_stime"))


class OthersShare:
    """The share of the machine's CPU that other processes took while a launch ran: a rerun on a
    machine others were using measures them too, whatever its samples' spread says. `processes`
    gives the job's own processes now (torchrun and its ranks)."""

    def __init__(self, processes: "Callable[[], list[proctree.Process]]" = list):
        self.processes = processes
        self.wall, self.busy, self.own = time.monotonic(), _machine_busy_s(), _own_cpu_s(processes())

    def fraction(self) -> "float | None":
        wall, busy = time.monotonic() - self.wall, _machine_busy_s()
        if self.busy is None or busy is None or wall <= 0:
            return None
        others = (busy - self.busy) - (_own_cpu_s(self.processes()) - self.own)
        return round(min(1.0, max(0.0, others / (wall * (os.cpu_count() or 1)))), 4)


def result_lines(result_path: Path) -> "list[str]":
    """The run records the ranks have written whole so far (a line being written has no closing brace yet)."""
    return [line for line in (result_path.read_text().splitlines() if result_path.exists() else []) if line.endswith("}")]


class RunsReported:
    """Each configuration a launch's ranks finish, said as a RunEnded event once."""

    def __init__(self, launch: Launch, results: Path, progress: Callable[[protocol.Event], None], started_s: float):
        self.launch, self.results, self.progress, self.started_s = launch, results, progress, started_s
        self.reported = 0

    def poll(self) -> None:
        launch = self.launch
        for line in result_lines(self.results)[self.reported:]:
            self.reported += 1
            self.progress(protocol.RunEnded(launch.id, self.reported, max(launch.configurations, self.reported),
                                            suites.get(launch.suite).progress_label(json.loads(line), launch.backend),
                                            round(time.monotonic() - self.started_s, 1)))
