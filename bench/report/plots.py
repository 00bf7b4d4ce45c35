"""The report's plots, each built as a matplotlib Figure (no pyplot, no display) and saved as PNG and SVG.

Sized for a blog column: 8 inches wide, shown at about 800 px, where 10 pt text is about 14 px.
A series keeps its colour in every plot of a report; the legend sits under the axes, where it
cannot hide data.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from matplotlib import rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.image import imsave
from matplotlib.lines import Line2D
from matplotlib.text import Text
from matplotlib.ticker import FuncFormatter

from bench.common.stats import METHOD
from bench.report.merge import Series
from bench.report.series import Bar, Line, P2PMatrix, Prediction, Workload
from bench.report.units import human_bytes, time_unit
from bench.report.visible import visible

WIDTH_IN = 8.0
PNG_DPI = 100  # 800 px wide, a blog column; the SVG beside it stays sharp at any size
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"]

SPREAD_CAPTION = "Error bars: p5-p95 of the samples (pooled over the bundles of one series)."
EFFICIENCY_CAPTION = (
    "Scaling efficiency = per-sample time x #GPUs on 1 GPU / the same on N GPUs (seed 000's metric; 100% is "
    f"perfect scaling). Error bars: {METHOD}."
)
PREDICTION_CAPTION = (
    "Seed 002's model: predicted step time = the step's compute (1-GPU step time at this global batch / #GPUs) "
    "+ the exposed all-reduce time of the gradient bytes. Each bar splits into that compute and the exposed "
    "communication. Error bars on measured: p5-p95 of the step-time samples."
)
P2P_CAPTION = (
    "Left: send/recv bandwidth from each source rank (row) to each destination rank (column; rank i runs on GPU i), median and "
    "p5-p95 of the samples. Right: the link between the GPUs as `nvidia-smi topo -m` reports it "
    "(NV# = # bonded NVLinks; PIX/PXB = PCIe switches; PHB/NODE = host bridge; SYS = across CPU sockets)."
)


def palette(series: list[Series]) -> dict:
    """series -> colour, and machine (host · hardware) -> the colour of its first series, for baselines."""
    colours = {}
    for i, s in enumerate(sorted(set(series))):
        colours[s] = PALETTE[i % len(PALETTE)]
        colours.setdefault(s.machine, colours[s])
    return colours


def _figure(height_in: float) -> Figure:
    return Figure(figsize=(WIDTH_IN, height_in), dpi=PNG_DPI, layout="constrained")


def _legend(fig: Figure, ax) -> None:
    """Under the axes; the data series first, reference lines (peaks, 100%) after them."""
    entries = sorted(zip(*ax.get_legend_handles_labels()), key=lambda entry: isinstance(entry[0], Line2D))
    if entries:
        fig.legend(*zip(*entries), loc="outside lower center", fontsize=8, frameon=False)


def _legend_height(entries: int) -> float:
    return 0.19 * entries + 0.25


BASELINE_COLOUR = "#404040"  # a lone 1-GPU baseline: never the colour of the N-GPU line beside it
MARKERS = ["o", "s", "^", "v", "D", "P", "X", "*", "<", ">"]


def _errorbar(ax, line: Line, factor: float, colour: str, shift: float, in_legend: bool = True, marker: str = "o") -> None:
    """Median with p5-p95 bars; x is shifted by `shift` octaves so that bars at one x do not hide each other."""
    xs = [x * 2**shift for x, _ in line.points]
    med = np.array([s.median for _, s in line.points]) * factor
    low = np.array([s.low for _, s in line.points]) * factor
    high = np.array([s.high for _, s in line.points]) * factor
    style = {"color": colour, "marker": marker, "markersize": 4 if marker == "o" else 5, "linewidth": 1.6,
             "linestyle": "--" if line.baseline else "-"}
    ax.errorbar(xs, med, yerr=[med - low, high - med], capsize=3, **style)
    if in_legend:
        ax.plot([], [], label=line.label, **style)  # a plain line in the legend: an error-bar entry is slow to draw


def _shifts(count: int) -> list[float]:
    step = min(0.03, 0.16 / max(1, count - 1))  # never more than a sixth of an octave in all
    return [(i - (count - 1) / 2) * step for i in range(count)]


def _log2_ticks(ax, values: list, label) -> None:
    ticks = sorted(set(values))
    step = max(1, math.ceil(len(ticks) / 9))
    ax.set_xticks(ticks[::step], [label(t) for t in ticks[::step]])
    ax.minorticks_off()


def per_sample_figure(workload: Workload, lines: list[Line], colours: dict) -> Figure:
    """Seed 000's figure: per-sample time x #GPUs against global batch; 1-GPU baselines dashed, as
    reference lines across the plot where a baseline has one batch size (nothing to join)."""
    fig = _figure(4.4 + _legend_height(len([line for line in lines if not line.baseline]) + 1))
    ax = fig.add_subplot()
    factor, unit = time_unit([s.high for line in lines for _, s in line.points])
    # Several machines: one legend entry stands for all their baselines, each in its machine's colour.
    baselines = sum(line.baseline for line in lines)
    for line, shift in zip(lines, _shifts(len(lines))):
        if line.baseline:
            colour = BASELINE_COLOUR if baselines == 1 else colours[line.series.machine]
            _errorbar(ax, line, factor, colour, shift, in_legend=baselines == 1, marker="s")
            if len(line.points) == 1:
                ax.axhline(line.points[0][1].median * factor, color=colour, linestyle="--", linewidth=1.2, alpha=0.8)
        else:
            _errorbar(ax, line, factor, colours[line.series], shift)
    if baselines > 1:
        ax.plot([], [], color="grey", linestyle="--", marker="s", markersize=5, linewidth=1.6,
                label="1 GPU (baseline) of each machine, in the colour of its first line")
    ax.set_xscale("log", base=2)
    _log2_ticks(ax, [x for line in lines for x, _ in line.points], lambda b: f"{b:g}")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("global batch size (samples per optimizer step, log scale)")
    ax.set_ylabel(f"per-sample time × #GPUs ({unit})")
    ax.set_title(f"Time per sample × #GPUs (lower is better; the dashed 1-GPU line is perfect scaling)\n{workload.title}",
                 fontsize=11)
    ax.grid(True, alpha=0.3)
    _legend(fig, ax)
    return fig


def busbw_figure(lines: list[Line], peaks: dict, colours: dict) -> Figure:
    """busbw against message size, log x; the links' theoretical peaks as horizontal lines."""
    fig = _figure(4.4 + _legend_height(len(lines) + len(peaks)))
    ax = fig.add_subplot()
    # Lines of one series differ only in op, dtype, placement or ranks: one colour, a marker each.
    markers: dict = {}
    for line in lines:
        mine = markers.setdefault(line.series, {})
        mine.setdefault(line.detail, MARKERS[len(mine) % len(MARKERS)])
    for line, shift in zip(lines, _shifts(len(lines))):
        _errorbar(ax, line, 1.0, colours[line.series], shift, marker=markers[line.series][line.detail])
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
    _log2_ticks(ax, [x for line in lines for x, _ in line.points], human_bytes)
    ax.set_xlabel("message size (bytes, log scale)")
    ax.set_title("Collective bus bandwidth against message size (higher is better)", fontsize=11)
    ax.grid(True, which="major", alpha=0.3)
    _legend(fig, ax)
    return fig


