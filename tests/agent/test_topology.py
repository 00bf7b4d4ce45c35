"""Past two GPUs and past one node, on the CPU: NCCL's algorithm and protocol as a plan's axis and its
checks before any launch, emulated nodes, GPU selection and pairs, and a run's setting (its entry's
env among it) as part of its identity in the bundle, the report and compare."""

from __future__ import annotations

import copy

import pytest

from bench.agent.fingerprint import collect
from bench.agent.planning import plan_launches
from bench.agent.runner import run_plan
from bench.bundle import read_bundle, write_bundle
from bench.bundle.assembly import host_entry, new_bundle, new_run_id, settle
from bench.common.host import Capabilities
from bench.common.timestamps import utc_timestamp
from bench.controller.plans import check
from bench.controller.resume import launch_of_plan
from bench.errors import PlanError
from bench.report.document import Paragraph
from bench.report.merge import merge
from bench.suites.collectives.report import collectives_table, pairs_blocks
from bench.verify.compare import DEFAULT_TOLERANCE, compare_bundles
from tests.conftest import cli
from tests.e2e.test_bad_input import assert_one_line_error

SWEEP = {"ops": ["all_reduce"], "dtypes": ["float32"], "in_place": [True], "begin_bytes": 4096, "end_bytes": 8192,
         "factor": 2, "warmup_iters": 1, "iters": 1, "repetitions": 3}
FOUR_GPUS = Capabilities(gpu_count=4, gpu_memory_bytes=80 << 30, gpu_memory_free_bytes=80 << 30, logical_cpus=64,
                         host_memory_bytes=512 << 30, nccl_version="2.28.9")
# Four cores claimed: the planner gives a CPU host no more ranks than cores, and 2 nodes of 2 run 4.
CPU_HOST = {"gpus": [], "cpu": {"logical_cpus": 4}, "network": {"infiniband": []}}


def plan(*entries: dict) -> dict:
    return check({"name": "t", "timeout_s": 240, "suites": [{"suite": "collectives", "params": SWEEP, **e} for e in entries]}, "t")


def launches(host: Capabilities, *entries: dict) -> list:
    return plan_launches(plan(*entries), host)


# --- the algorithm and protocol axis ----------------------------------------------------------------

def test_each_algorithm_is_a_launch_of_its_own_asking_nccl_for_it_per_collective():
    found = launches(FOUR_GPUS, {"world_sizes": [4], "algorithms": ["ring", "tree"], "protocols": ["default", "ll128"]})
    assert [(l.id, l.env.get("NCCL_ALGO"), l.env.get("NCCL_PROTO")) for l in found] == [
        ("00-collectives-default-ring-ws4", "allreduce:ring", None), ("00-collectives-default-ring-ll128-ws4", "allreduce:ring", "allreduce:ll128"),
        ("00-collectives-default-tree-ws4", "allreduce:tree", None), ("00-collectives-default-tree-ll128-ws4", "allreduce:tree", "allreduce:ll128"),
    ]
    assert all(launch_of_plan(l.id, plan({"world_sizes": [4], "algorithms": ["ring", "tree"], "protocols": ["default", "ll128"]}))
               for l in found)


def test_one_rank_runs_once_whatever_the_algorithms():
    found = launches(FOUR_GPUS, {"world_sizes": [1, 2], "algorithms": ["ring", "tree"]})
    assert [(l.id, l.skipped_reason, "NCCL_ALGO" in l.env) for l in found] == [
        ("00-collectives-default-ws1", "", False),
        ("00-collectives-default-tree-ws1", "one rank runs no collective over a link: its run is the one under algorithm 'ring', "
                                           "protocol 'default'", True),
        ("00-collectives-default-ring-ws2", "", True), ("00-collectives-default-tree-ws2", "", True),
    ]


