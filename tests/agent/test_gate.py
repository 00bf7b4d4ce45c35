"""The P2P gate before training, for real on the CPU (gloo standing in for the GPUs' path): a
planted wrong contribution marks the host, the runs that still used the path and says it in one
line; the plan goes on without P2P where it allows it; a rank that hangs is ended at the limit."""
from __future__ import annotations

import os
from pathlib import Path
import time

import psutil
import pytest
import yaml

from bench.agent import gate
from bench.agent.planning import Launch
from bench.bundle import read_bundle
from bench.judging.health import health_warnings, p2p_gate
from bench.common.protocol import Placement
from bench.common.run import Run
from bench.controller.plans import check
from bench.errors import UserError
from bench.suites.base import HostResults
from bench.suites import get as suite
from bench.judging import machine
from tests.conftest import cli

TINY = {"ops": ["all_reduce"], "dtypes": ["float32"], "in_place": [True], "begin_bytes": 4096, "end_bytes": 4096,
        "factor": 4, "warmup_iters": 1, "iters": 2, "repetitions": 2}
PLAN = {
    "name": "gate-cpu", "timeout_s": 240,
    "suites": [
        # default: rerouted through host memory where the gate found P2P wrong (the 1-rank run uses no link)
        {"suite": "collectives", "transports": ["default"], "world_sizes": [1, 2], "params": TINY},
        # a P2P setting of its own (the plan asks for P2P on): kept, and its run marked
        {"suite": "collectives", "transports": ["default"], "world_sizes": [2], "env": {"NCCL_P2P_DISABLE": "0"},
         "params": {**TINY, "begin_bytes": 8192, "end_bytes": 8192}},
    ],
}


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> tuple:
    """`ddpbench run` with one rank of the gate's P2P arm contributing a wrong value."""
    tmp = tmp_path_factory.mktemp("planted")
    (tmp / "plan.yaml").write_text(yaml.safe_dump(PLAN))
    (tmp / "hosts.yaml").write_text(yaml.safe_dump({"hosts": [{
        "name": "local", "runtime": "local", "env": {"OMP_NUM_THREADS": "1", gate.PLANTED_FAULT: "wrong:1"}}]}))
    done = cli("run", "--hosts", tmp / "hosts.yaml", "--plan", tmp / "plan.yaml", "--out", tmp / "results")
    bundle_path = next((tmp / "results").glob("*/bundle.json"))
    return done, read_bundle(bundle_path), bundle_path.parent


def test_a_wrong_value_under_p2p_marks_the_host_in_one_line_with_its_fix(planted):
    done, bundle, _ = planted
    assert done.returncode == 0, done.stderr
    fp = bundle["hosts"][0]["fingerprint"]
    record = fp["gate"]
    assert (record["verdict"], record["planted_fault"], record["backend"], record["ranks"]) == ("p2p_faulty", "wrong:1", "gloo", 2)
    p2p, off = record["arms"]
    assert (p2p["name"], p2p["status"], off["name"], off["status"]) == ("p2p", "wrong", "p2p_off", "ok")
    wrong = {(check["op"], check["size_bytes"]): check["wrong"] for check in p2p["checks"]}
    assert wrong[("all_reduce", 4096)] and not wrong[("send_recv", 4096)]  # the sum went wrong, the copies did not
    assert "element 0 is 4, expected 3" in wrong[("all_reduce", 4096)][0]
    assert record["duration_s"] >= p2p["duration_s"] + off["duration_s"] > 0  # the gate's own cost
    lines = [line for line in health_warnings(fp) if line.startswith("P2P gate:")]
    assert len(lines) == 1 and lines == p2p_gate(fp)
    for fix in ("NCCL_P2P_DISABLE=1", "driver", "ACS", "planted fault wrong:1"):
        assert fix in lines[0]
    assert done.stderr.count("warning: P2P gate:") == 1  # said once while it ran


def test_the_plan_goes_on_without_p2p_where_it_allows_and_marks_the_runs_that_kept_it(planted):
    done, bundle, folder = planted
    host = bundle["hosts"][0]
    assert host["fingerprint"]["gate"]["rerouted_launches"] == ["00-collectives-default-ws2"]
    runs = {run["launch_id"]: run for run in host["runs"]}
    rerouted = runs["00-collectives-default-ws2"]
    assert rerouted["transport"]["p2p_off_by_gate"] is True and rerouted["transport"]["env"]["NCCL_P2P_DISABLE"] == "1"
    assert "warnings" not in rerouted and "warnings" not in runs["00-collectives-default-ws1"]
    assert "p2p_off_by_gate" not in runs["00-collectives-default-ws1"]["transport"]
    kept = runs["01-collectives-default-ws2"]
    assert [w["code"] for w in kept["warnings"]] == ["p2p_gate_failed"]
    assert "all_reduce wrong at 4 KiB" in kept["warnings"][0]["message"]
    assert "warning: host local: 01-collectives-default-ws2: p2p_gate_failed:" in done.stderr
    report = (folder / "report.md").read_text()
    assert "P2P gate: with P2P as this box has it" in report
    assert "default (gloo), P2P off by the gate" in report and "⚠ p2p_gate_failed" in report


