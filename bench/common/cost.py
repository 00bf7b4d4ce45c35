"""What the suites' cost models share: a launch's start-up, a call's fixed costs, and the bandwidth
each link reaches, per transport preset.

Each suite prices its own launches (Suite.launch_seconds) from these; the runner adds the start-up,
and an earlier run's measured duration on the same machine wins over the model (bench/common/history.py).
The figures were fitted to runs on 2x H200 (NV18), 1-GPU runs on an H200 and this
project's 2-core CI machine (benchmarks/results/plan_durations.md); they aim within 2x, which is
what the run checks (an ETA off by more than that is said in the log).
"""

from __future__ import annotations

from bench.common.host import Capabilities

LAUNCH_START_S = {"gpu": 8.0, "cpu": 5.0}  # torchrun, imports, process group (2 cores: 3-4 s idle, about 10 s under load)
POINT_OVERHEAD_S = {"gpu": 0.05, "cpu": 0.01}  # buffers, graph capture, the check's comparison
CALL_LATENCY_S = {"gpu": 20e-6, "cpu": 300e-6}
# Bus bandwidth (GB/s) an all-reduce reaches on large messages, per transport preset.
GPU_BUSBW_GBPS = {"p2p_off": {5: 25.0, 4: 12.0}, "socket": 3.5, "ib": 20.0, "gloo": 1.8}
NVLINK_BUSBW_GBPS, PCIE_P2P_BUSBW_GBPS = 300.0, {5: 40.0, 4: 20.0}
LOCAL_GBPS = {"gpu": 1000.0, "cpu": 5.0}  # one rank: a copy in memory
CPU_GLOO_BUSBW_GBPS = 1.0


def busbw_gbps(preset: str, world_size: int, host: Capabilities) -> float:
    """The bus bandwidth an all-reduce of large messages reaches under a preset."""
    if world_size == 1:
        return LOCAL_GBPS[host.kind]
    if host.kind == "cpu":
        return CPU_GLOO_BUSBW_GBPS
    if preset == "default":
        return peer_gbps(host)
    figure = GPU_BUSBW_GBPS.get(preset, 5.0)
    return figure.get(host.pcie_gen, 6.0) if isinstance(figure, dict) else figure


def peer_gbps(host: Capabilities) -> float:
    """What a GPU reaches to its peer on the host's best path: NVLink, or PCIe with P2P."""
    return NVLINK_BUSBW_GBPS if host.nvlink else PCIE_P2P_BUSBW_GBPS.get(host.pcie_gen, 10.0)
