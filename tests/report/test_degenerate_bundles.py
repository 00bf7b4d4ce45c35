"""The degenerate bundles a hostile pass sealed: a timeline with fewer ready times than buckets, steps,
all-reduces and copies that took no time, an all-reduce of no bytes, an fsdp run whose every other
figure is 0, a GPU named in matplotlib's math. What no measurement can give is refused by `validate`
in one line naming the field (and skipped by `report` among good bundles, with that line); what the
schema accepts renders: `report`, `predict` and `compare` end without a traceback, and a figure that
cannot be computed is left out, never a failure of the whole report."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from bench.bundle import seal
from tests.support.cli_in_process import ddpbench
from tests.support.report_variants import write

REPO = Path(__file__).resolve().parents[2]
FSDP_BUNDLE = REPO / "benchmarks" / "results" / "bundles" / "20261125T215632Z-593e7a.bundle.json"  # fsdp and ddp on an H100
GPU_BUNDLE = REPO / "benchmarks" / "results" / "bundles" / "20261125T213517Z-a86d8e.bundle.json"  # ddp on an H200, with timelines
TIMES = ("step_time_s", "per_sample_gpu_time_s", "time_s", "time_max_rank_s")


def edited(real: dict, change) -> dict:
    doc = copy.deepcopy(real)
    change(doc)
    return seal({k: v for k, v in doc.items() if k != "sha256"})


def runs(doc: dict, suite: str) -> list:
    return [run for host in doc["hosts"] for run in host["runs"] if run["suite"] == suite]


def timelines(doc: dict):
    for run in runs(doc, "ddp"):
        if run.get("timeline"):
            yield run["timeline"]


def ready_short(doc):
    for timeline in timelines(doc):
        timeline["steps"][0]["bucket_ready_s"].pop()


def step_median_zero(doc):
    for run in runs(doc, "ddp"):
        samples = run["metrics"]["step_time_s"]["samples"]
        samples[: len(samples) // 2 + 1] = [0.0] * (len(samples) // 2 + 1)


def step_samples_zero(doc):
    for run in runs(doc, "ddp"):
        for metric in run["metrics"].values():
            metric["samples"] = [0.0] * len(metric["samples"])


def allreduce_time_zero(doc):
    for run in runs(doc, "collectives"):
        run["metrics"]["time_s"]["samples"] = [0.0] * len(run["metrics"]["time_s"]["samples"])


def allreduce_size_zero(doc):
    for run in runs(doc, "collectives"):
        run["params"]["size_bytes"] = 0


def timeline_step_zero(doc):
    for timeline in timelines(doc):
        for step in timeline["steps"]:
            step.update(step_s=0.0, forward_s=0.0, backward_s=0.0, optimizer_s=0.0, last_backward_start_s=0.0, last_backward_s=0.0)


@pytest.mark.parametrize("change, says", [
    (ready_short, r"timeline\.steps\[0\]\.bucket_ready_s: \d+ ready time\(s\) for the \d+ bucket\(s\) of bucket_bytes; "
                  "ddpbench never writes such a timeline: get the original"),
    (step_median_zero, r"metrics\.step_time_s\.samples\[\d+\]: 0\.0 is less than or equal to the minimum of 0"),
    (step_samples_zero, r"metrics\.\w+\.samples\[\d+\]: 0\.0 is less than or equal to the minimum of 0"),
    (allreduce_time_zero, r"metrics\.time_s\.samples\[\d+\]: 0\.0 is less than or equal to the minimum of 0"),
    (allreduce_size_zero, r"params\.size_bytes: 0 is less than the minimum of 1"),
    (timeline_step_zero, r"timeline\.steps\[0\]\.step_s: 0\.0 is less than or equal to the minimum of 0"),
], ids=["ready_times_short", "step_median_0", "step_samples_0", "allreduce_time_0", "allreduce_size_0", "timeline_step_0"])
def test_what_no_measurement_gives_is_refused_in_one_line_and_skipped_among_good_bundles(real_bundle, fleet, tmp_path,
                                                                                         change, says):
    bad = write(tmp_path / "bad" / "bundle.json", edited(real_bundle, change))
    validated = ddpbench("validate", bad)
    assert validated.returncode == 2
    (line,) = validated.stderr.splitlines()
    assert line.startswith(f"error: {bad}: field hosts[0].runs[") and re.search(says, line), line
    reported = ddpbench("report", fleet["cpu"], bad, fleet["rig-3090"], "--out", tmp_path / "out")
    assert reported.returncode == 0
    assert reported.stderr.splitlines() == [f"warning: skipped: {line[len('error: '):]}"]
    assert "from 2 bundle(s)" in reported.stdout
    predicted = ddpbench("predict", bad)
    assert predicted.returncode == 2
    (refused,) = predicted.stderr.splitlines()
    assert refused.startswith(line)


def only_tiny_times(doc):
    """Every time the schema's least (the smallest positive double), every other figure 0: valid, and
    no ratio of them is finite."""
    for host in doc["hosts"]:
        for run in host["runs"]:
            for name, metric in run["metrics"].items():
                metric["samples"] = [5e-324 if name in TIMES else 0.0] * len(metric["samples"])
            for name in run.get("derived", {}):
                run["derived"][name] = 0.0
    for timeline in timelines(doc):
        timeline["bucket_bytes"] = [0] * len(timeline["bucket_bytes"])
        for step in timeline["steps"] + timeline.get("steps_without_allreduce", []):
            step.update(step_s=5e-324, forward_s=0.0, backward_s=0.0, optimizer_s=0.0, last_backward_start_s=0.0,
                        last_backward_s=0.0, bucket_ready_s=[0.0] * len(step["bucket_ready_s"]))


def zero_figures(doc):
    """An fsdp run (and the ddp runs beside it) with every figure 0 but its times."""
    for run in runs(doc, "fsdp") + runs(doc, "ddp"):
        for name, metric in run["metrics"].items():
            if name not in TIMES:
                metric["samples"] = [0.0] * len(metric["samples"])
        for name in run.get("derived", {}):
            run["derived"][name] = 0.0


def efficiency_past_a_percent(doc):
    """Each 1-GPU time 1e15 s (the schema's most), each N-GPU one 1e-292 s: a scaling efficiency of 1e307, finite, its
    percentage not."""
    for run in runs(doc, "ddp"):
        for name in TIMES:
            if name in run["metrics"]:
                run["metrics"][name]["samples"] = [1e15 if run["world_size"] == 1 else 1e-292] * len(run["metrics"][name]["samples"])


def math_in_names(doc):
    for host in doc["hosts"]:
        for gpu in host["fingerprint"].get("gpus") or []:
            gpu["name"] = r"NVIDIA H100 $x^$ $\frac{a}$"
        host["labels"] = [r"rig $\alpha$ $_$"]


@pytest.mark.parametrize("source, change", [
    ("cpu", only_tiny_times), ("cpu", efficiency_past_a_percent), ("fsdp", zero_figures), ("gpu", math_in_names),
    ("fsdp", math_in_names),
], ids=["times_of_5e-324_and_zeros", "efficiency_of_1e307", "fsdp_with_zero_figures", "math_text_in_a_gpu_name", "math_text_fsdp"])
def test_what_the_schema_accepts_renders(real_bundle, tmp_path, source, change):
    real = {"cpu": real_bundle, "fsdp": json.loads(FSDP_BUNDLE.read_text()), "gpu": json.loads(GPU_BUNDLE.read_text())}[source]
    bundle = write(tmp_path / "edge" / "bundle.json", edited(real, change))
    assert ddpbench("validate", bundle).returncode == 0
    reported = ddpbench("report", bundle, "--out", tmp_path / "out")
    assert reported.returncode == 0
    assert "Traceback" not in reported.stderr and "fails on" not in reported.stderr, reported.stderr
    assert (tmp_path / "out" / "report.html").exists() and list((tmp_path / "out").glob("*.svg"))
    if change is math_in_names:  # shown as written, not set as math
        assert any(r"$x^$ $\frac{a}$" in svg.read_text() for svg in (tmp_path / "out").glob("*.svg"))
    if runs(real, "ddp"):
        predicted = ddpbench("predict", bundle)
        assert predicted.returncode == 0, predicted.stderr
    compared = ddpbench("compare", bundle, bundle, "--out", tmp_path / "verdict")
    assert compared.returncode in (0, 1, 3, 4) and "Traceback" not in compared.stderr, compared.stderr