def efficiency_figure(bars: list[Bar], colours: dict) -> Figure:
    """Scaling efficiency bars, grouped by model, batch and #GPUs, one bar per series."""
    groups = list(dict.fromkeys(bar.group for bar in bars))
    series = sorted({bar.series for bar in bars})
    fig = _figure(4.4 + _legend_height(len(series) + 1))
    ax = fig.add_subplot()
    width = 0.8 / len(series)
    for i, s in enumerate(series):
        mine = [bar for bar in bars if bar.series == s]
        xs = [groups.index(bar.group) + (i - (len(series) - 1) / 2) * width for bar in mine]
        med = np.array([bar.value.median for bar in mine]) * 100
        low = np.array([bar.value.low for bar in mine], dtype=float) * 100  # NaN: no interval, so no error bar
        high = np.array([bar.value.high for bar in mine], dtype=float) * 100
        ax.bar(xs, med, width * 0.92, yerr=[med - low, high - med], capsize=3, color=colours[s],
               hatch="//" if s.mismatch else None, edgecolor="white", label=s.label)
        if len(bars) <= 16:  # more bars leave no room to write on them
            for x, m in zip(xs, med):  # at the foot of the bar, clear of the error bar
                ax.text(x, 2, f"{m:.0f}%", ha="center", va="bottom", fontsize=8, fontweight="bold",
                        bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "edgecolor": "none", "alpha": 0.85})
    ax.axhline(100, color="black", linestyle="--", linewidth=1, label="100% = perfect scaling")
    ax.set_xticks(range(len(groups)), groups, fontsize=9)
    ax.set_ylim(0, max(110, max((bar.value.median if bar.value.high is None else bar.value.high) * 100 for bar in bars) + 5))
    ax.set_ylabel("scaling efficiency (%)")
    ax.set_title("DDP scaling efficiency against the 1-GPU baseline (higher is better)", fontsize=11)
    ax.grid(True, axis="y", alpha=0.3)
    _legend(fig, ax)
    return fig


