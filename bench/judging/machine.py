"""What the host did to a run, beside what its suite judges of its figures: the P2P gate before
training found wrong the path the run's data took, or the run's launch had its ranks split over
NUMA nodes. bench/bundle/assembly.py adds these to every ok run's warnings, so `ddpbench run`
prints them and the report marks the run ⚠ with the likely cause."""

from __future__ import annotations

from bench.judging.health import P2P_FIX, gate_finding, placement_splits
from bench.common.run import Run
from bench.suites.base import HostResults, Suite, warning

NUMA_CAUSE = ("a rank off its GPU's NUMA node reaches the GPU, and its own host memory, across the link between the "
              "sockets, and so does the traffic between GPUs on different nodes (a 4+4 split cost 85% a step on a "
              "rented 8x H100): the figure may be slower than the GPUs and their link can do; fix: bind each rank to "
              "its GPU's node (`torchrun --numa-binding=node`, torch 2.9 and later, or `numactl --cpunodebind=N "
              "--membind=N`), and compare only with machines split the same way")


def warnings(run: Run, results: HostResults, suite: Suite) -> list:
    """The host's warnings on one ok run (bench.suites.base.warning each)."""
    return _gate(run, results, suite) + _numa(run, results)


def _ranks_here(run: Run, results: HostResults) -> int:
    return run.world_size // max(1, results.nodes_of_launch.get(run.launch_id, 1))


def took_p2p(run: Run, results: HostResults, suite: Suite) -> bool:
    """Whether the run's data went peer to peer as the box has it: copies between GPUs past NCCL,
    or two or more ranks on this host talking with P2P left on (NCCL's log naming P2P, or nothing)."""
    if suite.peer_copies(run):
        return True
    transport = run.transport
    if _ranks_here(run, results) < 2 or (transport.get("env") or {}).get("NCCL_P2P_DISABLE") == "1":
        return False
    return not transport["nccl_used"] or "P2P" in transport["nccl_used"]


def took_host_memory(run: Run, results: HostResults) -> bool:
    """Whether two or more ranks on this host talked through host memory (P2P off, SHM left on)."""
    transport, env = run.transport, run.transport.get("env") or {}
    if _ranks_here(run, results) < 2 or env.get("NCCL_P2P_DISABLE") != "1" or env.get("NCCL_SHM_DISABLE") == "1":
        return False
    return not transport["nccl_used"] or "SHM" in transport["nccl_used"]


def _gate(run: Run, results: HostResults, suite: Suite) -> list:
    gate = (results.fingerprint or {}).get("gate")
    if not gate or gate["verdict"] == "ok":
        return []
    arms = {arm["name"]: arm for arm in gate["arms"]}
    planted = f" [planted fault {gate['planted_fault']}: a test]" if gate.get("planted_fault") else ""
    if "p2p" in arms and arms["p2p"]["status"] != "ok" and took_p2p(run, results, suite):
        return [warning("p2p_gate_failed",
                        f"its data went peer to peer, P2P as this box has it, where the P2P gate before training found: "
                        f"{gate_finding(arms['p2p'])}{planted}",
                        "a broken P2P path between the GPUs (a P2P-patched or mismatched driver, ACS on the PCIe bridges "
                        "between them, an IOMMU translating): the figure may come from wrong or stalled transfers; "
                        + P2P_FIX)]
    if "p2p_off" in arms and arms["p2p_off"]["status"] != "ok" and took_host_memory(run, results):
        return [warning("p2p_off_gate_failed",
                        f"its data went through host memory (NCCL_P2P_DISABLE=1), where the P2P gate before training "
                        f"found: {gate_finding(arms['p2p_off'])}{planted}",
                        "NCCL's path through host memory is broken here (a small /dev/shm is the usual cause): the figure "
                        "may come from wrong or stalled transfers; fix: start the container with `--shm-size=1g` (or "
                        "`--ipc=host`)")]
    return []


def _numa(run: Run, results: HostResults) -> list:
    launches = results.once("machine.launches", lambda: {launch["id"]: launch for launch in results.launches})
    lines = placement_splits((launches.get(run.launch_id) or {}).get("placement"))
    if not lines:
        return []
    return [warning("numa_split", "its launch's ranks were split over NUMA nodes: " + "; ".join(lines), NUMA_CAUSE)]
