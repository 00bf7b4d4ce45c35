"""The machine's side of a report: copy bandwidth per GPU and pair beside the link's peak, the
concerns its fingerprint raised (health, a link narrower than its slot, pairs without P2P), and
what the NVML counters saw during each launch and each run's timed steps (clocks, power, throttling,
bytes on each link).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from bench.bundle.links import pcie_peak_gbps
from bench.common.concerns import health_warnings, pairs_without_p2p, pcie_links
from bench.report.document import Paragraph, Table
from bench.report.merge import Comparison
from bench.report.series import Spread
from bench.report.tables import run_label
from bench.report.units import human_bytes

# Throttled in more than this share of a launch's samples is worth a reader's attention.
THROTTLE_FLAG_FRACTION = 0.05
COPY_BARS_CAPTION = (
    "Copy bandwidth of each GPU at the largest size measured, one way at a time, by copy engine (CE) and by SM "
    "kernel; error bars p5-p95 of the samples. Dashed line: the GPU's PCIe link's theoretical peak per direction "
    "(generation and width as read while a copy crossed it, where the fingerprint measured that).")


def _mode(params: dict) -> str:
    return f"{params['engine'].upper()}{' both ways' if params['bidirectional'] else ''}"


def _copies(comparison: Comparison) -> list:
    return [e for e in comparison.runs if e.run["suite"] == "copy"]


# --- Copy ----------------------------------------------------------------------------------

def copy_tables(comparison: Comparison) -> list:
    """Per host and mode, nvbandwidth's matrix (source row, destination column) at the largest
    size, then every point with its spread."""
    entries = _copies(comparison)
    if not entries:
        return []
    blocks = []
    by_matrix = defaultdict(list)
    for e in entries:
        by_matrix[(e.host.name, _mode(e.params))].append(e)
    for (host, mode), group in sorted(by_matrix.items()):
        largest = max(e.params["size_bytes"] for e in group)
        cells = {}
        for e in group:
            if e.params["size_bytes"] == largest and e.samples("copy_gbps"):
                cells[(e.params["src"], e.params["dst"])] = Spread.of(e.samples("copy_gbps")).median
        ends = sorted({end for pair in cells for end in pair}, key=lambda end: (end != "host", end))
        rows = [[src, *(f"{cells[(src, dst)]:.4g}" if (src, dst) in cells else "-" for dst in ends)] for src in ends]
        both = " (both directions summed)" if "both ways" in mode else ""
        blocks.append(Paragraph(f"{host}, {mode}, {human_bytes(largest)} per copy: GB/s{both}, median (source row → destination column)."))
        blocks.append(Table(["source \\ destination", *ends], rows))
    rows = []
    points = defaultdict(list)
    for e in entries:
        p = e.params
        points[(e.host.name, e.series.hardware, p["direction"], _mode(p), p["src"], p["dst"], p["size_bytes"])].append(e)
    for (host, hardware, direction, mode, src, dst, size), group in sorted(points.items()):
        samples = [s for e in group for s in e.samples("copy_gbps")]
        value = Spread.of(samples) if samples else None  # an ok run that recorded no copy_gbps
        rows.append([host, hardware, direction, mode, f"{src} → {dst}", human_bytes(size),
                     f"{value.median:.4g} [{value.low:.4g}, {value.high:.4g}] n={value.n}" if value else "-"])
    blocks.append(Table(["host", "GPUs and link", "direction", "engine", "source → destination", "size",
                         "GB/s median [p5, p95]"], rows))
    return blocks


@dataclass(frozen=True)
class CopyBar:
    gpu: str  # "host · gpu0"
    label: str  # "h2d CE"
    value: Spread
    peak_gbps: "float | None"


def copy_bars(comparison: Comparison) -> list[CopyBar]:
    """Per host and GPU, the one-way h2d and d2h figures at the largest size, beside the link's peak."""
    bars = []
    peaks = {(h.name, f"gpu{link['index']}"): pcie_peak_gbps(link["gen"], link["width"])
             for h in comparison.hosts for link in pcie_links(h.fingerprint)}
    groups = defaultdict(list)
    for e in _copies(comparison):
        p = e.params
        if p["direction"] in ("h2d", "d2h") and not p["bidirectional"]:
            gpu = p["dst"] if p["direction"] == "h2d" else p["src"]
            groups[(e.host.name, gpu, f"{p['direction']} {p['engine'].upper()}")].append(e)
    for (host, gpu, label), group in sorted(groups.items()):
        largest = max(e.params["size_bytes"] for e in group)
        samples = [s for e in group if e.params["size_bytes"] == largest for s in e.samples("copy_gbps")]
        if samples:
            bars.append(CopyBar(f"{host} · {gpu}", label, Spread.of(samples), peaks.get((host, gpu))))
    return bars


def copy_bars_figure(bars: list[CopyBar]):
    from bench.report import plots as P

    gpus = list(dict.fromkeys(bar.gpu for bar in bars))
    labels = sorted({bar.label for bar in bars})
    fig = P._figure(4.0 + P._legend_height(len(labels) + 1))
    ax = fig.add_subplot()
    width = 0.8 / len(labels)
    for i, label in enumerate(labels):
        mine = [bar for bar in bars if bar.label == label]
        xs = [gpus.index(bar.gpu) + (i - (len(labels) - 1) / 2) * width for bar in mine]
        med = np.array([bar.value.median for bar in mine])
        low, high = np.array([bar.value.low for bar in mine]), np.array([bar.value.high for bar in mine])
        ax.bar(xs, med, width * 0.92, yerr=[med - low, high - med], capsize=3, color=P.PALETTE[i % len(P.PALETTE)], label=label)
    for g, gpu in enumerate(gpus):
        peak = next((bar.peak_gbps for bar in bars if bar.gpu == gpu and bar.peak_gbps), None)
        if peak:
            ax.hlines(peak, g - 0.45, g + 0.45, colors="black", linestyles="--", linewidth=1,
                      label="PCIe peak per direction" if g == 0 else None)
            ax.text(g, peak, f"{peak:.4g} GB/s", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(gpus)), gpus, fontsize=9)
    ax.set_ylabel("GB/s")
    ax.set_ylim(0, max([bar.value.high for bar in bars] + [bar.peak_gbps or 0 for bar in bars]) * 1.15)
    ax.set_title("Host-device copy bandwidth per GPU against the PCIe link's peak", fontsize=11)
    ax.grid(True, axis="y", alpha=0.3)
    P._legend(fig, ax)
    return fig


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
    reasons = ", ".join(sorted(gpu["throttle_reasons_fraction"] or {}))  # null: not told apart
    return f"{where} GPU{gpu['index']}: clocks held back in {gpu['throttled_fraction']:.0%} of the samples" + (f" ({reasons})" if reasons else "")


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
