"""The collectives suite's figures: bus bandwidth against message size, and the point-to-point
matrix beside the host's topology."""

from __future__ import annotations

import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from bench.common.links import CPU_ONLY
from bench.common.units import human_bytes
from bench.report import plots as P
from bench.report.series import Line
from bench.suites.collectives.report.series import P2PMatrix


P2P_CAPTION = (
    "Left: send/recv bandwidth from each source rank (row) to each destination rank (column; rank i runs on GPU i), median and "
    "p5-p95 of the samples. Right: the link between the GPUs as `nvidia-smi topo -m` reports it "
    "(NV# = # bonded NVLinks; PIX/PXB = PCIe switches; PHB/NODE = host bridge; SYS = across CPU sockets)."
)
CPU_P2P_CAPTION = (
    "Left: send/recv bandwidth from each source rank (row) to each destination rank (column; each rank a process on this "
    "CPU, over gloo), median and p5-p95 of the samples. Right: no topology, since the ranks share one CPU's memory."
)


def busbw_figure(lines: list[Line], peaks: dict, colours: dict) -> Figure:
    """busbw against message size, log x; the links' theoretical peaks as horizontal lines; no two lines
    alike in colour and marker."""
    fig = P.figure(4.4 + P.legend_height(len(lines) + len(peaks), [line.label for line in lines]))
    ax = fig.add_subplot()
    # Lines of one series differ only in op, dtype, placement or ranks: its colour and line style, a marker each.
    details: dict = {}
    for line in lines:
        details.setdefault(line.series, {}).setdefault(line.detail, len(details[line.series]))
    distinct = P.Distinct()
    for line in lines:
        style = colours.style(line.series)
        if len(details[line.series]) > 1:
            style["marker"] = P.MARKERS[details[line.series][line.detail] % len(P.MARKERS)]
        P.errorbar(ax, line, 1.0, distinct.claim(style))
    for hardware, peak in sorted(peaks.items()):
        colour = next(colours[line.series] for line in lines if line.series.hardware == hardware)
        ax.axhline(peak, color=colour, linestyle=":", linewidth=1.8,
                   label=f"theoretical peak of {hardware}: {peak:.4g} GB/s (one direction)")
    values = [s.median for line in lines for _, s in line.points if s.median > 0] + list(peaks.values())
    if values and max(values) / min(values) > 30:  # a socket line and an NVLink peak: only log shows both
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_ylabel("bus bandwidth (GB/s, log scale)")
    else:
        ax.set_ylim(bottom=0)
        ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_xscale("log", base=2)
    P.log2_ticks(ax, [x for line in lines for x, _ in line.points], human_bytes)
    ax.set_xlabel("message size (bytes, log scale)")
    ax.set_title("Collective bus bandwidth against message size (higher is better)", fontsize=11)
    ax.grid(True, which="major", alpha=0.3)
    P.legend(fig, ax)
    return fig


TOPOLOGY_CLASSES = [  # (test of a cell, colour): fastest link first
    (lambda c: c.startswith("NV"), "#2ca02c"),
    (lambda c: c in ("PIX", "PXB"), "#9ecae1"),
    (lambda c: c in ("PHB", "NODE"), "#fdd49e"),
    (lambda c: c == "SYS", "#fc8d59"),
]


def _topology_colour(cell: str) -> str:
    return next((colour for test, colour in TOPOLOGY_CLASSES if test(cell)), "#e0e0e0")


def p2p_figure(matrix: P2PMatrix) -> Figure:
    """The p2p busbw matrix as a heatmap, beside the topology matrix of the same host."""
    fig = P.figure(4.4)
    left, right = fig.subplots(1, 2, width_ratios=[1.25, 1])
    # The ranks measured, not range(world_size): a bundle may name a rank past its world size, or a
    # world size no matrix could be drawn for.
    ranks = sorted({rank for pair in matrix.cells for rank in pair})
    at = {rank: i for i, rank in enumerate(ranks)}
    n = len(ranks)
    grid = np.full((n, n), np.nan)
    for (src, dst), spread in matrix.cells.items():
        grid[at[src], at[dst]] = spread.median
    image = left.imshow(grid, cmap="viridis", vmin=0)
    fig.colorbar(image, ax=left, label="send/recv bandwidth (GB/s)", shrink=0.85)
    top = np.nanmax(grid) if np.isfinite(grid).any() else 0
    for (src, dst), spread in matrix.cells.items():
        text = f"{spread.median:.3g}" + (f"\n[{spread.low:.3g}–{spread.high:.3g}]" if n <= 4 else "")
        left.text(at[dst], at[src], text, ha="center", va="center", fontsize=9 if n <= 4 else 7,
                  color="black" if spread.median > 0.6 * top else "white")
    for i in range(n):
        left.text(i, i, "–", ha="center", va="center", color="grey")
    ticks = [f"{rank}" for rank in ranks]
    left.set_xticks(range(n), ticks)
    left.set_yticks(range(n), ticks)
    left.set_xlabel("destination rank")
    left.set_ylabel("source rank")
    left.set_title(f"Measured, {human_bytes(matrix.size_bytes)} {matrix.dtype}", fontsize=10)
    _topology_panel(right, matrix.topology, matrix.series.hardware == CPU_ONLY)
    fig.suptitle(f"Point-to-point bandwidth: {matrix.series.label}", fontsize=11)
    return fig


def _topology_panel(ax, topology: "dict | None", on_cpu: bool) -> None:
    gpus = sorted(topology or {}, key=lambda name: int(name[3:]))
    ax.set_title("Topology (nvidia-smi topo -m)", fontsize=10)
    if not gpus:
        ax.axis("off")
        why = "the ranks are processes on one CPU" if on_cpu else "no GPU, or nvidia-smi missing"
        ax.text(0.5, 0.5, f"no topology matrix in the fingerprint\n({why})",
                ha="center", va="center", fontsize=9, transform=ax.transAxes)
        return
    cells = [[topology[row].get(col, "X") if row != col else "X" for col in gpus] for row in gpus]
    colours = sorted({_topology_colour(c) for row in cells for c in row})
    index = np.array([[colours.index(_topology_colour(c)) for c in row] for row in cells])
    ax.imshow(index, cmap=ListedColormap(colours), vmin=-0.5, vmax=len(colours) - 0.5)
    for r, row in enumerate(cells):
        for c, cell in enumerate(row):
            ax.text(c, r, cell, ha="center", va="center", fontsize=9 if len(gpus) <= 8 else 6)
    ax.set_xticks(range(len(gpus)), gpus)
    ax.set_yticks(range(len(gpus)), gpus)
