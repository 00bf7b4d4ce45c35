"""`ddpbench run` on this machine, end to end: a real 2-process gloo run through torchrun."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time

import pytest

from bench import schemas
from bench.bundle import read_bundle
from bench.report import CPU_ONLY
from tests.conftest import TEST_PLANS, bundle_path_from, cli, start_cli
from tests.support.report_variants import quiet, write


def test_quick_run_names_bundle_and_report(quick_run):
    result, bundle_path = quick_run
    assert bundle_path.name == "bundle.json" and bundle_path.exists()
    report_line = next(l for l in result.stdout.splitlines() if l.startswith("report: "))
    assert report_line.endswith(f"{bundle_path.parent.name}/report.md")


def test_a_cpu_report_says_first_that_it_shows_the_tool_working_not_a_link(quick_run):
    report = quick_run[1].with_name("report.md").read_text()
    assert report.splitlines()[:3] == ["# ddpbench report", "", f"**{CPU_ONLY}**"]


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
    middle = len(samples) // 2  # 10 samples a launch on the CPU: the mean of the middle two
    assert summary["median"] == pytest.approx((samples[middle - 1] + samples[middle]) / 2 if len(samples) % 2 == 0 else samples[middle])


def test_a_cpu_run_speaks_of_processes_and_its_cpu(quick_run, tmp_path):
    """Its own report, and the report of its bundle as a quiet machine records it: a busy CI machine marks
    runs "(busy)", and a busy run is not predicted from."""
    quieted = write(tmp_path / "quiet" / "bundle.json", quiet(json.loads(quick_run[1].read_text())))
    assert cli("report", quieted, "--out", tmp_path / "report").returncode == 0
    figures_of = {}
    for folder in (quick_run[1].parent, tmp_path / "report"):
        md = (folder / "report.md").read_text()
        figures_of[folder] = {svg.name: svg.read_text() for svg in folder.glob("*.svg")}
        for name, text in {"report.md": md, **figures_of[folder]}.items():
            said = [word for word in ("GPU", "NVLink", "NCCL") if word in text]
            assert not said, f"{folder / name} speaks of {said} on a CPU-only run"
        assert "| host · hardware | workload | ranks | transport used |" in md
        assert "| host (labels) | bundle | status | CPU | cores | torch | image | ddpbench |" in md
    assert any("predicted · nvlink4 · 2 processes" in text for text in figures_of[tmp_path / "report"].values())
    predicted = cli("predict", quick_run[1])
    assert predicted.returncode == 0, predicted.stderr
    assert "its ranks trained on this CPU (processes over gloo), so the compute of every prediction is this CPU's" in predicted.stdout
    measured = {row.split(" | ")[5] for row in predicted.stdout.splitlines() if "| measured run |" in row}
    assert measured == {f"measured: default, launch repeat {n}" for n in (1, 2, 3)}


def test_report_has_tables_and_busbw_plot(quick_run):
    report = (quick_run[1].parent / "report.md").read_text()
    assert "| host | hardware | transport | op | dtype |" in report and "all_reduce" in report
    assert "| host | hardware | transport | model |" in report and "tiny" in report
    assert "![Bus bandwidth against message size](busbw.png)" in report
    assert (quick_run[1].parent / "busbw.png").stat().st_size > 10_000
    assert (quick_run[1].parent / "report.html").exists()


def _agent_processes(marker: str) -> list[str]:
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return [l for l in ps.splitlines() if marker in l and "bench.agent" in l]


def _start_run(plan: str, out, *args: str) -> subprocess.Popen:
    return start_cli("run", "--plan", TEST_PLANS / plan, "--out", out, *args)


def _finished_launches(out) -> list[dict]:
    """The launches the agent has recorded in raw.json so far (it writes the file before the first one)."""
    for path in out.glob("*/hosts/local/raw.json"):
        try:
            return json.loads(path.read_text())["launches"]
        except ValueError:
            return []  # caught between write and rename: not yet
    return []


def _wait_for_first_launch(process: subprocess.Popen, out) -> list[dict]:
    deadline = time.time() + 180
    while not _finished_launches(out):
        assert time.time() < deadline and process.poll() is None, "the first launch never finished"
        time.sleep(0.2)
    return _finished_launches(out)


@pytest.mark.parametrize("sig, status, name", [
    (signal.SIGINT, 130, "Ctrl-C"), (signal.SIGTERM, 143, "SIGTERM"), (signal.SIGHUP, 129, "SIGHUP"),
])
def test_a_stop_signal_keeps_what_finished(tmp_path, sig, status, name):
    """Ctrl-C, SIGTERM (timeout, a scheduler) or SIGHUP (the SSH session dropped) during the second
    launch: the first launch's runs are in a bundle marked incomplete with the signal's name."""
    out = tmp_path / "results"
    process = _start_run("slow-second-launch.yaml", out)
    _wait_for_first_launch(process, out)
    process.send_signal(sig)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == status, stderr
    assert f"interrupted ({name})" in stderr and "Traceback" not in stderr
    assert "[local] stopped before the end of its plan: what finished is kept" in stderr and "[local] done" not in stderr
    run_dir = bundle_path_from(stdout).parent
    assert f"run the rest into the same folder with: {sys.executable} -m bench run --hosts hosts/local.yaml --resume {run_dir}" in stderr
    bundle = read_bundle(bundle_path_from(stdout))
    assert bundle["complete"] is False and bundle["incomplete_reason"] == f"interrupted ({name})"
    host = bundle["hosts"][0]
    assert [l["id"] for l in host["launches"]] == ["00-collectives-default-ws2"]
    assert host["runs"] and all(r["suite"] == "collectives" for r in host["runs"])
    time.sleep(1)
    assert not _agent_processes(str(out)), "an agent or rank outlived the signal"


def test_sigterm_in_the_first_launch_keeps_the_fingerprint(tmp_path):
    out = tmp_path / "results"
    process = _start_run("slow-first-launch.yaml", out)
    deadline = time.time() + 120
    while not list(out.glob("*/hosts/local/launches/*.log")):  # the first launch has started
        assert time.time() < deadline and process.poll() is None, "the first launch never started"
        time.sleep(0.2)
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 143, stderr
    host = read_bundle(bundle_path_from(stdout))["hosts"][0]
    assert host["fingerprint"]["cpu"] and host["launches"] == []
    assert host["error"] == "interrupted (SIGTERM)" and "exited with status" not in stderr


def test_resume_after_kill_9_makes_the_bundle_from_what_is_on_disk(tmp_path):
    """kill -9 leaves no bundle; the agent sees its controller gone and ends its ranks; --resume
    keeps the finished launch as it was recorded and runs the rest."""
    out = tmp_path / "results"
    process = _start_run("short-second-launch.yaml", out)
    first = _wait_for_first_launch(process, out)[0]
    process.kill()
    process.communicate(timeout=30)
    (run_dir,) = out.iterdir()
    assert not (run_dir / "bundle.json").exists()
    deadline = time.time() + 30
    while _agent_processes(str(out)):
        assert time.time() < deadline, "the agent outlived its killed controller"
        time.sleep(0.2)
    resumed = cli("run", "--resume", run_dir, "--out", out, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    # The launch that finished is said to be kept, not "not run" or "skipped".
    assert re.search(r"\] 2 launches, 1 finished before, estimated .* for the rest: 00-collectives-default-ws2 \(finished before\), "
                     r"01-ddp-default-ws2 \(1 configuration, ", resumed.stderr), resumed.stderr
    assert "00-collectives-default-ws2 finished in the run resumed: kept" in resumed.stderr
    assert bundle_path_from(resumed.stdout) == run_dir / "bundle.json"
    bundle = read_bundle(run_dir / "bundle.json")
    host = bundle["hosts"][0]
    assert bundle["complete"] is True and host["status"] == "ok", host["error"]
    assert [l["id"] for l in host["launches"]] == ["00-collectives-default-ws2", "01-ddp-default-ws2"]
    assert host["launches"][0] == first  # taken from disk, not run again
    assert {r["suite"] for r in host["runs"]} == {"collectives", "ddp"}


def test_resume_keeps_every_earlier_raw_file_and_seals_only_what_the_plan_made(tmp_path):
    """A run folder whose raw files have a gap in their numbering (raw.001.json gone) and hold a launch
    the plan never had: the resume moves raw.json past the highest number, and leaves the stranger out."""
    out = tmp_path / "results"
    first = cli("run", "--plan", TEST_PLANS / "short-second-launch.yaml", "--out", out, timeout=300)
    assert first.returncode == 0, first.stderr
    run_dir = bundle_path_from(first.stdout).parent
    (run_dir / "bundle.json").unlink()
    host_dir = run_dir / "hosts" / "local"
    raw = json.loads((host_dir / "raw.json").read_text())
    stranger = {**raw["launches"][0], "id": "07-ddp-socket-ws64"}
    (host_dir / "raw.002.json").write_text(json.dumps({**raw, "launches": [stranger],
                                                       "runs": [{**raw["runs"][0], "launch_id": stranger["id"]}]}))
    kept = (host_dir / "raw.002.json").read_bytes()
    resumed = cli("run", "--resume", run_dir, "--out", out, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert (host_dir / "raw.002.json").read_bytes() == kept and (host_dir / "raw.003.json").exists()
    assert ("warning: --resume " + str(run_dir) + ": host local: launch '07-ddp-socket-ws64' is not one the run's plan "
            "makes; left out of the bundle") in resumed.stderr
    host = read_bundle(run_dir / "bundle.json")["hosts"][0]
    assert [l["id"] for l in host["launches"]] == ["00-collectives-default-ws2", "01-ddp-default-ws2"]
    assert "07-ddp-socket-ws64" not in {r["launch_id"] for r in host["runs"]}
