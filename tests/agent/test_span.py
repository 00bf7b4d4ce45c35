"""An entry's span on a multi-node job (a hosts file's group, a slurm job of several nodes): all_nodes,
one job over every node; first_node, the first node alone, after the job's own launches, the other
nodes recording it skipped. And the shipped two-nodes plan that uses it: valid, planned on both
nodes of a group with and without a GPU, and lean on GPU time; and the hosts file of two boxes it is
run with."""

from __future__ import annotations

import pytest

from bench.agent.planning import plan_launches
from bench.common.host import Capabilities
from bench.common.protocol import Placement
from bench.controller.hosts import load_hosts
from bench.controller.inventory import Group, Host, Inventory
from bench.controller.plans import check, load_plan, with_defaults
from bench.controller.run import _check_placements
from bench.errors import PlanError, UserError
from benchmarks import plan_durations
from tests.conftest import REPO

SWEEP = {"ops": ["all_reduce"], "dtypes": ["float32"], "in_place": [True], "begin_bytes": 4096, "end_bytes": 8192,
         "factor": 2, "warmup_iters": 1, "iters": 1, "repetitions": 3}
TWO_GPUS = Capabilities(gpu_count=2, gpu_memory_bytes=80 << 30, gpu_memory_free_bytes=80 << 30, logical_cpus=32,
                        host_memory_bytes=512 << 30, nccl_version="2.28.9")
CPU_HOST = Capabilities(gpu_count=0, logical_cpus=2)
FIRST, SECOND = (Placement(nnodes=2, node_rank=rank, rendezvous="10.0.0.2:29400", job_id="j") for rank in (0, 1))
SKIPPED = "span: first_node runs it on the job's first node alone"
TWO_NODES = REPO / "benchmarks" / "plans" / "two-nodes.yaml"


def plan(*entries: dict) -> dict:
    return check({"name": "t", "timeout_s": 240, "suites": [{"suite": "collectives", "params": SWEEP, **e} for e in entries]}, "t")


def planned(launches: list) -> list:
    return [(l.id, l.nodes.nnodes, l.world_size, l.skipped_reason) for l in launches]


def test_a_first_node_entry_runs_on_the_groups_first_host_alone_after_the_groups_launches():
    both = plan({"span": "first_node", "world_sizes": [1, 2]}, {"world_sizes": [2]})
    assert planned(plan_launches(both, TWO_GPUS, FIRST)) == [
        ("01-collectives-default-ws4", 2, 4, ""),
        ("00-collectives-default-ws1", 1, 1, ""),
        ("00-collectives-default-ws2", 1, 2, ""),
    ]
    assert planned(plan_launches(both, TWO_GPUS, SECOND)) == [
        ("01-collectives-default-ws4", 2, 4, ""),
        ("00-collectives-default-ws1", 1, 1, SKIPPED),
        ("00-collectives-default-ws2", 1, 2, SKIPPED),
    ]


def test_on_a_host_of_one_node_the_span_changes_nothing():
    alike = plan({"world_sizes": [2]}, {"world_sizes": [2], "span": "first_node"})
    # One node: the two entries are one configuration, run once.
    assert planned(plan_launches(alike, TWO_GPUS)) == [
        ("00-collectives-default-ws2", 1, 2, ""),
        ("01-collectives-default-ws2", 1, 2, "the same configuration as launch 00-collectives-default-ws2, which runs it once"),
    ]
    # A group: two nodes of 2 GPUs, and the first node's 2 GPUs alone.
    assert planned(plan_launches(alike, TWO_GPUS, FIRST)) == [
        ("00-collectives-default-ws4", 2, 4, ""), ("01-collectives-default-ws2", 1, 2, "")]


def test_the_span_may_be_set_for_gpu_hosts_alone():
    entry = plan({"world_sizes": [1], "gpu": {"span": "first_node"}})
    assert planned(plan_launches(entry, TWO_GPUS, FIRST)) == [("00-collectives-default-ws1", 1, 1, "")]
    assert planned(plan_launches(entry, CPU_HOST, FIRST)) == [("00-collectives-default-ws2", 2, 2, "")]


def test_a_first_node_entry_that_needs_nodes_is_refused_before_any_host_and_by_the_agent():
    tiny = {"model": "tiny-llama", "micro_batch": 1, "seq_len": 32, "global_batches": [4], "steps": 2, "warmup_steps": 1,
            "precision": "fp32", "weights_dtype": "float32", "activation_checkpointing": False, "sharding": "hybrid"}
    hybrid = with_defaults({"name": "t", "suites": [{"suite": "fsdp", "span": "first_node", "world_sizes": [2], "params": tiny}]})
    pair = Inventory(hosts=(Host("a", address="127.0.0.2"), Host("b", address="127.0.0.3")), groups=(Group("pair", ("a", "b")),))
    with pytest.raises(UserError, match=r"host 'a': the plan's suites\[0\]: fsdp: sharding hybrid \(HSDP\) .* runs on one node"):
        _check_placements(pair, hybrid)
    with pytest.raises(PlanError, match=r"runs on one node"):
        plan_launches(hybrid, CPU_HOST, FIRST)
    _check_placements(pair, with_defaults({**hybrid, "suites": [{**hybrid["suites"][0], "span": "all_nodes"}]}))


def test_the_two_nodes_plan_runs_its_baseline_on_the_first_node_with_a_gpu_and_without():
    two_nodes = load_plan(str(TWO_NODES))
    for host in (TWO_GPUS, CPU_HOST):
        first = [(l.suite, l.nodes.nnodes, l.world_size) for l in plan_launches(two_nodes, host, FIRST) if not l.skipped_reason]
        assert [launch for launch in first if launch[0] == "ddp"][-2:] == [("ddp", 1, 1), ("ddp", 1, 2)]
        assert {world for _, nodes, world in first if nodes == 2} == {4}
        second = plan_launches(two_nodes, host, SECOND)
        assert [l.skipped_reason for l in second if l.nodes.nnodes == 1] == [SKIPPED, SKIPPED]


def test_the_two_nodes_plan_is_lean_on_gpu_time():
    """About two and a half minutes of a 2-GPU node's time by the cost model, the P2P gate included: it runs on lent GPUs."""
    seconds, launches, _, _ = plan_durations.plan_seconds(load_plan(str(TWO_NODES)), plan_durations.MACHINES["2x H200 (NV18)"], nodes=2)
    assert launches == 6 and seconds <= 180


def test_the_two_boxes_hosts_file_is_one_group_reached_directly():
    two_boxes = load_hosts(REPO / "hosts" / "two-boxes.yaml")
    (pair,) = two_boxes.groups
    assert pair.hosts == ("box-a", "box-b") and pair.rendezvous_address and pair.socket_ifname
    assert {(h.runtime, h.accept_new_host_key) for h in two_boxes.hosts} == {("native", True)}
