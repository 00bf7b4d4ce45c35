"""Sealed bundles the schema accepts, at its edges: samples of 0 (times: the smallest positive
float, the schema's least) and of 1e15 beside the smallest float, ok runs without the metric a figure needs, a throttled GPU whose reasons were not told
apart, a send/recv rank past the world size. `report` and `compare` end with a report and a
verdict, "-" where a figure cannot be computed, never a traceback; and a bundle the report
would still fail on (a bug of ours) is named and skipped, as an invalid one is.
"""

from __future__ import annotations

import copy
import importlib
import json
from pathlib import Path

import pytest

from bench.bundle import seal
from tests.support import FIXTURES
from tests.support.cli_in_process import ddpbench
from tests.support.report_reading import ddp_rows
from tests.support.report_variants import write
from tests.support.same_samples import another_bundle_of

MERGE = importlib.import_module("bench.report.merge")  # the module: bench.report.merge is also its function
COPY_RAW = FIXTURES / "h200x1" / "copy-raw.json"


def edited(real: dict, change) -> dict:
    doc = copy.deepcopy(real)
    change(doc)
    return seal({k: v for k, v in doc.items() if k != "sha256"})


def set_samples(doc: dict, suite: str, metric: str, samples) -> None:
    for run in doc["hosts"][0]["runs"]:
        if run["suite"] == suite and metric in run["metrics"]:
            run["metrics"][metric]["samples"] = samples(len(run["metrics"][metric]["samples"]))


def table_rows(report: Path, first_header: str) -> list[list[str]]:
    lines = (report / "report.md").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} |"))
    return [[cell.strip() for cell in line.strip("|").split(" | ")] for line in lines[start + 2:] if line.startswith("|")]


def quietly(*args, status=(0,)) -> None:
    """`ddpbench ARGS` ends with one of `status`, with no traceback and no warning."""
    done = ddpbench(*args)
    assert done.returncode in status, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr and "warning" not in done.stderr, done.stderr


def test_a_ddp_run_whose_per_sample_times_are_the_least_is_reported_with_no_efficiency(real_bundle, tmp_path):
    """The 2-process runs' per-sample times the smallest positive double: the ratio to the baseline's
    is past a float's range, so "-" for their scaling (a time of 0 the schema refuses)."""
    def least(doc: dict) -> None:
        for run in doc["hosts"][0]["runs"]:
            if run["suite"] == "ddp" and run["world_size"] == 2:
                run["metrics"]["per_sample_gpu_time_s"]["samples"] = [5e-324] * len(run["metrics"]["per_sample_gpu_time_s"]["samples"])

    zero = write(tmp_path / "zero.json", edited(real_bundle, least))
    quietly("report", str(zero), "--out", str(tmp_path / "out"))
    rows = [row for row in ddp_rows((tmp_path / "out" / "report.md").read_text()) if row["processes"] == "2 processes"]
    # Scaling % of the 2-process rows: no figure. The warnings the real run's own figures drew on a busy
    # machine may follow it (" ⚠ code"): they are the measurement's, not this edit's.
    assert rows and {row["scaling % [95% CI]"].split(" ⚠")[0] for row in rows} == {"-"}, rows


def test_compare_against_samples_of_zero_says_why_it_cannot_judge(real_bundle, tmp_path):
    """The new side's bandwidths all 0 (a log of 0 ended compare), its step times the least the schema
    allows: those runs are judged without an interval, or not at all."""
    original = write(tmp_path / "original.json", edited(real_bundle, lambda d: None))
    zero = write(tmp_path / "zero" / "bundle.json", edited(real_bundle, lambda d: [
        set_samples(d, "ddp", "step_time_s", lambda n: [5e-324] * n), set_samples(d, "collectives", "busbw_gbps", lambda n: [0.0] * n)]))
    quietly("compare", str(original), str(zero), "--out", str(tmp_path / "verdict"), status=(1, 3))
    runs = json.loads((tmp_path / "verdict" / "verdict.json").read_text())["runs"]
    assert all(run["ci_low"] is None or run["ci_low"] == 0 for run in runs if run["new_median"] == 0)
    quietly("compare", str(zero), str(original), "--out", str(tmp_path / "back"), status=(1, 3))
    back = json.loads((tmp_path / "back" / "verdict.json").read_text())["runs"]
    assert {run["verdict"] for run in back if run["original_median"] == 0} == {"not comparable"}  # nothing to compare against 0