def test_each_launch_records_where_its_ranks_ran(planted):
    _, bundle, _ = planted
    for launch in bundle["hosts"][0]["launches"]:
        ranks = launch["placement"]
        assert [rank["local_rank"] for rank in ranks] == list(range(launch["world_size"]))
        assert all(rank["cpus"] and rank["cpu_nodes"] and rank["gpu_numa_node"] is None for rank in ranks)


def test_a_rank_that_hangs_is_ended_at_the_gates_limit(tmp_path):
    began = time.monotonic()
    # short, yet long enough for the control arm's two processes to import torch on a busy 2-core machine
    record = gate.run(2, False, {**os.environ, gate.PLANTED_FAULT: "hang:1"}, tmp_path, limit_s=15)
    p2p = record["arms"][0]
    assert (p2p["status"], record["verdict"]) == ("hung", "p2p_faulty"), record["arms"][-1]["error"]
    assert "still running after 15 s: ended" in p2p["error"] and 15 <= p2p["duration_s"] < 15 + 10
    assert time.monotonic() - began < 60
    ranks_left = [p for p in psutil.Process().children(recursive=True) if "bench.agent.gate" in " ".join(p.cmdline())]
    assert not ranks_left  # every rank ended (other tests' session daemons may be children too)
    assert "the ranks hung" in p2p_gate({"gate": record})[0]


def test_an_honest_cpu_passes_with_one_arm(tmp_path):
    record = gate.run(2, False, {k: v for k, v in os.environ.items() if k != gate.PLANTED_FAULT}, tmp_path, nccl_version="2.31.0")
    assert record["verdict"] == "ok" and [arm["name"] for arm in record["arms"]] == ["p2p"]  # gloo: no control needed
    assert all(check["checked"] == 2 and not check["wrong"] for check in record["arms"][0]["checks"])
    assert p2p_gate({"gate": record}) == []
    # NCCL's diagnostics need NCCL: on the CPU the record says so, and no arm ran for them
    diagnostics = record["nccl_diagnostics"]
    assert (diagnostics["status"], diagnostics["reason"]) == ("not_run", "no GPU: the ranks talk over gloo, not NCCL")
    assert not (tmp_path / "nccl_diagnostics").exists()


def test_an_arm_of_fewer_checks_expects_only_those(tmp_path):
    """The diagnostics arm's shape (one all_reduce of one size), run for real over gloo."""
    env = {k: v for k, v in os.environ.items() if k != gate.PLANTED_FAULT}
    arm = gate._arm("nccl_diagnostics", 2, False, env, gate.DIAGNOSTICS_ENV, gate.CPU_SIZES[:1], tmp_path, 60, ops=("all_reduce",))
    assert (arm["status"], arm["error"], arm["env"]) == ("ok", None, {"NCCL_RUN_DIAGNOSTICS": "1"})
    assert [(check["op"], check["size_bytes"], check["checked"]) for check in arm["checks"]] == [("all_reduce", 4096, 2)]


def test_an_agent_run_in_a_relative_folder_passes_its_gate(tmp_path, monkeypatch):
    """On Slurm the agent runs with --out out: the gate's store once became file://out/..., a folder
    under /, and both arms hung to their limit and marked an honest host faulty."""
    monkeypatch.chdir(tmp_path)
    record = gate.run(2, False, {k: v for k, v in os.environ.items() if k != gate.PLANTED_FAULT}, Path("out/gate"), limit_s=30)
    assert record["verdict"] == "ok" and [arm["status"] for arm in record["arms"]] == ["ok"]
    assert record["duration_s"] < 30


def test_a_plan_cannot_plant_a_fault():
    plan = {**PLAN, "suites": [{**PLAN["suites"][0], "env": {gate.PLANTED_FAULT: "wrong:1"}}]}
    with pytest.raises(UserError, match=gate.PLANTED_FAULT):
        check(plan, "gate-cpu")


def launch(launch_id: str, preset: str = "default", ranks: int = 2, env: "dict | None" = None) -> Launch:
    return Launch(id=launch_id, suite="collectives", preset=preset, backend="nccl", nproc_per_node=ranks,
                  nodes=Placement(), params={}, timeout_s=60, env=env or {})


def test_reroute_sends_only_what_the_plan_leaves_to_it_through_host_memory():
    launches = [launch("default-ws2"), launch("default-ws1", ranks=1), launch("off-ws2", "p2p_off", env={"NCCL_P2P_DISABLE": "1"}),
                launch("level-ws2", env={"NCCL_P2P_LEVEL": "NVL"}), launch("socket-ws2", "socket")]
    for verdict in ("ok", "p2p_off_faulty", "faulty"):  # nothing to route around, or nowhere to go
        record = {"verdict": verdict, "rerouted_launches": []}
        gate.reroute(launches, record)
        assert not record["rerouted_launches"] and not any(l.p2p_off_by_gate for l in launches)
    record = {"verdict": "p2p_faulty", "rerouted_launches": []}
    gate.reroute(launches, record)
    assert record["rerouted_launches"] == ["default-ws2"]
    assert launches[0].env == {"NCCL_P2P_DISABLE": "1"} and launches[3].env == {"NCCL_P2P_LEVEL": "NVL"}


