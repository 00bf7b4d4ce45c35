"""A host's results are removed from it only after they arrived here intact: when this machine
cannot store them (a full disk; here a file size limit stands in for one), the host keeps its
work folder and the user is told where, in one line per problem and without a traceback."""

from __future__ import annotations

import json
import resource
import sys

import yaml

from tests.conftest import TEST_PLANS, cli

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
