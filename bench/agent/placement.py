"""Where each rank of a launch runs: the CPUs it may use, the NUMA nodes those sit on, and the node
its GPU hangs off. A rank on another node than its GPU reaches the GPU, and its own host memory,
across the link between the sockets (a 4+4 split cost 85% a step on a rented 8x H100). Each rank
writes its line once placed (bench/agent/worker.py), the runner reads them into the launch record,
and bench.judging.health.placement_splits judges them."""
from __future__ import annotations

import json
import os
from pathlib import Path

from bench.common.cpulist import format_cpulist, parse_cpulist

from .fingerprint.pcie_path import device_dir, sysfs_address
from .fingerprint.system import read_text


def of_rank(local_rank: int, gpu_bus_id: "str | None", root: Path = Path("/"), allowed: "set[int] | None" = None) -> dict:
    """{"local_rank", "cpus" (those it may run on, '0-15'), "cpu_nodes" (the NUMA nodes they sit on),
    "gpu_pci_bus_id", "gpu_numa_node" (null: no GPU, or the firmware does not say)}; `allowed` is
    by default this process's affinity."""
    allowed = os.sched_getaffinity(0) if allowed is None else allowed
    cpu_nodes = sorted(int(node.name[4:]) for node in (root / "sys/devices/system/node").glob("node[0-9]*")
                       if parse_cpulist(read_text(node / "cpulist")) & allowed)
    device = device_dir(root, gpu_bus_id) if gpu_bus_id else None
    node = (read_text(device / "numa_node") or "") if device is not None else ""
    return {"local_rank": local_rank, "cpus": format_cpulist(allowed), "cpu_nodes": cpu_nodes,
            "gpu_pci_bus_id": sysfs_address(gpu_bus_id), "gpu_numa_node": int(node) if node.isdigit() else None}


def write(path: "str | None", record: dict) -> None:
    """Appends a rank's line (one write: the ranks of a launch share the file)."""
    if path:
        with open(path, "a") as out:
            out.write(json.dumps(record) + "\n")


def read(path: Path) -> "list[dict] | None":
    """The launch's ranks by local rank; None where no rank got that far."""
    if not path.exists():
        return None
    ranks = [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]
    return sorted(ranks, key=lambda rank: rank["local_rank"])
