"""What a fingerprint says that a reader must be told before trusting a number, one line each:
other processes on the GPUs, memory errors, a power limit below the default, clocks held back at
rest, a PCIe link narrower under load than its slot allows, NVLinks inactive under load, GPU pairs
without peer access.

The agent prints these lines before its first launch, and the report and `verify` read them
from a bundle's fingerprints.
"""
from __future__ import annotations

GIB = 1 << 30
# Clock event reasons that are normal or harmless: idle, and GPUs of one board boosting together.
BENIGN_REASONS = {"gpu_idle", "sync_boost"}


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


def narrow_links(fp: dict) -> list[str]:
    """GPUs whose link, measured under load, runs below the generation or width its slot allows."""
    lines = []
    for link in pcie_links(fp):
        if not link["loaded"] or link["gen_max"] is None or link["width_max"] is None:
            continue
        if link["gen"] < link["gen_max"] or link["width"] < link["width_max"]:
            lines.append(f"GPU{link['index']}: PCIe link under load is {link['gen']}.0 x{link['width']}, "
                         f"its slot allows {link['gen_max']}.0 x{link['width_max']}")
    return lines


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


def idle_nvlinks(fp: dict) -> list[str]:
    """GPUs with fewer NVLinks active while copying to a peer than at rest."""
    return [f"GPU{link['index']}: {link['active_links']} of its {link['active_links_rest']} NVLinks active under load"
            for link in nvlink_links(fp)
            if link["loaded"] and link["active_links_rest"] and link["active_links"] < link["active_links_rest"]]


def pairs_without_p2p(fp: dict) -> list[tuple[str, str]]:
    """Ordered GPU pairs that CUDA says cannot access each other's memory."""
    access = ((fp.get("link_load") or {}).get("p2p_access")) or {}
    return sorted((a, b) for a, row in access.items() for b, ok in row.items() if not ok)


def _health_lines(gpu: dict) -> list[str]:
    name, lines = f"GPU{gpu['index']}", []
    processes = gpu.get("processes") or []
    if processes:
        held = sum(p["used_memory_bytes"] or 0 for p in processes)
        lines.append(f"{name}: {len(processes)} other process(es) on the GPU before the first launch, holding "
                     f"{held / GIB:.1f} GiB (pid {', '.join(str(p['pid']) for p in processes)})")
    if gpu.get("ecc_uncorrected_volatile"):
        lines.append(f"{name}: {gpu['ecc_uncorrected_volatile']} uncorrected ECC error(s) since the driver loaded")
    if gpu.get("row_remap_failed"):
        lines.append(f"{name}: a memory row remap failed: the GPU needs service")
    elif gpu.get("row_remap_pending"):
        lines.append(f"{name}: a memory row remap is pending until the GPU is reset")
    if gpu.get("retired_pages_pending"):
        lines.append(f"{name}: retired memory pages are pending until the GPU is reset")
    limit, default = gpu.get("power_limit_w"), gpu.get("power_limit_default_w")
    if limit is not None and default and limit < default * 0.99:
        lines.append(f"{name}: power limit {limit:g} W, below its default {default:g} W")
    held_back = sorted(set(gpu.get("clock_reasons_idle") or []) - BENIGN_REASONS)
    if held_back:
        lines.append(f"{name}: clocks held back at rest ({', '.join(held_back)}): locked or capped clocks")
    return lines


def health_warnings(fp: dict) -> list[str]:
    """Every concern of a fingerprint, one line each, GPU by GPU; empty for a healthy machine."""
    lines = [line for gpu in ((fp.get("health") or {}).get("gpus") or []) for line in _health_lines(gpu)]
    return lines + narrow_links(fp) + idle_nvlinks(fp)
