"""A fingerprint's links: what each GPU's PCIe link and NVLinks read (under load where measured),
the pairs without peer access, and the one-line description of its GPUs and the link between them."""
from __future__ import annotations

import re

# Per-lane, per-direction PCIe payload rate in GB/s after line encoding (8b/10b for gen 1-2,
# 128b/130b for gen 3-5, FLIT for gen 6).
PCIE_LANE_GBPS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}


def pcie_peak_gbps(gen: "int | None", width: "int | None") -> "float | None":
    """One direction's theoretical payload rate of a PCIe link, GB/s."""
    return PCIE_LANE_GBPS[gen] * width if gen in PCIE_LANE_GBPS and width else None


def pcie_links(fp: dict) -> list[dict]:
    """Per GPU: {"index", "gen", "width"} of the link in use (under load where measured, else at
    rest), "loaded" (whether it was measured under load) and "gen_max", "width_max"."""
    loaded = ((fp.get("link_load") or {}).get("pcie_loaded")) or {}
    links = []
    for position, gpu in enumerate(fp.get("gpus") or []):
        index, pcie = gpu.get("index", position), gpu["pcie"]
        busy = loaded.get(str(index)) or {}
        measured = busy.get("gen_loaded") is not None and busy.get("width_loaded") is not None
        links.append({
            "index": index,
            "gen": busy["gen_loaded"] if measured else pcie.get("gen_current"),
            "width": busy["width_loaded"] if measured else pcie.get("width_current"),
            "loaded": measured,
            "gen_max": pcie.get("gen_max"), "width_max": pcie.get("width_max"),
        })
    return links


def nvlink_links(fp: dict) -> list[dict]:
    """Per GPU: {"index", "active_links", "link_speed_gbps"} of its NVLinks as in use (under load
    where measured, else at rest), "loaded" (whether measured under load) and "active_links_rest".

    The speed falls back to the one at rest: the 2x H200's NVML answers the link count under
    load but not the speed field (NOT_SUPPORTED; nvidia-smi gives it at rest), and an NVLink
    runs at its one rate or is down, which the count says."""
    loaded = ((fp.get("link_load") or {}).get("nvlink_loaded")) or {}
    links = []
    for position, gpu in enumerate(fp.get("gpus") or []):
        index, rest = gpu.get("index", position), gpu.get("nvlink") or {}
        busy = loaded.get(str(index)) or {}
        measured = busy.get("active_links_loaded") is not None
        links.append({
            "index": index,
            "active_links": busy["active_links_loaded"] if measured else rest.get("active_links"),
            "link_speed_gbps": (busy.get("link_speed_gbps_loaded") if measured else None) or rest.get("link_speed_gbps"),
            "loaded": measured, "active_links_rest": rest.get("active_links"),
        })
    return links


def pairs_without_p2p(fp: dict) -> list[tuple[str, str]]:
    """Ordered GPU pairs that CUDA says cannot access each other's memory."""
    access = ((fp.get("link_load") or {}).get("p2p_access")) or {}
    return sorted((a, b) for a, row in access.items() for b, ok in row.items() if not ok)


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
