"""A host's results are removed from it only after they arrived here intact: when this machine
cannot store them (a full disk; here a file size limit stands in for one), the host keeps its
work folder and the user is told where, in one line per problem and without a traceback; when the
host was lost, a resume collects what it kept before it runs anything again."""

from __future__ import annotations

import json
import resource
import sys

import yaml

from bench.bundle import read_bundle
from tests.conftest import TEST_PLANS, bundle_path_from, cli, start_cli
from tests.support.loopback_hosts import stop_host

LIMIT_BYTES = 4096  # run.json fits; the agent's raw.json (fingerprint, samples) does not


def test_results_stay_on_the_host_when_they_cannot_be_fetched(loopback_hosts, tmp_path):
    work = tmp_path / "work"
    document = loopback_hosts.hosts_document(sys.executable, work)
    document["hosts"] = document["hosts"][:1]
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text(yaml.safe_dump(document, sort_keys=False))
    out = tmp_path / "out"
    done = cli(
        "run", "--hosts", hosts, "--plan", TEST_PLANS / "ssh-tiny.yaml", "--out", out, timeout=240,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT_BYTES, LIMIT_BYTES)),
    )
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "could not be fetched intact; they stay on the host" in errors[0], done.stderr
    kept = list(work.rglob("out/raw.json"))
    assert len(kept) == 1, "the host's results were removed before they were fetched"
    assert json.loads(kept[0].read_text())["runs"], "the kept raw.json holds the measurements"


def test_a_lost_hosts_finished_launches_are_collected_before_anything_runs_again(loopback_hosts, tmp_path):
    """The host's sshd dies (with its sessions) after its first launch finished, before the controller
    fetched anything: once it is back, --resume collects what the host kept and runs only the rest."""
    victim = loopback_hosts.hosts[0]
    document = loopback_hosts.hosts_document(sys.executable, tmp_path / "work")
    document["hosts"] = document["hosts"][:1]
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text(yaml.safe_dump(document, sort_keys=False))
    out = tmp_path / "out"
    process = start_cli("run", "--hosts", hosts, "--plan", TEST_PLANS / "short-second-launch.yaml", "--out", out)
    seen = []
    try:
        while not any(line.startswith("[host1] 00-collectives-default-ws2 ok") for line in seen):
            line = process.stderr.readline()
            assert line, f"the run ended before its first launch did: {''.join(seen)}"
            seen.append(line)
        stop_host(victim, sessions_too=True)
        stdout, stderr = process.communicate(timeout=240)
    finally:
        process.kill()
        loopback_hosts.restart(victim)
    assert process.returncode == 1 and "lost the connection" in stderr, stderr
    run_dir = bundle_path_from(stdout).parent
    assert read_bundle(run_dir / "bundle.json")["hosts"][0]["launches"] == []  # nothing came back
    resumed = cli("run", "--hosts", hosts, "--resume", run_dir, "--out", out, timeout=300)
    assert resumed.returncode == 0 and "Traceback" not in resumed.stderr, resumed.stderr
    assert "[host1] 00-collectives-default-ws2 finished in the run resumed: kept" in resumed.stderr
    host = read_bundle(run_dir / "bundle.json")["hosts"][0]
    assert [l["id"] for l in host["launches"]] == ["00-collectives-default-ws2", "01-ddp-default-ws2"]
    assert {r["launch_id"] for r in host["runs"]} == {"00-collectives-default-ws2", "01-ddp-default-ws2"}
    kept = json.loads((run_dir / "hosts" / "host1" / "raw.001.json").read_text())  # what the host had kept, as it came
    assert host["launches"][0] == kept["launches"][0]
