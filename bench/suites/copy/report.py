"""The copy suite's part of a report: copy bandwidth per GPU and pair beside the link's peak."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from bench.common.links import pcie_links
from bench.common.links import pair_label, pcie_peak_gbps
from bench.common.stats import Spread
from bench.common.units import human_bytes
from bench.report import plots as P
from bench.report import tables as T
from bench.report.document import Heading, Paragraph, Table
from bench.report.merge import Comparison


def section(comparison: Comparison, plot, colours: dict) -> list:
    """The copy suite's part of a report: the per-GPU bars against the PCIe peak, the matrices, every point."""
    tables = copy_tables(comparison)
    if not tables:
        return []
    blocks = [Heading(2, "Copy bandwidth")]
    bars = copy_bars(comparison)
    if bars:
        blocks.append(plot(copy_bars_figure, (bars,), "copy-per-gpu", "Host-device copy bandwidth per GPU",
                           COPY_BARS_CAPTION))
    return blocks + tables + T.warnings_blocks(comparison, "copy")  # the host's marks: a peer copy the P2P gate found wrong


COPY_BARS_CAPTION = (
    "Copy bandwidth of each GPU at the largest size measured, one way at a time, by copy engine (CE) and by SM "
    "kernel; error bars p5-p95 of the samples. Dashed line: the GPU's PCIe link's theoretical peak per direction "
    "(generation and width as read while a copy crossed it, where the fingerprint measured that).")


def _mode(params: dict) -> str:
    return f"{params['engine'].upper()}{' both ways' if params['bidirectional'] else ''}"


def _copies(comparison: Comparison) -> list:
    return [e for e in comparison.runs if e.run.suite == "copy"]


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
        blocks.append(Paragraph(f"{host}, {mode}, {human_bytes(largest)} per copy: GB/s{both}, median (source row → destination column)."
                                + _slowest_pair(cells, group[0].host.fingerprint)))
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


def _slowest_pair(cells: dict, fingerprint: dict) -> str:
    """" Slowest pair: GPUs 1 and 3 (SYS, NUMA nodes 0 and 1), 12.3 GB/s (1 → 3)." over the GPU-to-GPU cells; "" with fewer than two."""
    pairs = {(src, dst): value for (src, dst), value in cells.items() if src.startswith("gpu") and dst.startswith("gpu")}
    if len(pairs) < 2:
        return ""
    src, dst = min(pairs, key=pairs.get)
    a, b = int(src[3:]), int(dst[3:])
    return f" Slowest pair: {pair_label(fingerprint, min(a, b), max(a, b))}, {pairs[src, dst]:.4g} GB/s ({a} → {b})."


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
    gpus = list(dict.fromkeys(bar.gpu for bar in bars))
    labels = sorted({bar.label for bar in bars})
    fig = P.figure(4.0 + P.legend_height(len(labels) + 1))
    ax = fig.add_subplot()
    width = 0.8 / len(labels)
    for i, label in enumerate(labels):
        mine = [bar for bar in bars if bar.label == label]
        xs = [gpus.index(bar.gpu) + (i - (len(labels) - 1) / 2) * width for bar in mine]
        med = np.array([bar.value.median for bar in mine])
        low, high = np.array([bar.value.low for bar in mine]), np.array([bar.value.high for bar in mine])
        ax.bar(xs, med, width * 0.92, yerr=[med - low, high - med], capsize=3, color=P.PALETTE[i % len(P.PALETTE)], label=label)
        for bar in mine:
            P.drawn_value(ax, label, bar.gpu, bar.value.median, bar.value.low, bar.value.high)
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
    P.legend(fig, ax)
    return fig
