"""`ddpbench run` on this machine, end to end: a real 2-process gloo run through torchrun."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import jsonschema
import pytest

from bench import schemas
from bench.bundle import read_bundle
from tests.conftest import REPO, TEST_PLANS, bundle_path_from


def test_quick_run_names_bundle_and_report(quick_run):
    result, bundle_path = quick_run
    assert bundle_path.name == "bundle.json" and bundle_path.exists()
    report_line = next(l for l in result.stdout.splitlines() if l.startswith("report: "))
    assert report_line.endswith(f"{bundle_path.parent.name}/report.md")


def test_quick_bundle_validates_and_reads_back(quick_run, quick_bundle):
    schemas.validator("bundle").validate(quick_bundle)
    assert read_bundle(quick_run[1]) == quick_bundle
    assert quick_bundle["complete"] is True
    assert quick_bundle["plan"]["name"] == "quick"
    assert len(quick_bundle["tool"]["git_commit"] or "0" * 40) == 40


def test_cpu_path_is_gloo_two_processes(quick_bundle):
    host = quick_bundle["hosts"][0]
    assert host["status"] == "ok", host["error"]
    assert host["fingerprint"]["gpu_count"] == 0
    collectives = [r for r in host["runs"] if r["suite"] == "collectives"]
    assert collectives and all(r["world_size"] == 2 and r["transport"]["backend"] == "gloo" for r in collectives)
    assert sorted({r["world_size"] for r in host["runs"] if r["suite"] == "ddp"}) == [1, 2]


def test_busbw_is_algbw_times_ring_factor(quick_bundle):
    for run in quick_bundle["hosts"][0]["runs"]:
        if run["suite"] != "collectives":
            continue
        n, m = run["world_size"], run["metrics"]
        for time_s, algbw, busbw in zip(m["time_s"]["samples"], m["algbw_gbps"]["samples"], m["busbw_gbps"]["samples"]):
            assert algbw == pytest.approx(run["params"]["size_bytes"] / time_s / 1e9)
            assert busbw == pytest.approx(algbw * 2 * (n - 1) / n)


def test_summary_matches_samples(quick_bundle):
    run = quick_bundle["hosts"][0]["runs"][0]
    samples = sorted(run["metrics"]["time_s"]["samples"])
    summary = run["metrics"]["time_s"]["summary"]
    assert summary["n"] == len(samples) and summary["min"] == samples[0] and summary["max"] == samples[-1]
    assert summary["median"] == samples[len(samples) // 2]  # 5 samples: the middle one


def test_report_has_tables_and_busbw_plot(quick_run):
    report = (quick_run[1].parent / "report.md").read_text()
    assert "| host | GPUs and link | transport | op | dtype |" in report and "all_reduce" in report
    assert "| host | GPUs and link | transport | model |" in report and "tiny" in report
    assert "![Bus bandwidth against message size](busbw.png)" in report
    assert (quick_run[1].parent / "busbw.png").stat().st_size > 10_000
    assert (quick_run[1].parent / "report.html").exists()


def _agent_processes(marker: str) -> list[str]:
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return [l for l in ps.splitlines() if marker in l and "bench.agent" in l]


def test_ctrl_c_keeps_what_finished(tmp_path):
    """SIGINT during the second launch: the first launch's runs are in a bundle marked incomplete."""
    out = tmp_path / "results"
    process = subprocess.Popen(
        [sys.executable, "-m", "bench", "run", "--plan", str(TEST_PLANS / "slow-second-launch.yaml"), "--out", str(out)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    deadline = time.time() + 180
    while not list(out.glob("*/hosts/local/raw.json")):
        assert time.time() < deadline and process.poll() is None, "the first launch never finished"
        time.sleep(0.5)
    time.sleep(3)  # the second launch is running now
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    bundle = read_bundle(bundle_path_from(stdout))
    assert bundle["complete"] is False and bundle["incomplete_reason"] == "interrupted (Ctrl-C)"
    host = bundle["hosts"][0]
    assert [l["id"] for l in host["launches"]] == ["00-collectives-default-ws2"]
    assert host["runs"] and all(r["suite"] == "collectives" for r in host["runs"])
    time.sleep(1)
    assert not _agent_processes(str(out)), "an agent or rank outlived Ctrl-C"