@pytest.mark.parametrize("samples", [lambda n: [1e15, 5e-324] * (n // 2 + 1), lambda n: [1e15] * n, lambda n: [5e-324] * n],
                         ids=["huge_beside_smallest", "all_huge", "all_smallest"])
def test_samples_at_the_schemas_bounds_make_a_report_and_a_verdict(samples, real_bundle, tmp_path):
    """None * int in the tables once: a ratio past a float's range has no interval, printed [-, -]."""
    def extreme(doc: dict) -> None:
        for run in doc["hosts"][0]["runs"]:
            for metric in run["metrics"].values():
                metric["samples"] = samples(len(metric["samples"]))

    bundle = write(tmp_path / "extreme" / "bundle.json", edited(real_bundle, extreme))
    quietly("report", str(bundle), "--out", str(tmp_path / "out"))
    quietly("compare", str(bundle), str(another_bundle_of(bundle, tmp_path / "again")), "--out", str(tmp_path / "verdict"), status=(0, 1, 3))


def with_copy_host(real: dict) -> dict:
    """The real bundle with a second host: the H200's copy runs (tests/fixtures/h200x1)."""
    raw = json.loads(COPY_RAW.read_text())
    doc = copy.deepcopy(real)
    doc["hosts"].append({"name": "h200", "runtime": "native", "labels": [], "status": "ok", "error": None,
                         "fingerprint": raw["fingerprint"], "launches": raw["launches"], "runs": raw["runs"]})
    return doc


def without_figures(doc: dict) -> None:
    """Ok runs without the metric their figure needs, a GPU throttled for reasons not told apart,
    and a send/recv rank past the world size."""
    cpu, h200 = doc["hosts"]
    for run in h200["runs"]:
        run["metrics"].pop("copy_gbps")
    h200["launches"][0]["gpu_counters"]["gpus"][0].update(throttled_fraction=0.5, throttle_reasons_fraction=None)
    for run in cpu["runs"]:
        if run["suite"] == "ddp" and run["world_size"] > 1:
            run["metrics"].pop("step_time_s")
            run["derived"]["predicted_step_time_s"] = 0.01
        if run["suite"] == "collectives" and run["params"]["op"] == "sendrecv":
            run["params"]["dst_rank"] = 1_000_000


def test_runs_without_the_metric_a_figure_needs_are_shown_as_missing(real_bundle, tmp_path):
    bundle = write(tmp_path / "bare" / "bundle.json", edited(with_copy_host(real_bundle), without_figures))
    quietly("report", str(bundle), "--out", str(tmp_path / "out"))
    md = (tmp_path / "out" / "report.md").read_text()
    # Throttled half the time for reasons not told apart, at the maximum clock: not held back, and no crash.
    assert "| h200 | 00-copy-default-ws1 | GPU0 | 1980 | 3201 | 144 / 700 | 43 | no |" in md
    copies = [row for row in table_rows(tmp_path / "out", "host") if row[0] == "h200" and len(row) == 7]
    assert copies and {row[6] for row in copies} == {"-"}  # GB/s of every copy point
    assert "1000000" in (tmp_path / "out").joinpath(next(p.name for p in (tmp_path / "out").glob("p2p-*.svg"))).read_text()


def test_a_predicted_step_time_below_zero_is_refused(real_bundle, tmp_path):
    """A prediction is compute plus communication: never negative (one drew bars out of the figure)."""
    def negative(doc: dict) -> None:
        next(r for r in doc["hosts"][0]["runs"] if r.get("derived", {}).get("predicted_step_time_s") is not None)[
            "derived"]["predicted_step_time_s"] = -1.0

    bundle = write(tmp_path / "negative.json", edited(real_bundle, negative))
    done = ddpbench("validate", bundle)
    assert done.returncode == 2 and "derived.predicted_step_time_s: -1.0 is less than the minimum of 0" in done.stderr


@pytest.fixture
def failing_on(monkeypatch):
    """The report made to fail on bundles whose first GPU is named "boom", as a bug of ours would."""
    summary = MERGE.link_summary

    def link_summary(fingerprint: dict) -> dict:
        if any(gpu["name"] == "boom" for gpu in fingerprint.get("gpus") or []):
            raise ZeroDivisionError("float division by zero")
        return summary(fingerprint)

    monkeypatch.setattr(MERGE, "link_summary", link_summary)


def test_a_bundle_the_report_fails_on_is_skipped_among_good_ones(failing_on, fleet, real_bundle, tmp_path):
    def boom(doc: dict) -> None:
        doc["hosts"][0]["fingerprint"]["gpus"] = copy.deepcopy(json.loads(COPY_RAW.read_text())["fingerprint"]["gpus"])
        doc["hosts"][0]["fingerprint"]["gpus"][0]["name"] = "boom"
        doc["run_id"] = doc["run_id"][:-6] + "b00b00"

    bad = write(tmp_path / "bad" / "bundle.json", edited(real_bundle, boom))
    good = [fleet[name] for name in ("cpu", "rig-3090", "rig-4090")]
    captured = ddpbench("report", *good[:2], bad, good[2], "--out", tmp_path / "out")
    assert captured.returncode == 0
    assert captured.stderr.splitlines() == [
        f"warning: skipped: {bad}: the report fails on this bundle (ZeroDivisionError('float division by zero')), "
        "a bug of ddpbench: please report it"]
    assert "from 3 bundle(s)" in captured.stdout
    md = (tmp_path / "out" / "report.md").read_text()
    assert f"> {bad}: valid, but the report fails on it" in md
    assert "b00b00" not in md.replace(str(bad), "")  # none of its runs


def test_strict_stops_at_a_bundle_the_report_fails_on(failing_on, fleet, real_bundle, tmp_path):
    def boom(doc: dict) -> None:
        doc["hosts"][0]["fingerprint"]["gpus"] = copy.deepcopy(json.loads(COPY_RAW.read_text())["fingerprint"]["gpus"])
        doc["hosts"][0]["fingerprint"]["gpus"][0]["name"] = "boom"

    bad = write(tmp_path / "bad.json", edited(real_bundle, boom))
    done = ddpbench("report", fleet["cpu"], bad, "--out", tmp_path / "out", "--strict")
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"error: {bad}: the report fails on this bundle") and "--strict" in line
