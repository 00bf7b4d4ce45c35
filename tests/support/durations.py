"""Each test file's wall and CPU seconds, kept in tests/durations.json (tests/tiers.py holds them to
its budgets). A test's time is that of its setup, call and teardown: a module's fixtures count to its
first and last test, a session fixture to the file whose test first asked for it. CPU is this
process's and that of the children it waited for (getrusage), the ranks and CLIs the tests start;
`check_cpu_s` is that of the file's tests `make check` runs (those not marked slow), and `slowest` names
its costliest tests by CPU, where the next cut is to be found.

`make test` (the whole suite, every test passed) writes the record anew; `--record-durations` writes
the rows of the files a selection ran whose every test passed, and keeps the others; `--durations-file`
writes another file. Under pytest-xdist each worker measures its files and hands them to the
controller (workeroutput), which writes the record."""

from __future__ import annotations

import json
import os
import platform
import resource
import time
from collections import defaultdict
from pathlib import Path

import pytest

RECORD = Path(__file__).resolve().parents[1] / "durations.json"
WHOLE_SUITE = "make test"  # how a row of the whole suite's run was measured
SLOWEST = 5  # tests named in a file's row
SELECTION = "pytest --record-durations FILE..., a selection of files"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--record-durations", action="store_true",
                     help="write the wall and CPU seconds of the files these tests belong to into the record "
                          "(a run of the whole suite rewrites it without this)")
    parser.addoption("--durations-file", default=str(RECORD), help="the record to write (default %(default)s)")


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(FileDurations(config), "file-durations")


def cpu_seconds() -> float:
    """User and system CPU of this process and of its children that have ended."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def is_worker(config: pytest.Config) -> bool:
    """Whether this process is a pytest-xdist worker (the controller writes what workers measured)."""
    return hasattr(config, "workerinput")


def read(path: Path = RECORD) -> dict:
    return json.loads(path.read_text()) if path.exists() else {"files": {}}


class FileDurations:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.wall: "defaultdict[str, float]" = defaultdict(float)
        self.cpu: "defaultdict[str, float]" = defaultdict(float)
        self.check_cpu: "defaultdict[str, float]" = defaultdict(float)
        self.test_cpu: "defaultdict[str, dict]" = defaultdict(dict)  # file -> test's name in it -> CPU seconds
        self.failed: set[str] = set()
        self.began = time.perf_counter()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        wall, cpu = time.perf_counter(), cpu_seconds()
        try:
            return (yield)
        finally:
            name = item.path.relative_to(self.config.rootpath).as_posix()
            self.wall[name] += time.perf_counter() - wall
            spent = cpu_seconds() - cpu
            self.cpu[name] += spent
            self.test_cpu[name][item.name] = spent
            if item.get_closest_marker("slow") is None:
                self.check_cpu[name] += spent

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error) -> None:
        """A worker's files, measured there (pytest-xdist's hook, on the controller)."""
        measured = getattr(node, "workeroutput", {}).get("file_durations", {})
        for name, (wall, cpu, check_cpu, tests) in measured.items():
            self.wall[name] += wall
            self.cpu[name] += cpu
            self.check_cpu[name] += check_cpu
            self.test_cpu[name].update(tests)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed:
            self.failed.add(report.fspath)

    def whole_suite(self) -> bool:
        """No file, node, mark or keyword chosen, and nothing that stops early or skips what ran before."""
        option = self.config.option
        chosen = (option.file_or_dir, option.markexpr, option.keyword, option.deselect, option.maxfail,
                  *(getattr(option, name, None) for name in ("lf", "failedfirst", "stepwise")))  # the cache plugin's
        return not any(chosen)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session, exitstatus):
        if is_worker(self.config):
            self.config.workeroutput["file_durations"] = {
                name: (self.wall[name], self.cpu[name], self.check_cpu[name], self.test_cpu[name]) for name in self.wall}
            return
        whole = self.whole_suite() and exitstatus == pytest.ExitCode.OK
        passed = [name for name in self.wall if name not in self.failed]
        if not passed or not (whole or self.config.getoption("record_durations")):
            return
        path = Path(self.config.getoption("durations_file"))
        record = {"files": {}} if whole else read(path)
        rows = record["files"]
        files_wall_s = sum(row.get("wall_s") or 0 for row in rows.values())
        for name in passed:
            rows[name] = {"wall_s": round(self.wall[name], 2), "cpu_s": round(self.cpu[name], 2),
                          "check_cpu_s": round(self.check_cpu[name], 2),
                          "slowest": {test: round(cpu, 2) for test, cpu in
                                      sorted(self.test_cpu[name].items(), key=lambda kv: -kv[1])[:SLOWEST]},
                          "measured": WHOLE_SUITE if whole else SELECTION}
        record["files"] = dict(sorted(rows.items()))
        # The session's wall beside its files' (collection and the session fixtures' teardown too), to the
        # files' precision, so that it never reads shorter than they add up to. A selection scales the last
        # whole session's by its files' sum: the workers share the files, so their sum is not the wall.
        if whole:
            record["session_wall_s"] = round(time.perf_counter() - self.began, 2)
        elif record.get("session_wall_s") and files_wall_s:
            record["session_wall_s"] = round(record["session_wall_s"] * sum(row["wall_s"] for row in rows.values()) / files_wall_s, 2)
        record["machine"] = f"{platform.machine()}, {len(os.sched_getaffinity(0))} cores, Python {platform.python_version()}"
        path.write_text(json.dumps(record, indent=1) + "\n")
