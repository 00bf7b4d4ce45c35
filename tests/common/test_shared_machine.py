"""A machine others were using is said to be, in the run's output and in the report's answer, with the
CPU share they took: a host whose launches other processes slowed, and hosts of one run that are one
machine (the loopback demo's), which took each other's CPU."""

from __future__ import annotations

import subprocess
import sys

from bench.judging import shared_machine
from tests.conftest import TEST_PLANS, bundle_path_from, cli


def _host(name: str, hostname: str, shares=(0.4, 0.6)) -> dict:
    return {"name": name, "fingerprint": {"host": {"hostname_sha256": hostname}, "cpu": {"model": "x"}, "memory_total_bytes": 1},
            "launches": [{"cpu_taken_by_others_fraction": share} for share in shares]}


def test_hosts_with_one_host_name_cpu_and_memory_are_one_machine():
    hosts = [_host("a", "0" * 16), _host("b", "0" * 16), _host("c", "1" * 16), {"name": "dead", "fingerprint": None, "launches": []}]
    assert shared_machine.shared(hosts) == [["a", "b"]]
    (line,) = shared_machine.warnings(hosts)
    assert line.startswith("hosts a, b are one machine (same host name, CPU and memory): they ran at the same time and "
                           "took each other's CPU (other processes took 40% to 60% of its CPU during their launches)")


def test_two_hosts_on_this_machine_are_warned_about_in_the_run_and_the_report(tmp_path):
    hosts = tmp_path / "two.yaml"
    hosts.write_text("hosts:\n  - name: one\n    runtime: local\n  - name: two\n    runtime: local\n")
    done = cli("run", "--hosts", hosts, "--plan", TEST_PLANS / "ssh-tiny.yaml", "--out", tmp_path / "results")
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if line.startswith("warning: hosts one, two are one machine")]
    assert len(warned) == 1
    report = (bundle_path_from(done.stdout).parent / "report.md").read_text()
    # A warning about one bundle's hosts stands beside them, not above every answer.
    hosts_section = report[report.index("## Hosts"):report.index("## Collectives")]
    assert "hosts one, two are one machine (same host name, CPU and memory): they ran at the same time" in hosts_section


def test_a_run_while_other_processes_take_the_cpu_warns_and_marks_its_answer(tmp_path):
    # Two busy loops on this 2-core machine take about half its CPU from the run's ranks: far above
    # the 10% at which a launch counts as busy, whatever else the machine runs.
    burners = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(2)]
    try:
        done = cli("run", "--plan", TEST_PLANS / "busy-tiny.yaml", "--out", tmp_path / "results")
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    assert done.returncode == 0, done.stderr
    (warned,) = [line for line in done.stderr.splitlines() if line.startswith("warning: host local: other processes took ")]
    assert "of the machine's CPU during 2 of its 2 launches" in warned and warned.endswith(
        "rerun on a quiet machine (nothing else running) to measure it")
    report = (bundle_path_from(done.stdout).parent / "report.md").read_text()
    answer = report[report.index("## The answer"):report.index("## Hosts")]
    (verdict,) = [line for line in answer.splitlines() if line.startswith("- local")]
    assert verdict.startswith("- local · CPU only (busy) — tiny fp32, 2 processes over default (gloo): "
                              "measured on a busy machine (others took ")
    assert verdict.endswith("Rerun on a quiet machine for this machine's own figures.")


def _gpu_health(index: int, processes: list) -> dict:
    return {"index": index, "memory_used_bytes": None, "processes": processes, "ecc_uncorrected_volatile": None,
            "ecc_corrected_volatile": None, "retired_pages_pending": None, "row_remap_pending": None, "row_remap_failed": None,
            "power_limit_w": None, "power_limit_default_w": None, "sm_clock_idle_mhz": None, "clock_reasons_idle": None}


def test_a_host_is_busy_where_others_took_its_cpu_or_were_on_its_gpus():
    quiet = {"name": "quiet", "fingerprint": {"health": {"source": "nvml", "gpus": [_gpu_health(0, [])]}},
             "launches": [{"id": "00-a", "cpu_taken_by_others_fraction": 0.001}, {"id": "01-b", "cpu_taken_by_others_fraction": None}]}
    cpu = {"name": "cpu", "fingerprint": None,
           "launches": [{"id": "00-a", "cpu_taken_by_others_fraction": 0.05}, {"id": "01-b", "cpu_taken_by_others_fraction": 0.62}]}
    gpu = {"name": "gpu", "fingerprint": {"health": {"source": "nvml", "gpus": [
        _gpu_health(0, []), _gpu_health(1, [{"pid": 7, "used_memory_bytes": 2 * 2**30}, {"pid": 9, "used_memory_bytes": None}])]}},
           "launches": []}
    assert shared_machine.busy_warnings([quiet, cpu, gpu]) == [
        "host cpu: other processes took 62% of the machine's CPU during 1 of its 2 launches (01-b), so their figures are "
        "this machine's shared with them, not its own; rerun on a quiet machine (nothing else running) to measure it",
        "host gpu: other processes were on GPU1 (2 processes, 2.0 GiB) before the first launch, so its figures may be "
        "theirs too; rerun when nothing else uses its GPUs"]
