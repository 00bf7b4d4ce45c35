"""The two-nodes plan as a user with two boxes runs it: a hosts file whose two SSH hosts (real sshd on
loopback, runtime native, gloo on this CPU) form one group, `ddpbench run`, then the report. The
group's jobs span both hosts; the 1-rank baseline and the one-node run stay on the first host
(span: first_node), in the same bundle entry, so the answer scales both against that baseline."""

from __future__ import annotations

import json
import re
import sys

import yaml

from bench.bundle import read_bundle
from tests.conftest import REPO, bundle_path_from, cli
from tests.support.loopback_hosts import free_port

PLAN = REPO / "benchmarks" / "plans" / "two-nodes.yaml"
# "20.0% lost [4.1, 45.3]", or where the median scaled past perfect, "none lost (17.9% above perfect scaling, lost
# [-48.6, 6.5])"; an end below 0: above perfect scaling.
LOST = re.compile(r"(negligible|noticeable|severe)[^,]*, (\d+\.\d% lost|none lost \(\d+\.\d% above perfect scaling, lost) "
                  r"\[-?\d+\.\d, -?\d+\.\d\]")


def test_the_two_nodes_plan_over_a_group_answers_against_the_first_nodes_baseline(loopback_hosts, tmp_path):
    document = loopback_hosts.hosts_document(sys.executable, tmp_path / "work")
    document["hosts"] = document["hosts"][:2]
    document["groups"] = [{"name": "pair", "hosts": ["host1", "host2"], "socket_ifname": "lo",
                           "rendezvous_port": free_port("127.0.0.2")}]
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text(yaml.safe_dump(document, sort_keys=False))
    done = cli("run", "--hosts", hosts, "--plan", PLAN, "--out", tmp_path / "results", timeout=400)
    assert done.returncode == 0, done.stderr
    path = bundle_path_from(done.stdout)
    first, second = read_bundle(path)["hosts"]

    # Every run is on the first host's entry: the group's jobs over 2 nodes of 2 processes, and the
    # first node's own 1- and 2-process runs, which the second host records as skipped. The 1-process launch
    # also trains the 2-process run's work per rank (2 micro-batches accumulated): its like-with-like baseline.
    ddp = sorted((r["world_size"], (r["transport"].get("nodes") or {}).get("count", 1), r["params"]["grad_accum"])
                 for r in first["runs"] if r["suite"] == "ddp")
    assert ddp == [(1, 1, 2), (1, 1, 4), (2, 1, 2), (4, 2, 1)]
    assert second["runs"] == []
    skipped = {l["id"]: l["error"] for l in second["launches"] if l["status"] == "skipped"}
    assert skipped == {"02-ddp-default-ws1": "span: first_node runs it on the job's first node alone",
                       "02-ddp-default-ws2": "span: first_node runs it on the job's first node alone"}
    # The first node's own launches ran after the group's: the second host was done by then.
    raw = json.loads((path.parent / "hosts" / "host1" / "raw.json").read_text())
    assert [l["id"][:2] for l in raw["launches"]] == ["00", "01", "02", "02"]
    assert all(l["status"] == "ok" for l in raw["launches"])

    # The answer: a verdict with the throughput lost and its interval for 2 processes in one node
    # and for 4 over the two nodes, each against the first node's 1-process baseline.
    report = (path.parent / "report.md").read_text()
    answer = report[report.index("## The answer"):]
    answer = answer[:answer.index("\n## ", 1)]
    lines = [line for line in answer.splitlines() if line.startswith("- ")]
    assert "no scaling to judge" not in answer, answer
    for ranks in ("2 processes", "4 processes"):
        line = next((l for l in lines if f", {ranks} over " in l), None)
        assert line is not None and LOST.search(line), answer
    assert "2 nodes" in next(l for l in lines if ", 4 processes over " in l)
