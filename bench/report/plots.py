"""The report's plots, each built as a matplotlib Figure (no pyplot, no display) and saved as PNG and SVG.

Sized for a blog column: 8 inches wide, shown at about 800 px, where 10 pt text is about 14 px.
A series keeps its colour in every plot of a report; the legend sits under the axes, where it
cannot hide data.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
from matplotlib import rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.image import imsave
from matplotlib.lines import Line2D

from bench.report.merge import Series
from bench.report.series import Line

WIDTH_IN = 8.0
PNG_DPI = 100  # 800 px wide, a blog column; the SVG beside it stays sharp at any size
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"]

SPREAD_CAPTION = "Error bars: p5-p95 of the samples (pooled over the bundles of one series)."


def slug(text: str) -> str:
    """A file stem from a label: letters, digits and dashes."""
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()[:60]


def palette(series: list[Series]) -> dict:
    """series -> colour, and machine (host · hardware) -> the colour of its first series, for baselines."""
    colours = {}
    for i, s in enumerate(sorted(set(series))):
        colours[s] = PALETTE[i % len(PALETTE)]
        colours.setdefault(s.machine, colours[s])
    return colours


def figure(height_in: float) -> Figure:
    return Figure(figsize=(WIDTH_IN, height_in), dpi=PNG_DPI, layout="constrained")


def legend(fig: Figure, ax) -> None:
    """Under the axes; the data series first, reference lines (peaks, 100%) after them."""
    entries = sorted(zip(*ax.get_legend_handles_labels()), key=lambda entry: isinstance(entry[0], Line2D))
    if entries:
        fig.legend(*zip(*entries), loc="outside lower center", fontsize=8, frameon=False)


def legend_height(entries: int) -> float:
    return 0.19 * entries + 0.25


BASELINE_COLOUR = "#404040"  # a lone 1-GPU baseline: never the colour of the N-GPU line beside it
MARKERS = ["o", "s", "^", "v", "D", "P", "X", "*", "<", ">"]


def errorbar(ax, line: Line, factor: float, colour: str, shift: float, in_legend: bool = True, marker: str = "o",
             linestyle: "str | None" = None) -> None:
    """Median with p5-p95 bars; x is shifted by `shift` octaves so that bars at one x do not hide each other.
    Dashed for a baseline, else solid unless `linestyle` says otherwise."""
    xs = [x * 2**shift for x, _ in line.points]
    med = np.array([s.median for _, s in line.points]) * factor
    low = np.array([s.low for _, s in line.points]) * factor
    high = np.array([s.high for _, s in line.points]) * factor
    style = {"color": colour, "marker": marker, "markersize": 4 if marker == "o" else 5, "linewidth": 1.6,
             "linestyle": linestyle or ("--" if line.baseline else "-")}
    ax.errorbar(xs, med, yerr=[med - low, high - med], capsize=3, **style)
    if in_legend:
        ax.plot([], [], label=line.label, **style)  # a plain line in the legend: an error-bar entry is slow to draw


def shifts(count: int) -> list[float]:
    step = min(0.03, 0.16 / max(1, count - 1))  # never more than a sixth of an octave in all
    return [(i - (count - 1) / 2) * step for i in range(count)]


def log2_ticks(ax, values: list, label) -> None:
    ticks = sorted(set(values))
    step = max(1, math.ceil(len(ticks) / 9))
    ax.set_xticks(ticks[::step], [label(t) for t in ticks[::step]])
    ax.minorticks_off()


def save(fig: Figure, png: Path, svg: Path) -> None:
    """Write the PNG and the SVG from one layout.

    One Agg draw lays the figure out and rasterizes it; the PNG is that buffer. The SVG then keeps
    those positions (no layout engine, so no second layout and no throw-away pre-draw) and its text
    as text (selectable, a third smaller, faster to write than glyph outlines), in DejaVu Sans
    where the reader has it and the nearest sans-serif where not. The PNG's glyphs are not hinted
    (as the SVG's are measured): text is most of the drawing time, and FreeType's hinter is a
    third of that for no difference a reader sees at 800 px.
    """
    with rc_context({"text.hinting": "none", "svg.fonttype": "none"}):
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        imsave(png, canvas.buffer_rgba(), format="png", dpi=PNG_DPI,
               pil_kwargs={"compress_level": 1})  # a little larger, much faster to write
        fig.set_layout_engine(None)
        fig.savefig(svg, metadata={"Date": None})