def gate_record(verdict: str) -> dict:
    arm = {"env": {}, "error": None, "duration_s": 1.0, "nccl_used": ["P2P"],
           "checks": [{"op": "device_copy", "size_bytes": 4096, "checked": 2, "wrong": []}]}
    bad = {**arm, "status": "wrong", "checks": [{"op": "device_copy", "size_bytes": 4096, "checked": 2,
                                                  "wrong": ["cuda0→cuda1: 1 of 1024 values wrong, element 7 is 0, expected 8"]}]}
    p2p_bad, off_bad = verdict in ("p2p_faulty", "faulty"), verdict in ("p2p_off_faulty", "faulty")
    return {"ranks": 2, "backend": "nccl", "sizes_bytes": [4096], "limit_s": 90, "planted_fault": None,
            "arms": [{**(bad if p2p_bad else {**arm, "status": "ok"}), "name": "p2p"},
                     {**(bad if off_bad else {**arm, "status": "ok"}), "name": "p2p_off", "env": {"NCCL_P2P_DISABLE": "1"}}],
            "verdict": verdict, "rerouted_launches": [], "duration_s": 2.0}


def a_run(suite_name: str, params: dict, world_size: int, env: dict, used: list) -> dict:
    return {"suite": suite_name, "params": params, "world_size": world_size, "status": "ok", "metrics": {},
            "launch_id": "x", "transport": {"preset": "default", "backend": "nccl", "env": env, "nccl_used": used,
                                            "matches_preset": True}}


@pytest.mark.parametrize("verdict, marked", [
    ("ok", []),
    ("p2p_faulty", ["peer copy", "p2p ring"]),
    ("p2p_off_faulty", ["shm ring"]),
    ("faulty", ["peer copy", "p2p ring", "shm ring"]),
])
def test_the_runs_marked_are_those_that_took_the_path_the_gate_found_wrong(verdict, marked):
    runs = {
        # the copy suite's device-to-device copies go peer to peer past NCCL, whatever its environment
        "peer copy": a_run("copy", {"direction": "d2d"}, 1, {}, []),
        "host copy": a_run("copy", {"direction": "h2d"}, 1, {}, []),
        "p2p ring": a_run("collectives", {}, 2, {}, ["P2P"]),
        "shm ring": a_run("collectives", {}, 2, {"NCCL_P2P_DISABLE": "1"}, ["SHM"]),
        "socket": a_run("collectives", {}, 2, {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}, ["NET/Socket"]),
        "one rank": a_run("collectives", {}, 1, {}, []),
    }
    results = HostResults([Run(run) for run in runs.values()], [{"id": "x"}], {"gate": gate_record(verdict)})
    found = {name for name, run in runs.items() if machine.warnings(Run(run), results, suite(run["suite"]))}
    assert sorted(found) == sorted(marked)
    if verdict == "p2p_faulty":
        assert "device-to-device copies wrong at 4 KiB" in machine.warnings(Run(runs["peer copy"]), results, suite("copy"))[0]["message"]


def test_a_gate_without_p2p_wrong_says_which_path_failed():
    assert "path through host memory is broken" in p2p_gate({"gate": gate_record("p2p_off_faulty")})[0]
    assert "--shm-size=1g" in p2p_gate({"gate": gate_record("p2p_off_faulty")})[0]
    assert "neither path between these GPUs is right" in p2p_gate({"gate": gate_record("faulty")})[0]


def test_the_gate_runs_where_two_or_more_gpus_share_a_host(tmp_path):
    from bench.common.host import Capabilities

    cpu, one_gpu, two_gpus = Capabilities(gpu_count=0, logical_cpus=2), Capabilities(gpu_count=1), Capabilities(gpu_count=2)
    assert gate.ranks_to_check(cpu, [launch("a", ranks=1)]) == 0
    assert gate.ranks_to_check(cpu, [launch("a", ranks=1), launch("b", ranks=2)]) == 0  # a CPU has no P2P to check
    planted = {gate.PLANTED_FAULT: "wrong:1"}  # ... but the tests watch the gate's path there, gloo standing in
    assert gate.ranks_to_check(cpu, [launch("a", ranks=1), launch("b", ranks=2)], planted) == 2
    assert gate.ranks_to_check(cpu, [launch("a", ranks=1)], planted) == 0
    assert gate.ranks_to_check(one_gpu, [launch("a", ranks=1)]) == 0
    assert gate.ranks_to_check(two_gpus, [launch("a", ranks=1)]) == 2  # the copy suite's one process uses both GPUs
    assert gate.ranks_to_check(two_gpus, []) == 0  # nothing left to run
    events, fp = [], {}
    gate.check_host([launch("a")], two_gpus, fp, tmp_path, {"CUDA_VISIBLE_DEVICES": "1"}, events.append)
    assert (events, fp) == ([], {})  # the ranks would see one GPU: nothing to check
