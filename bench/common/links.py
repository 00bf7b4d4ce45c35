"""One-line description of a fingerprint's GPUs and the link between them, for reports."""
from __future__ import annotations

import re

from bench.common.concerns import nvlink_links, pcie_links

# Per-lane, per-direction PCIe payload rate in GB/s after line encoding (8b/10b for gen 1-2,
# 128b/130b for gen 3-5, FLIT for gen 6).
PCIE_LANE_GBPS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}


def pcie_peak_gbps(gen: "int | None", width: "int | None") -> "float | None":
    """One direction's theoretical payload rate of a PCIe link, GB/s."""
    return PCIE_LANE_GBPS[gen] * width if gen in PCIE_LANE_GBPS and width else None


def _nvlink_bonds(fp: dict) -> list[int]:
    """Link counts of the GPU pairs that the topology matrix shows as 'NV#'."""
    matrix = (fp.get("topology") or {}).get("matrix") or {}
    bonds = []
    for cells in matrix.values():
        for column, cell in cells.items():
            bond = re.fullmatch(r"NV(\d+)", cell)
            if bond and column.startswith("GPU"):
                bonds.append(int(bond.group(1)))
    return bonds


def _slowest(peaks: list[float | None]) -> float | None:
    return None if not peaks or None in peaks else round(min(peaks), 3)


# The hardware label of a host without a GPU: its ranks are processes on its CPU.
CPU_ONLY = "CPU only"


def link_summary(fp: dict) -> dict:
    """{"gpu", "gpu_count", "link_class", "link_label", "link_peak_gbps"} of a fingerprint.

    link_class is "nvlink" when the topology matrix joins a GPU pair by NV# (or, without a
    matrix, when GPUs report active NVLinks), "pcie" for other GPUs, "none" without GPUs.

    link_peak_gbps is a theoretical peak in GB/s, for one GPU, in one direction, of the slowest
    GPU, null when a figure it needs is unknown:
      - nvlink: active links x per-link speed as `nvidia-smi nvlink -s` prints it, which is per
        direction (H100/H200: 18 x 26.562 = 478.1 GB/s), as read while a copy crossed them where
        the fingerprint measured that, else as read at rest;
      - pcie: width x per-lane rate of the link in use: as read while a copy crossed it where the
        fingerprint measured that, else as read at rest (GPUs may train the link down when idle,
        so a link read at rest can show less than a run gets).
    """
    gpus = fp.get("gpus") or []
    if not gpus:
        return {"gpu": None, "gpu_count": 0, "link_class": "none", "link_label": CPU_ONLY, "link_peak_gbps": None}
    name = " + ".join(sorted({gpu["name"] for gpu in gpus}))
    prefix = f"{len(gpus)}x {name}"
    links = nvlink_links(fp)
    bonds = _nvlink_bonds(fp)
    has_matrix = bool((fp.get("topology") or {}).get("matrix"))
    if bonds or (not has_matrix and any(link["active_links"] for link in links)):
        bond = max(bonds) if bonds else min(link["active_links"] or 0 for link in links)
        peaks = [link["active_links"] * link["link_speed_gbps"]
                 if link["active_links"] is not None and link["link_speed_gbps"] is not None else None
                 for link in links]
        return {"gpu": name, "gpu_count": len(gpus), "link_class": "nvlink",
                "link_label": f"{prefix}, NVLink NV{bond}", "link_peak_gbps": _slowest(peaks)}
    pcie = [(link["gen"], link["width"]) for link in pcie_links(fp)]
    peaks = [pcie_peak_gbps(gen, width) for gen, width in pcie]
    known = [(peak, gen, width) for peak, (gen, width) in zip(peaks, pcie) if peak is not None]
    label = f"{prefix}, PCIe"
    if known:
        _, gen, width = min(known)
        label += f" {gen}.0 x{width}"
    return {"gpu": name, "gpu_count": len(gpus), "link_class": "pcie", "link_label": label,
            "link_peak_gbps": _slowest(peaks)}


def pair_path(fp: dict, a: int, b: int) -> "tuple[str | None, tuple]":
    """The path between GPUs a and b as `nvidia-smi topo -m` names it in the fingerprint (NV# bonded
    NVLinks; PIX, PXB PCIe switches; PHB, NODE a host bridge; SYS across sockets), None where it has
    no matrix, and each GPU's NUMA node (None where not known)."""
    topology = fp.get("topology") or {}
    path = ((topology.get("matrix") or {}).get(f"GPU{a}") or {}).get(f"GPU{b}")
    nodes = (fp.get("numa") or {}).get("gpu_nodes") or {}
    printed = topology.get("numa_affinity") or {}

    def node(gpu: int) -> "int | None":
        found = nodes.get(f"GPU{gpu}")
        text = printed.get(f"GPU{gpu}", "")
        return found if found is not None else int(text) if text.isdigit() else None

    return path, (node(a), node(b))


def pair_label(fp: dict, a: int, b: int) -> str:
    """"GPUs 1 and 3 (SYS, NUMA nodes 0 and 1)": a pair with what the fingerprint says of its path."""
    path, (node_a, node_b) = pair_path(fp, a, b)
    numa = (f"NUMA node {node_a}" if node_a == node_b else f"NUMA nodes {node_a} and {node_b}") if None not in (node_a, node_b) else "NUMA nodes not known"
    return f"GPUs {a} and {b} ({path or 'path not known'}, {numa})"
