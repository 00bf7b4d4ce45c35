"""What the GPU counters say held a figure back while it was measured: clocks held back below the
GPU's maximum, a PCIe link below its slot. The agent judges each NVML sample by clock_held_back
(bench/agent/counters.py); the report's counters, the expected ranges' causes (normal.py) and the
fingerprint's clocks at rest (health.py) read the rules here."""

from __future__ import annotations

from bench.judging.host import Host

# Clock event reasons that are normal or harmless: idle, and GPUs of one board boosting together.
BENIGN_REASONS = {"gpu_idle", "sync_boost"}
# A clock this close to the GPU's maximum is not held back, whatever reason NVML raises: an H200
# raised sw_power_cap at 1965-1980 of its 1980 MHz while drawing 122 W of 700 (held back for real,
# under large matmuls: 1455-1530 MHz at 689 W).
HELD_BACK_BELOW_MAX_FRACTION = 0.02
# Clocks held back in more than this share of a window's samples are worth a reader's attention,
# and a cause of a figure below its expected range.
HELD_BACK_FLAG_FRACTION = 0.05


def clock_held_back(sm_clock_mhz: "float | None", max_sm_clock_mhz: "float | None", reasons: "list[str] | None") -> bool:
    """Whether an SM clock lies below the GPU's maximum by more than HELD_BACK_BELOW_MAX_FRACTION
    while NVML names a reason other than idle or sync boost."""
    if sm_clock_mhz is None or not max_sm_clock_mhz or reasons is None:
        return False
    return sm_clock_mhz < max_sm_clock_mhz * (1 - HELD_BACK_BELOW_MAX_FRACTION) and bool(set(reasons) - BENIGN_REASONS)


def clocks(gpu: dict, fingerprint_max_mhz: "float | None") -> "tuple[str, dict | None]":
    """("not measured" | "max unknown" | "no" | "held back", details) of one GPU's counters over a
    window: held back where the SM clock lay more than 2% below the GPU's maximum while NVML named a
    reason other than idle. Newer bundles judged every sample; for older ones the window's median
    clock stands against the fingerprint's maximum, and the reasons are those of all its samples."""
    if gpu.get("held_back_fraction") is not None and gpu.get("sm_clock_max_mhz"):
        if not gpu["held_back_fraction"]:
            return "no", None
        if gpu.get("held_back_sm_clock_mhz_median") is not None:
            return "held back", {"fraction": gpu["held_back_fraction"], "clock_mhz": gpu["held_back_sm_clock_mhz_median"],
                                 "max_mhz": gpu["sm_clock_max_mhz"], "reasons": gpu.get("held_back_reasons_fraction") or {}}
    if gpu["throttled_fraction"] is None or gpu["sm_clock_mhz_median"] is None:
        return "not measured", None
    max_mhz = gpu.get("sm_clock_max_mhz") or fingerprint_max_mhz
    reasons = gpu["throttle_reasons_fraction"] or {}
    if not max_mhz:
        return ("max unknown", None) if reasons else ("no", None)
    if not clock_held_back(gpu["sm_clock_mhz_median"], max_mhz, list(reasons)):
        return "no", None
    return "held back", {"fraction": gpu["throttled_fraction"], "clock_mhz": gpu["sm_clock_mhz_median"],
                         "max_mhz": max_mhz, "reasons": reasons}


def links_below_slot(counters: "dict | None", host: Host) -> list[dict]:
    """The GPUs whose PCIe link never reached its slot's generation or width in a window's samples
    (NVML's reading in every one): asleep, or trained down; each {"index", "gen", "width" (None where
    NVML read no width), "gen_max", "width_max"}, the slot's from the host's fingerprint."""
    slots = {link["index"]: link for link in host.pcie}
    found = []
    for gpu in (counters or {}).get("gpus") or []:
        slot, gen, width = slots.get(gpu["index"]) or {}, gpu.get("pcie_gen_max"), gpu.get("pcie_width_max")
        gen_max, width_max = slot.get("gen_max"), slot.get("width_max")
        if gen and gen_max and width_max and (gen < gen_max or (width or width_max) < width_max):
            found.append({"index": gpu["index"], "gen": gen, "width": width, "gen_max": gen_max, "width_max": width_max})
    return found
