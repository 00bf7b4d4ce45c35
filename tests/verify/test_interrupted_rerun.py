"""A rerun stopped by a signal is incomplete, not a failure: the runs it never reached are no evidence
against the original. The verdict says INCOMPLETE, keeps the rows it compared, and fails only on a
compared run that differed. The new bundles are the published 2x H100 rerun cut where a SIGTERM would
have cut it: after its first launch."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from bench.bundle import seal
from bench.common.stats import summarize
from tests.conftest import REPO
from tests.support.cli_in_process import ddpbench

PUBLISHED = REPO / "benchmarks" / "results" / "bundles"
# Two runs of one plan on one 2x H100: every run reproduces at 10% (tests/verify/test_compare_out.py).
ORIGINAL, RERUN = PUBLISHED / "20261125T213922Z-6e20a7.bundle.json", PUBLISHED / "20261125T214225Z-2c5662.bundle.json"
STOPPED = "interrupted (SIGTERM)"


def stopped_after_first_launch(tmp_path: Path, change=lambda doc: None) -> Path:
    """The rerun as a SIGTERM during its second launch leaves it: its first launch and runs, marked incomplete."""
    doc = copy.deepcopy(json.loads(RERUN.read_text()))
    host = doc["hosts"][0]
    first = host["launches"][0]["id"]
    host.update(launches=host["launches"][:1], runs=[r for r in host["runs"] if r["launch_id"] == first],
                status="partial", error=STOPPED)
    doc.update(complete=False, incomplete_reason=STOPPED)
    change(doc)
    path = tmp_path / "rerun" / "bundle.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(seal(doc)))
    return path


def verdict_of(tmp_path: Path, new: Path, status: int) -> dict:
    done = ddpbench("compare", ORIGINAL, new, "--tolerance", "10%", "--out", tmp_path / "verdict")
    assert done.returncode == status, done.stdout + done.stderr
    verdict = json.loads((tmp_path / "verdict" / "verdict.json").read_text())
    assert verdict["summary"] in done.stdout
    return verdict


def test_runs_a_stopped_rerun_never_reached_are_incomplete_not_failed(tmp_path):
    verdict = verdict_of(tmp_path, stopped_after_first_launch(tmp_path), 5)
    rows = [(run["suite"], run["verdict"]) for run in verdict["runs"]]
    assert rows == [("collectives", "reproduced")] * 6 + [("ddp", "incomplete")] * 2
    assert {run["reason"] for run in verdict["runs"] if run["verdict"] == "incomplete"} == {
        "the rerun was stopped (interrupted (SIGTERM)) before it measured this run"}
    assert verdict["outcome"] == "incomplete" and verdict["passed"] is False and verdict["rerun_stopped"] == STOPPED
    assert verdict["summary"] == ("INCOMPLETE: the rerun was stopped (interrupted (SIGTERM)) before it measured 2 of 8 runs, "
                                  "no evidence either way; none of the 6 compared differed (6 reproduced, 2 incomplete)")
    assert "FAIL" not in verdict["summary"]


def test_a_compared_run_that_differed_still_fails_a_stopped_rerun(tmp_path):
    def slower(doc: dict) -> None:
        run = doc["hosts"][0]["runs"][-1]  # the largest all-reduce, at a third of its bandwidth
        metric = run["metrics"]["busbw_gbps"]
        metric["samples"] = [x / 3 for x in metric["samples"]]
        metric["summary"] = summarize(metric["samples"])

    verdict = verdict_of(tmp_path, stopped_after_first_launch(tmp_path, slower), 1)
    assert [run["verdict"] for run in verdict["runs"]].count("slower") == 1
    assert verdict["outcome"] == "failed"
    assert verdict["summary"].startswith("FAIL: 1 of 6 compared runs did not reproduce (5 reproduced, 1 slower, 2 incomplete)")
    assert "; 2 incomplete: the rerun was stopped (interrupted (SIGTERM)) before it measured them" in verdict["summary"]