@pytest.mark.parametrize("entry, host, message", [
    ({"algorithms": ["tree"], "params": {**SWEEP, "ops": ["all_reduce", "all_gather"]}}, FOUR_GPUS,
     "collectives: algorithm 'tree' cannot apply to all_gather: NCCL runs AllGather with ring or pat; remove 'tree' or give "
     "all_gather an entry of its own"),
    ({"algorithms": ["ring"], "params": {**SWEEP, "ops": ["sendrecv"]}}, FOUR_GPUS,
     "collectives: algorithm 'ring' cannot apply to sendrecv: NCCL chooses no algorithm for it"),
    ({"algorithms": ["pat"], "world_sizes": [4], "params": {**SWEEP, "ops": ["all_gather"]}}, FOUR_GPUS,
     "algorithm 'pat' runs with one GPU per node only (NCCL's PAT), this launch has 4 ranks a node"),
    ({"algorithms": ["tree"]}, Capabilities(gpu_count=2, gpu_memory_bytes=80 << 30, nccl_version="2.21.5"),
     "collectives: NCCL 2.21.5 here has no per-collective NCCL_ALGO and NCCL_PROTO (NCCL 2.24 and later)"),
    ({"algorithms": ["tree"]}, Capabilities.of(CPU_HOST),
     "collectives: algorithms ['tree'] and protocols ['default'] choose NCCL's, and this host has no GPU, so its ranks talk "
     "over gloo, which has one algorithm a collective; put them in the entry's gpu: block"),
    ({"algorithms": ["tree"], "transports": ["gloo"]}, FOUR_GPUS, "and transport 'gloo' talks over gloo, which has one algorithm a collective"),
    ({"env": {"NCCL_ALGO": "Tree"}}, FOUR_GPUS,
     "collectives: env NCCL_ALGO=Tree applies to every collective, and NCCL runs all-gather and broadcast with Ring only"),
    ({"env": {"NCCL_ALGO": "allreduce:tree"}, "algorithms": ["ring"]}, FOUR_GPUS,
     "collectives: env NCCL_ALGO and algorithms both set NCCL's algorithm; set it in algorithms only"),
])
def test_a_choice_that_cannot_apply_is_refused_before_any_launch(entry, host, message):
    with pytest.raises(PlanError) as refused:
        launches(host, entry)
    assert message in str(refused.value)


def test_the_axis_in_the_gpu_block_leaves_a_cpu_host_its_gloo_run():
    (launch,) = launches(Capabilities.of(CPU_HOST), {"world_sizes": [2], "gpu": {"algorithms": ["ring", "tree"]}})
    assert launch.id == "00-collectives-default-ws2" and "NCCL_ALGO" not in launch.env


