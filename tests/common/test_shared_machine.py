"""Hosts of one run that are one machine (the loopback demo's) are said to be, in the run's output and
in the report's answer, with the CPU share they took from each other."""

from __future__ import annotations

from bench.common import shared_machine
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
    answer = report[report.index("## The answer"):report.index("## Hosts")]
    assert "hosts one, two are one machine (same host name, CPU and memory): they ran at the same time" in answer
