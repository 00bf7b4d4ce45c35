"""NUMA: each node's CPUs, the node each GPU hangs off, and the CPUs this process (and so every
rank it starts, unless they are bound) may run on. A rank on another node than its GPU reaches it,
and its host memory, across the socket link."""
from __future__ import annotations

import os
from pathlib import Path

from bench.common.cpulist import format_cpulist

from .pcie_path import device_dir
from .system import read_text


def read(gpus: list[dict], root: Path = Path("/"), allowed: "set[int] | None" = None) -> dict:
    """{"node_cpus": {"0": "0-15", ...}, "gpu_nodes": {"GPU0": 0} (null where the firmware does not
    say: sysfs's -1), "allowed_cpus": "0-31" (`allowed`, default this process's affinity)}."""
    nodes = {}
    for node in sorted((root / "sys/devices/system/node").glob("node[0-9]*"), key=lambda p: int(p.name[4:])):
        cpulist = read_text(node / "cpulist")
        if cpulist is not None:
            nodes[node.name[4:]] = cpulist
    gpu_nodes = {}
    for gpu in gpus:
        device = device_dir(root, gpu.get("pci_bus_id"))
        if device is not None:
            node = read_text(device / "numa_node") or ""
            gpu_nodes[f"GPU{gpu['index']}"] = int(node) if node.isdigit() else None
    if allowed is None:
        allowed = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    return {"node_cpus": nodes, "gpu_nodes": gpu_nodes, "allowed_cpus": format_cpulist(allowed) or None}