def prediction_figure(predictions: list[Prediction]) -> Figure:
    """Measured against predicted step time, each bar split into compute and exposed communication."""
    fig = _figure(1.3 + 1.0 * len(predictions) + _legend_height(4))
    ax = fig.add_subplot()
    factor, unit = time_unit([max(p.measured.high, p.predicted) for p in predictions])
    right = max(max(p.measured.high, p.predicted) for p in predictions) * factor or 1.0  # all 0: an axis all the same
    for row, p in enumerate(predictions):
        # The row's title above its two bars, across the plot: a long series label fits there.
        ax.text(right * 0.005, -row * 3.2 + 0.55, f"{p.series.label} — {p.group.replace(chr(10), ', ')}", fontsize=8,
                va="bottom")
    rows = -3.2 * np.arange(len(predictions))
    ticks = []
    # One barh per kind of bar, for all rows: matplotlib's cost per call, not per bar, is most of building this plot.
    for name, offset, colour, totals, ends in (
            ("predicted", -0.45, "#ff7f0e", [p.predicted for p in predictions], [p.predicted for p in predictions]),
            ("measured", -1.55, "#d62728", [p.measured.median for p in predictions], [p.measured.high for p in predictions])):
        ys = rows + offset
        # A step faster than its compute share (noise, or the 1-GPU run's own overhead) exposes nothing: all grey.
        computes = np.array([min(p.compute, total) if p.compute is not None else 0.0 for p, total in zip(predictions, totals)])
        totals = np.array(totals)
        ax.barh(ys, computes * factor, 1.0, color="#b0b0b0",
                label="compute: 1-GPU step time at this batch / #GPUs" if name == "predicted" else None)
        ax.barh(ys, (totals - computes) * factor, 1.0, left=computes * factor, color=colour, label=f"exposed communication, {name}")
        for y, total, end in zip(ys, totals, ends):
            ax.text(end * factor + right * 0.01, y, f"{total * factor:.3g} {unit}", va="center", fontsize=8)
        ticks += [(y, name) for y in ys]
    spreads = [p.measured.scaled(factor) for p in predictions]
    medians = np.array([spread.median for spread in spreads])
    ax.errorbar(medians, rows - 1.55, xerr=[medians - [spread.low for spread in spreads], [spread.high for spread in spreads] - medians],
                fmt="none", color="black", capsize=3, linewidth=1.2, label="p5-p95 of the measured step times")
    ax.set_yticks([y for y, _ in ticks], [name for _, name in ticks], fontsize=8)
    ax.set_ylim(-len(predictions) * 3.2 + 1.2, 1.3)
    ax.set_xlim(0, right * 1.15)
    ax.set_xlabel(f"step time ({unit})")
    ax.set_title("Measured against predicted DDP step time (seed 002's model)", fontsize=11)
    ax.grid(True, axis="x", alpha=0.3)
    _legend(fig, ax)
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
    fig = _figure(4.4)
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
    _topology_panel(right, matrix.topology)
    fig.suptitle(f"Point-to-point bandwidth: {matrix.series.label}", fontsize=11)
    return fig


def _topology_panel(ax, topology: "dict | None") -> None:
    gpus = sorted(topology or {}, key=lambda name: int(name[3:]))
    ax.set_title("Topology (nvidia-smi topo -m)", fontsize=10)
    if not gpus:
        ax.axis("off")
        ax.text(0.5, 0.5, "no topology matrix in the fingerprint\n(no GPU, or nvidia-smi missing)",
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


def save(fig: Figure, png: Path, svg: Path) -> None:
    """Write the PNG and the SVG from one layout.

    One Agg draw lays the figure out and rasterizes it; the PNG is that buffer. The SVG then keeps
    those positions (no layout engine, so no second layout and no throw-away pre-draw) and its text
    as text (selectable, a third smaller, faster to write than glyph outlines), in DejaVu Sans
    where the reader has it and the nearest sans-serif where not. The PNG's glyphs are not hinted
    (as the SVG's are measured): text is most of the drawing time, and FreeType's hinter is a
    third of that for no difference a reader sees at 800 px.
    """
    for text in fig.findobj(Text):  # labels from a bundle: no control character reaches the SVG (not XML then)
        text.set_text(visible(text.get_text()))
    with rc_context({"text.hinting": "none", "svg.fonttype": "none"}):
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        imsave(png, canvas.buffer_rgba(), format="png", dpi=PNG_DPI,
               pil_kwargs={"compress_level": 1})  # a little larger, much faster to write
        fig.set_layout_engine(None)
        fig.savefig(svg, metadata={"Date": None})
