"""What the suites' cost models share: a job's start-up and exit, a launch's own cost, a training
model's set-up and the P2P gate (measured: bench/common/launch_costs.py, on a CPU host as if it had the
CPU to itself), a call's fixed costs, and the bandwidth each link reaches, per transport preset.

Each suite prices its own launches (Suite.launch_seconds) from these; the agent adds the job's and the
launch's fixed costs (bench/agent/estimate.py), and an earlier run's measured duration on the same
machine wins over the model (bench/common/history.py). The bandwidths and rates were fitted to runs on
2x H200 (NV18), 1-GPU runs on an H200 and this project's 2-core CI machine
(benchmarks/results/plan_durations.md).
"""

from __future__ import annotations

import statistics

from bench.common.host import Capabilities
from bench.common.launch_costs import MEASURED


def job_start_s(kind: str) -> float:
    """A job's start-up on a host of this kind: its processes, their imports, the devices, the process group."""
    return MEASURED[kind]["start_s"]


def job_end_s(kind: str) -> float:
    """A job's exit: from its last launch's end to its processes gone."""
    return MEASURED[kind]["teardown_s"]


def launch_own_s(kind: str) -> float:
    """A launch's own cost beside its suite's work: its records, its ranks agreeing, memory freed."""
    return MEASURED[kind]["launch_s"]


def gate_arm_s(kind: str) -> float:
    """One arm of the P2P gate (bench/agent/gate.py): a set of processes started, a few collectives checked."""
    return MEASURED[kind]["gate_arm_s"]


def training_build_s(kind: str, model: str, unmeasured_s: "float | None" = None) -> float:
    """A training launch's set-up (the model built and wrapped, its optimizer): as measured for the model,
    else unmeasured_s where given, else the median of the models measured on this kind of host."""
    built = MEASURED[kind]["training_build_s"]
    if model in built:
        return built[model]
    return statistics.median(built.values()) if unmeasured_s is None else unmeasured_s

POINT_OVERHEAD_S = {"gpu": 0.05, "cpu": 0.01}  # buffers, graph capture, the check's comparison
# A CPU's: gloo's all-reduce of 2 processes on the 2-core machine, scaled to an idle one (bundle
# 20261127T094116Z-3acdd6: 6.6 ms at 4 KiB, 70 ms at 16 MiB while others took 83% of the CPU).
CALL_LATENCY_S = {"gpu": 20e-6, "cpu": 1.1e-3}
# Bus bandwidth (GB/s) an all-reduce reaches on large messages, per transport preset.
GPU_BUSBW_GBPS = {"p2p_off": {5: 25.0, 4: 12.0}, "socket": 3.5, "ib": 20.0, "gloo": 1.8}
NVLINK_BUSBW_GBPS, PCIE_P2P_BUSBW_GBPS = 300.0, {5: 40.0, 4: 20.0}
LOCAL_GBPS = {"gpu": 1000.0, "cpu": 5.0}  # one rank: a copy in memory
CPU_GLOO_BUSBW_GBPS = 1.5


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
