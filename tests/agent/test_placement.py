"""Where each rank ran against its GPU's NUMA node, read from the consumer box's files (a rented
dual-socket 2x RTX 4090: GPU1 on node 1), judged per launch and named on the runs it touched."""
from __future__ import annotations


from bench.agent import placement
from bench.bundle.assembly import derive
from bench.judging.health import placement_splits
from tests.support import host_tree

GPU0, GPU1 = "00000000:01:00.0", "00000000:81:00.0"  # NVML's form of the fixture's addresses


def test_a_rank_reads_its_cpus_their_nodes_and_its_gpus_node(tmp_path):
    root = host_tree.build("rtx4090x2", tmp_path)
    bound = placement.of_rank(1, GPU1, root, allowed=set(range(16, 32)))
    assert bound == {"local_rank": 1, "cpus": "16-31", "cpu_nodes": [1], "gpu_pci_bus_id": "0000:81:00.0", "gpu_numa_node": 1}
    unbound = placement.of_rank(0, GPU0, root, allowed=set(range(32)))
    assert (unbound["cpu_nodes"], unbound["gpu_numa_node"]) == ([0, 1], 0)
    cpu_rank = placement.of_rank(0, None, root, allowed={3})
    assert (cpu_rank["cpu_nodes"], cpu_rank["gpu_pci_bus_id"], cpu_rank["gpu_numa_node"]) == ([0], None, None)


def test_the_ranks_lines_are_read_back_in_rank_order(tmp_path):
    path = tmp_path / "launch.placement.jsonl"
    assert placement.read(path) is None  # no rank got that far
    for rank in (1, 0):
        placement.write(str(path), placement.of_rank(rank, None, tmp_path, allowed={rank}))
    assert [rank["local_rank"] for rank in placement.read(path)] == [0, 1]


def ranks(*placed: tuple) -> list[dict]:
    """(cpus, cpu nodes, GPU node) per local rank."""
    return [{"local_rank": r, "cpus": cpus, "cpu_nodes": nodes, "gpu_pci_bus_id": None, "gpu_numa_node": gpu}
            for r, (cpus, nodes, gpu) in enumerate(placed)]


def test_a_split_is_a_rank_off_its_gpus_node_or_gpus_on_two_nodes_not_an_unbound_rank():
    assert placement_splits(ranks(("0-15", [0], 0), ("0-15", [0], 0))) == []
    assert placement_splits(ranks(("0-31", [0, 1], 0), ("0-31", [0, 1], 0))) == []  # unbound, GPUs on one node
    assert placement_splits(ranks(("0-3", [0], None))) == []  # no GPU, or the firmware does not say
    assert placement_splits(None) == []
    off = placement_splits(ranks(("0-15", [0], 0), ("0-15", [0], 1)))
    assert off == ["local rank 1 may run only on CPUs 0-15 (NUMA node 0), its GPU hangs off node 1",
                   "its GPUs hang off different NUMA nodes (local rank 0's on node 0, local rank 1's on node 1): the "
                   "traffic between them crosses the socket link"]


def test_a_split_is_named_on_the_runs_of_the_launches_it_touched():
    def run(launch_id: str, world_size: int) -> dict:
        return {"suite": "collectives", "params": {"op": "all_reduce", "size_bytes": 4096}, "world_size": world_size,
                "status": "ok", "metrics": {}, "launch_id": launch_id,
                "transport": {"preset": "default", "backend": "nccl", "env": {}, "nccl_used": ["P2P"], "matches_preset": True}}

    entry = {"name": "rig-4090", "fingerprint": {}, "runs": [run("ws1", 1), run("ws2", 2)], "launches": [
        {"id": "ws1", "placement": ranks(("0-31", [0, 1], 0))},
        {"id": "ws2", "placement": ranks(("0-31", [0, 1], 0), ("0-31", [0, 1], 1))},
    ]}
    derive(entry)
    one, two = entry["runs"]
    assert "warnings" not in one
    assert [w["code"] for w in two["warnings"]] == ["numa_split"]
    assert "local rank 1's on node 1" in two["warnings"][0]["message"]
    assert "--numa-binding=node" in two["warnings"][0]["likely_cause"]
