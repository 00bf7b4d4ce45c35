"""The host CPU's pace while launches run: a thread times a Python call every second, each launch keeps
the median, least and most of its span, and verify says where a host-paced rerun's host ran Python at
another pace than the original's (on a lent H100 VM the same call took 460 and 1,084 ns minutes apart)."""

from __future__ import annotations

import copy
import time

from bench import schemas
from bench.agent.cpu_pace import PaceSampler, python_call_ns
from bench.bundle import read_bundle
from bench.suites.training.pacing import HOST_PACED
from bench.verify.compare import compare_bundles, parse_tolerances
from tests.conftest import REPO

PACING_H100 = REPO / "benchmarks/results/bundles/20261206T092007Z-c3b1ad.bundle.json.gz"  # host-paced and GPU-bound rows, 2 launches each


def test_each_launch_keeps_the_paces_sampled_while_it_ran():
    with PaceSampler(interval_s=0.02) as pace:
        time.sleep(0.1)
        begun = time.monotonic()
        time.sleep(0.2)
        ended = time.monotonic()
        time.sleep(0.1)
    inside = [ns for t, ns in pace.samples if begun <= t <= ended]
    summary = pace.span_summary(begun, ended)
    assert schemas.first_problem(summary, "bundle", "cpu_pace") is None
    assert summary["samples_count"] == len(inside) < len(pace.samples)  # the launch's own span, not the job's
    assert summary["python_call_ns_min"] == min(inside) <= summary["python_call_ns_median"] <= summary["python_call_ns_max"] == max(inside)
    assert pace.span_summary(ended + 10, ended + 11) is None  # no sample in it: not measured
    assert 10 < python_call_ns(rounds=1, calls=1000) < 100_000  # some 400-1,100 ns on the machines measured


def _rerun(original: dict, pace_ns: "tuple[float, float]", slower: float) -> "tuple[dict, dict]":
    """The original and a rerun whose host-paced steps took `slower` times as long, each side's launches
    recording the Python call of its pace (ns)."""
    original, new = copy.deepcopy(original), copy.deepcopy(original)
    for doc, ns in zip((original, new), pace_ns):
        for launch in doc["hosts"][0]["launches"]:
            launch["cpu_pace"] = {"python_call_ns_median": ns, "python_call_ns_min": ns, "python_call_ns_max": ns,
                                  "samples_count": 30, "interval_s": 1.0}
    for run in new["hosts"][0]["runs"]:
        if (run.get("pacing") or {}).get("verdict") == HOST_PACED:
            steps = run["metrics"]["step_time_s"]
            steps["samples"] = [s * slower for s in steps["samples"]]
    return original, new


def test_verify_says_a_host_paced_reruns_host_ran_python_slower():
    bundle = read_bundle(PACING_H100)
    verdicts = compare_bundles(*_rerun(bundle, (500.0, 750.0), 1.5), parse_tolerances([]), [("local", "local")])
    said = "the new host's CPU ran Python 1.5x slower (a call 750 ns against 500 ns), which host-paced steps follow"
    host_paced = [any(p.startswith(HOST_PACED) for p in (v.pacing or {}).values()) for v in verdicts]
    assert sum(host_paced) == 7 and len(verdicts) == 13  # the host-paced rows, and the GPU-bound ones
    for verdict, paced in zip(verdicts, host_paced):
        assert (said in (verdict.reason or "")) == paced, (verdict.params, verdict.verdict, verdict.reason)
    same = compare_bundles(*_rerun(bundle, (500.0, 520.0), 1.0), parse_tolerances([]), [("local", "local")])
    assert any("both hosts' CPUs ran Python at one pace (a call 500 and 520 ns)" in (v.reason or "") for v in same)
    unrecorded = compare_bundles(bundle, bundle, parse_tolerances([]), [("local", "local")])  # bundles from before the pace
    assert not any("ran Python" in (v.reason or "") for v in unrecorded)
