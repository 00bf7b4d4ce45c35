"""tests/tiers.py names every test file in one tier, and `make check` selects tests of every CHECK
file and of no other; tests/durations.json gives every file's seconds, within tests/tiers.py's budgets."""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys

import pytest

from tests import tiers
from tests.conftest import REPO
from tests.support import durations


def test_every_test_file_is_in_one_tier():
    files = {str(path.relative_to(REPO)) for path in (REPO / "tests").rglob("test_*.py")}
    listed = [*tiers.CHECK, *tiers.FULL_ONLY]
    assert sorted(files - set(listed)) == [], "test files in no tier: name each in tests/tiers.py's CHECK or FULL_ONLY"
    assert sorted(set(listed) - files) == [], "tests/tiers.py names files that are not there"
    assert [path for path, count in collections.Counter(listed).items() if count > 1] == [], "files named twice in tests/tiers.py"


@pytest.mark.slow  # it collects every test file in a child pytest: seconds of CPU that make check spares
def test_make_check_selects_tests_of_every_check_file_and_none_of_the_others():
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "not slow", "-p", "no:cacheprovider"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode in (0, 5), done.stdout[-3000:] + done.stderr[-3000:]  # 5: nothing selected
    selected = {line.split("::")[0] for line in done.stdout.splitlines() if "::" in line}
    assert selected, "make check selects no test"
    assert sorted(selected - set(tiers.CHECK)) == [], "make check selects tests of files outside CHECK"
    assert sorted(set(tiers.CHECK) - selected) == [], "CHECK files whose every test is marked slow: move each to FULL_ONLY"


def _rows() -> dict:
    return durations.read()["files"]


def test_every_test_file_has_a_row_of_its_wall_and_cpu_seconds():
    listed = {*tiers.CHECK, *tiers.FULL_ONLY}
    rows = _rows()
    # A row's figures wait for the next whole-suite run that passes where its "measured" says "not yet".
    unmeasured = sorted(name for name in listed
                        if not all(isinstance(rows.get(name, {}).get(key), (int, float)) for key in ("wall_s", "cpu_s", "check_cpu_s"))
                        and not rows.get(name, {}).get("measured", "").startswith("not yet"))
    assert unmeasured == [], (f"{len(unmeasured)} test files without their wall and CPU seconds in tests/durations.json: "
                              f"{unmeasured}; tests/tiers.py says how to record them")
    assert sorted(set(rows) - listed) == [], "tests/durations.json has rows of files that no tier names"


def test_make_check_fits_its_cpu_budget():
    rows = _rows()
    cpu = sum(rows.get(name, {}).get("check_cpu_s") or 0 for name in tiers.CHECK)
    assert cpu <= tiers.CHECK_CPU_BUDGET_S, (f"make check's files take {cpu:.0f} s of CPU in tests/durations.json, past "
                                             f"its budget of {tiers.CHECK_CPU_BUDGET_S:.0f} s: make a test cheaper or move its file to FULL_ONLY")


def test_the_whole_suite_fits_its_wall_budget():
    record = durations.read()
    wall = record.get("session_wall_s") or sum(row.get("wall_s") or 0 for row in record["files"].values())
    slowest = sorted(record["files"].items(), key=lambda item: -(item[1].get("wall_s") or 0))[:5]
    assert wall <= tiers.WHOLE_SUITE_WALL_BUDGET_S, (
        f"make test takes {wall / 60:.1f} min of wall in tests/durations.json, past its budget of "
        f"{tiers.WHOLE_SUITE_WALL_BUDGET_S / 60:.0f} min; the slowest files: "
        + ", ".join(f"{name} {row['wall_s'] / 60:.1f} min" for name, row in slowest))


BUSY = """
import subprocess, sys, time

import pytest

def busy(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass

@pytest.mark.slow
def test_busy_here_and_in_a_child():
    busy(0.3)
    subprocess.run([sys.executable, "-c", "import time\\nend = time.process_time() + 0.5\\nwhile time.process_time() < end: pass"], check=True)

def test_waits():
    time.sleep(0.5)
"""


@pytest.mark.slow  # two child pytest sessions: seconds of CPU that make check spares
def test_a_run_of_every_test_writes_each_files_wall_and_cpu_with_its_children_and_a_failing_run_writes_nothing(tmp_path):
    (tmp_path / "test_busy.py").write_text(BUSY)
    (tmp_path / "test_quick.py").write_text("def test_nothing():\n    pass\n")
    record = tmp_path / "durations.json"

    def pytest_session(*args) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.support.durations",
                               "--rootdir", str(tmp_path), "--durations-file", str(record), *args], cwd=tmp_path,
                              capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})

    done = pytest_session()
    assert done.returncode == 0, done.stdout + done.stderr
    written = json.loads(record.read_text())
    busy, quick = written["files"]["test_busy.py"], written["files"]["test_quick.py"]
    # 0.3 s of CPU here, 0.5 s in a child, half a second asleep
    assert busy["cpu_s"] >= 0.8 and busy["wall_s"] >= 1.3 and busy["measured"] == durations.WHOLE_SUITE, busy
    assert written["session_wall_s"] >= busy["wall_s"] + quick["wall_s"] - 0.01, written  # each rounded to 0.01 s
    assert busy["check_cpu_s"] < 0.3 < busy["cpu_s"] - 0.5, busy  # the busy test is slow: make check leaves it out

    (tmp_path / "test_quick.py").write_text("def test_nothing():\n    assert False\n")
    assert pytest_session().returncode == 1
    assert json.loads(record.read_text()) == written, "a run with a failing test rewrote the record"

    (tmp_path / "test_quick.py").write_text("import time\n\ndef test_a_second():\n    time.sleep(1)\n")
    assert pytest_session("--record-durations", "test_quick.py").returncode == 0
    rows = json.loads(record.read_text())
    assert rows["files"]["test_busy.py"] == busy and rows["files"]["test_quick.py"]["wall_s"] >= 1
    assert rows["files"]["test_quick.py"]["measured"] == durations.SELECTION
    # the whole session's wall, scaled by what the files' walls add up to now
    scale = (busy["wall_s"] + rows["files"]["test_quick.py"]["wall_s"]) / (busy["wall_s"] + quick["wall_s"])
    assert rows["session_wall_s"] == pytest.approx(written["session_wall_s"] * scale, abs=0.01)
