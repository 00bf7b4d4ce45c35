"""The machine's side of a report: copy bandwidth per GPU and pair beside the link's peak, the
concerns its fingerprint raised (health, a link narrower than its slot, pairs without P2P), and
what the NVML counters saw during each launch and each run's timed steps (clocks, power, throttling,
bytes on each link).
"""

from __future__ import annotations



from bench.common.concerns import health_warnings, pairs_without_p2p
from bench.report.document import Paragraph, Table
from bench.report.merge import Comparison
from bench.report.tables import run_label
from bench.common.units import human_bytes

# Throttled in more than this share of a launch's samples is worth a reader's attention.
THROTTLE_FLAG_FRACTION = 0.05


# --- Copy ----------------------------------------------------------------------------------


# --- What the fingerprint raised -----------------------------------------------------------

def concerns(comparison: Comparison) -> list:
    """One warning paragraph per host with concerns, and a note per host with GPU pairs without P2P."""
    blocks = []
    for host in comparison.hosts:
        lines = health_warnings(host.fingerprint)
        if lines:
            blocks.append(Paragraph(f"{host.name}: checked before the first launch\n" + "\n".join(lines), warning=True))
        missing = pairs_without_p2p(host.fingerprint)
        if missing:
            pairs = ", ".join(f"{a}→{b}" for a, b in missing)
            blocks.append(Paragraph(
                f"{host.name}: no P2P between {pairs} (as CUDA reports it): NCCL's `default` goes through host memory "
                "there, as `p2p_off` does, so `default` and `p2p_off` are the same path on this machine and their "
                "series differ only by noise."))
    return blocks


# --- Counters ------------------------------------------------------------------------------

def _gb(value: "int | None") -> str:
    return "-" if value is None else f"{value / 1e9:.3g}"


def _throttled(gpu: dict) -> str:
    if gpu["throttled_fraction"] is None:
        return "-"
    reasons = ", ".join(f"{name} {share:.0%}" for name, share in sorted((gpu["throttle_reasons_fraction"] or {}).items()))
    return f"{gpu['throttled_fraction']:.0%}" + (f" ({reasons})" if reasons else "")


def _held_back(where: str, gpu: dict) -> "str | None":
    """A warning line where the GPU throttled in more than THROTTLE_FLAG_FRACTION of the samples."""
    if (gpu["throttled_fraction"] or 0) <= THROTTLE_FLAG_FRACTION:
        return None
    return (f"{where} GPU{gpu['index']}: clocks held back in {gpu['throttled_fraction']:.0%} of the samples "
            f"({', '.join(sorted(gpu['throttle_reasons_fraction']))})")


def _launch_counters(comparison: Comparison) -> tuple[list, list]:
    """A row per launch and GPU, and the warning lines of the launches where a GPU throttled."""
    rows, flags = [], []
    for host in comparison.hosts:
        for launch in host.host["launches"]:
            summary = launch.get("gpu_counters")
            if not summary:
                continue
            for gpu in summary["gpus"]:
                power = "-" if gpu["power_w_median"] is None else f"{gpu['power_w_median']:.0f}"
                limit = "-" if gpu["power_limit_w"] is None else f"{gpu['power_limit_w']:.0f}"
                rows.append([host.name, launch["id"], f"GPU{gpu['index']}",
                             "-" if gpu["sm_clock_mhz_median"] is None else f"{gpu['sm_clock_mhz_median']:.0f}",
                             "-" if gpu["mem_clock_mhz_median"] is None else f"{gpu['mem_clock_mhz_median']:.0f}",
                             f"{power} / {limit}",
                             "-" if gpu["temperature_c_max"] is None else f"{gpu['temperature_c_max']:.0f}",
                             _throttled(gpu),
                             f"{_gb(gpu['pcie_tx_bytes'])} / {_gb(gpu['pcie_rx_bytes'])}",
                             f"{_gb(gpu['nvlink_tx_bytes'])} / {_gb(gpu['nvlink_rx_bytes'])}"])
                flags.append(_held_back(f"{host.name} {launch['id']}", gpu))
    return rows, [flag for flag in flags if flag]


def _per_step(gpu: dict, link: str) -> str:
    tx, rx = (gpu.get(f"{link}_{way}_bytes_per_step") for way in ("tx", "rx"))
    return " / ".join("-" if value is None else human_bytes(round(value)) for value in (tx, rx))


def _run_counters(comparison: Comparison) -> tuple[list, list]:
    """A row per DDP run and GPU (which link a step's gradient bytes crossed), and the warning lines
    of every run where a GPU throttled while it was timed."""
    rows, flags = [], []
    for entry in comparison.runs:
        summary = entry.run.get("gpu_counters")
        if not summary:
            continue
        what = f"{entry.host.name} {entry.run['launch_id']} ({run_label(entry.run)})"
        for gpu in summary["gpus"]:
            flags.append(_held_back(what, gpu))
            if entry.run["suite"] == "ddp":
                rows.append([entry.host.name, run_label(entry.run), entry.series.transport_label, f"GPU{gpu['index']}",
                             _per_step(gpu, "pcie"), _per_step(gpu, "nvlink"), _throttled(gpu)])
    return rows, [flag for flag in flags if flag]


def counters(comparison: Comparison) -> list:
    """The launches' counters, which link each DDP run's step bytes crossed, and a warning naming
    each launch and run where a GPU throttled."""
    launch_rows, launch_flags = _launch_counters(comparison)
    run_rows, run_flags = _run_counters(comparison)
    blocks = []
    if launch_rows:
        blocks.append(Paragraph(
            "NVML, read every tenth of a second or so during each launch: medians of the clocks and the power (against the "
            "enforced limit), the hottest reading, the share of samples with a clock event reason other than idle, and "
            "the bytes each GPU sent / received over PCIe (NVML's sampled throughput, integrated: an estimate) and "
            "NVLink (its byte counters) during the whole launch: which link the bytes crossed."))
    if launch_flags or run_flags:
        blocks.append(Paragraph("Throttled while measuring:\n" + "\n".join(launch_flags + run_flags), warning=True))
    if launch_rows:
        blocks.append(Table(["host", "launch", "GPU", "SM MHz", "memory MHz", "power W / limit", "max °C", "throttled",
                             "PCIe GB tx / rx", "NVLink GB tx / rx"], launch_rows))
    if run_rows:
        blocks += [Paragraph(
            "Per DDP run, the same counters over its timed steps only (not the warm-up): the bytes each GPU sent / "
            "received per training step over PCIe (an estimate) and over NVLink, so which link the gradient all-reduce "
            "crossed, and the share of the steps' samples with clocks held back (-: fewer than two samples, not measured)."),
            Table(["host", "run", "transport", "GPU", "PCIe per step tx / rx", "NVLink per step tx / rx", "throttled"],
                  run_rows)]
    return blocks