def test_run_refuses_an_algorithm_a_collective_has_not_in_one_line_before_any_host(tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_text("name: t\nsuites:\n  - suite: collectives\n    algorithms: [tree]\n"
                    "    params: {ops: [reduce_scatter], dtypes: [float32], in_place: [true], begin_bytes: 4096, end_bytes: 8192,"
                    " factor: 2, warmup_iters: 1, iters: 1, repetitions: 1}\n")
    assert_one_line_error(cli("run", "--plan", str(path), "--out", str(tmp_path / "results")),
                          "the plan's suites[0]: collectives: algorithm 'tree' cannot apply to reduce_scatter")
    assert not (tmp_path / "results").exists()


# --- emulated nodes -----------------------------------------------------------------------------

def test_emulated_nodes_split_each_launch_and_the_preset_names_the_link_between_them():
    found = launches(FOUR_GPUS, {"transports": ["socket"], "world_sizes": [2, "all"], "nodes": 2})
    assert [(l.id, l.topology.count, l.topology.ranks_per_node) for l in found] == [
        ("00-collectives-socket-n2-ws2", 2, 1), ("00-collectives-socket-n2-ws4", 2, 2)]
    # Inside each node NCCL keeps P2P and SHM; the host ids send the rest over its network path.
    assert {k: v for k, v in found[1].env.items() if k.endswith("_DISABLE")} == {"NCCL_IB_DISABLE": "1"}


def test_a_world_size_the_nodes_do_not_divide_is_refused():
    with pytest.raises(PlanError, match="nodes: 2 splits each launch's ranks into 2 nodes, and world size 3 does not divide"):
        launches(FOUR_GPUS, {"world_sizes": [3], "nodes": 2})
    (skipped,) = launches(Capabilities(gpu_count=3, gpu_memory_bytes=80 << 30), {"nodes": 2})
    assert skipped.skipped_reason == "world size all is 3 here, which 2 nodes do not divide"


# --- GPU selection and pairs -------------------------------------------------------------------

def test_named_gpus_are_the_ranks_devices_in_nvidia_smis_order():
    found = launches(FOUR_GPUS, {"world_sizes": [1, "all"], "gpus": [2, 0]})
    assert [(l.id, l.env["CUDA_VISIBLE_DEVICES"], l.env["CUDA_DEVICE_ORDER"]) for l in found] == [
        ("00-collectives-default-g2-ws1", "2", "PCI_BUS_ID"), ("00-collectives-default-g2.0-ws2", "2,0", "PCI_BUS_ID")]


def test_pairs_run_every_pair_of_the_hosts_gpus():
    found = launches(FOUR_GPUS, {"world_sizes": [2], "pairs": "all"})
    assert [l.gpus for l in found] == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    assert all(launch_of_plan(l.id, plan({"world_sizes": [2], "pairs": "all"})) for l in found)


@pytest.mark.parametrize("entry, host, message", [
    ({"gpus": [0, 4]}, FOUR_GPUS, "collectives: gpus: [0, 4] names GPU 4, this host has 4 (0 to 3); name GPUs of this host"),
    ({"gpus": [0]}, Capabilities.of(CPU_HOST), "collectives: gpus: [0] names GPUs, this host has none; put it in the entry's gpu: block"),
    ({"pairs": "all", "world_sizes": [2]}, Capabilities(gpu_count=1, gpu_memory_bytes=80 << 30),
     "pairs: all runs every pair of GPUs, this host has 1"),
    ({"pairs": "all", "world_sizes": [4]}, FOUR_GPUS, "pairs: all runs two ranks a pair, and the entry asks world sizes [4]"),
    ({"gpus": [1], "env": {"CUDA_VISIBLE_DEVICES": "1"}}, FOUR_GPUS, "both choose GPUs; choose them in one place"),
])
def test_a_gpu_selection_this_host_cannot_give_is_refused(entry, host, message):
    with pytest.raises(PlanError) as refused:
        launches(host, entry)
    assert message in str(refused.value)


def test_gpus_on_a_host_without_one_is_one_error_line(tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_text("name: t\nsuites:\n  - suite: collectives\n    gpus: [0, 1]\n"
                    "    params: {ops: [all_reduce], dtypes: [float32], in_place: [true], begin_bytes: 4096, end_bytes: 8192,"
                    " factor: 2, warmup_iters: 1, iters: 1, repetitions: 1}\n")
    result = cli("run", "--plan", str(path), "--out", str(tmp_path / "results"))
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert errors == ["error: host local: failed: collectives: gpus: [0, 1] names GPUs, this host has none; put it in the "
                      "entry's gpu: block (hosts with GPUs only)"]
    assert not list((tmp_path / "results").rglob("*.log")), "torchrun was started"


# --- for real on the CPU: 2 nodes of 2 gloo processes, and two entries that differ only in env --------

@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("topology")
    the_plan = plan({"world_sizes": [4], "nodes": 2}, {"world_sizes": [2]}, {"world_sizes": [2], "env": {"NCCL_ALGO": "allreduce:tree"}})
    fingerprint = collect()  # this machine's, as the bundle holds it, with the four cores the planner wants
    fingerprint["cpu"]["logical_cpus"] = max(4, fingerprint["cpu"]["logical_cpus"] or 0)
    raw = run_plan(the_plan, folder / "agent", fingerprint)
    entry = host_entry(name="local", runtime="local", labels=(), raw=raw, error=None)
    settle(entry, True)
    path = folder / "bundle.json"
    write_bundle(path, new_bundle(new_run_id(), utc_timestamp(), the_plan, [entry]))
    return read_bundle(path)


def test_two_nodes_of_two_gloo_processes_run_and_are_recorded_as_planned(bundle):
    host = bundle["hosts"][0]
    assert [l["status"] for l in host["launches"]] == ["ok", "ok", "ok"]
    emulated = [r for r in host["runs"] if r["launch_id"] == "00-collectives-default-n2-ws4"]
    assert len(emulated) == 2 and all(r["status"] == "ok" and r["world_size"] == 4 for r in emulated)
    # gloo has no host id: the grouping is the plan's, and the bundle says nothing proved it.
    assert emulated[0]["transport"]["nodes"] == {"count": 2, "ranks_per_node": 2, "emulated": True, "proof": "planned"}


def test_the_entrys_env_is_recorded_and_keeps_two_configurations_apart_everywhere(bundle):
    runs = bundle["hosts"][0]["runs"]
    assert {r["launch_id"]: r.get("env") for r in runs} == {
        "00-collectives-default-n2-ws4": None, "01-collectives-default-ws2": None, "02-collectives-default-ws2": {"NCCL_ALGO": "allreduce:tree"}}
    comparison = merge([bundle])
    assert comparison.configurations == 6  # 2 sizes each of 2 nodes x 2, plain, and plain with the env
    rows = collectives_table(comparison).rows
    assert len(rows) == 6
    transports = sorted({row[2] for row in rows})
    assert transports == ["default (gloo)", "default (gloo), 2 emulated nodes x 2", "default (gloo), NCCL_ALGO=allreduce:tree"]
    assert all(row[8].endswith("n=3") for row in rows), "no row pools two entries' samples"
    verdicts = compare_bundles(bundle, bundle, {"busbw_gbps": DEFAULT_TOLERANCE}, [("local", "local")])
    assert len(verdicts) == 6
    assert sorted({v.transport for v in verdicts}) == ["default", "default, 2 emulated nodes x 2", "default, NCCL_ALGO=allreduce:tree"]


def test_the_report_names_the_slowest_pair_with_its_path_and_numa_nodes(bundle):
    """Seed 001's box: NVLink pairs (NV4) joined across sockets (SYS); two of the CPU runs stand for the
    pairs 0-1 and 1-3, at 10 and 1 GB/s."""
    doc = copy.deepcopy(bundle)
    host = doc["hosts"][0]
    host["fingerprint"]["topology"]["matrix"] = {
        f"GPU{a}": {f"GPU{b}": "NV4" if a // 2 == b // 2 else "SYS" for b in range(4) if b != a} for a in range(4)}
    host["fingerprint"]["numa"]["gpu_nodes"] = {f"GPU{a}": a // 2 for a in range(4)}
    for run in host["runs"]:
        pair = {"01-collectives-default-ws2": [0, 1], "02-collectives-default-ws2": [1, 3]}.get(run["launch_id"])
        if pair:
            run["gpus"] = pair
            run.pop("env", None)
            run["metrics"]["busbw_gbps"]["samples"] = [10.0 if pair == [0, 1] else 1.0] * 3
    blocks = pairs_blocks(merge([doc]))
    lines = [block.text for block in blocks if isinstance(block, Paragraph)]
    assert len(lines) == 1 and "the slowest pair is GPUs 1 and 3 (SYS, NUMA nodes 0 and 1)" in lines[0]
    assert "at 1 GB/s busbw, 10% of the fastest, GPUs 0 and 1 (NV4, NUMA node 0) at 10 GB/s" in lines[0]
    table = blocks[-1]
    assert [row[4:7] for row in table.rows] == [["0 – 1", "NV4", "0, 0"], ["1 – 3", "SYS", "0, 1"]]
