"""Whether a host can run a plan entry at all, judged from what it has (its GPUs, cores and
InfiniBand) before anything launches: the agent plans by it on the host (bench/agent/planning.py),
and `verify` judges by it the hosts it has only probed, so that an entry they cannot run is not
comparable before a launch rather than a failure after one. What the suites judge (memory,
batches, NCCL's collectives) stays theirs. Standard library only.
"""

from __future__ import annotations

from bench.common.algorithms import DEFAULT
from bench.common.host import Capabilities
from bench.common.selection import Side
from bench.common.transports import PRESETS, backend_for

CPU_WORLD_SIZE = 2  # "all" on a machine without a GPU: two processes, gloo


def world_sizes(requested: list, hw: Capabilities, gpus: "tuple | None" = None) -> list[int]:
    """The entry's world sizes here: "all" is every GPU (every GPU the entry names), or two processes on a CPU host."""
    devices = (len(gpus) if gpus is not None else hw.gpu_count) or CPU_WORLD_SIZE
    return sorted({devices if w == "all" else int(w) for w in requested})


def side_problem(side: Side, world_sizes_asked: list, hw: Capabilities, env: dict) -> "str | None":
    """The first reason this host cannot run the entry's side (its axes as this host reads them),
    in words with the fix, or None. `env`: the entry's and the hosts file's, which may choose GPUs too."""
    found = selection_problem(side, hw, env)
    if found:
        return found
    worlds = [2] if side.pairs else world_sizes(world_sizes_asked, hw, side.gpus)
    for preset_name in side.transports:
        found = transport_problem(preset_name, hw) or nccl_axes_problem(side, preset_name, hw)
        if found:
            return found
        for per_node in worlds:
            found = processes_problem(per_node, side.ranks_per_core, hw)
            if found:
                return found
    return None


def transport_problem(preset_name: str, hw: Capabilities) -> "str | None":
    preset = PRESETS[preset_name]
    if preset.backend == "nccl" and preset_name != "default" and not hw.cuda:
        return f"transport preset {preset_name!r} needs NCCL and a GPU, this host has none; use 'gloo' or 'default'"
    if preset.needs_infiniband and not hw.infiniband:
        return "transport preset 'ib' needs an active InfiniBand port, this host has none; remove 'ib' from the plan"
    return None


def processes_problem(per_node: int, ranks_per_core: int, hw: Capabilities) -> "str | None":
    cores = hw.logical_cpus
    if not hw.cuda and per_node > cores * ranks_per_core:
        shared = ", or let ranks share cores (the entry's cpu: ranks_per_core)" if ranks_per_core == 1 else ""
        return (f"world size {per_node} needs {per_node} processes on this host, which has {cores} cores and no GPU; "
                f"lower world_sizes to at most {cores * ranks_per_core}{shared}")
    return None


def selection_problem(side: Side, hw: Capabilities, env: dict) -> "str | None":
    """The GPUs an entry names, against this host's; on a host without a GPU they are refused."""
    if not side.selects_gpus:
        return None
    what = "pairs: all" if side.pairs else f"gpus: {list(side.gpus)}"
    if not hw.cuda:
        return f"{what} names GPUs, this host has none; put it in the entry's gpu: block (hosts with GPUs only)"
    if side.pairs and hw.gpu_count < 2:
        return f"pairs: all runs every pair of GPUs, this host has {hw.gpu_count}; remove pairs"
    past = [gpu for gpu in side.gpus or () if gpu >= hw.gpu_count]
    if past:
        return f"{what} names GPU {past[0]}, this host has {hw.gpu_count} (0 to {hw.gpu_count - 1}); name GPUs of this host"
    # CUDA_DEVICE_ORDER too: the launch numbers GPUs as nvidia-smi does (PCI_BUS_ID), which gpus: names
    elsewhere = sorted({"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"} & set(env), reverse=True)
    if elsewhere:
        return f"{what} and {elsewhere[0]} (the entry's or the hosts file's env) both choose GPUs; choose them in one place"
    return None


def nccl_axes_problem(side: Side, preset_name: str, hw: Capabilities) -> "str | None":
    """NCCL's algorithms and protocols asked where the ranks talk over gloo, which has one algorithm a collective."""
    if set(side.algorithms) | set(side.protocols) <= {DEFAULT} or backend_for(preset_name, hw.cuda) != "gloo":
        return None
    where = "this host has no GPU, so its ranks talk over gloo" if not hw.cuda else f"transport {preset_name!r} talks over gloo"
    return (f"algorithms {side.algorithms} and protocols {side.protocols} choose NCCL's, and {where}, which has one "
            "algorithm a collective; put them in the entry's gpu: block, or use an NCCL transport")
