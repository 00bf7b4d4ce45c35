"""The report's plots, each built as a matplotlib Figure (no pyplot, no display) and saved as PNG and
SVG, with the values it drew beside them (NAME.json: see drawn()).

Sized for a blog column: 8 inches wide, shown at about 800 px, where 10 pt text is about 14 px.
A series keeps its colour in every plot of a report, and from one report to the next; the legend sits under the axes, where it
cannot hide data.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import textwrap
from pathlib import Path

import numpy as np
from matplotlib import rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.image import imsave
from matplotlib.lines import Line2D
from matplotlib.text import Text
from matplotlib.ticker import FixedFormatter

from bench.common.escape import plot as plot_text
from bench.common.files import open_anew
from bench.report.merge import Series
from bench.report.series import Line

WIDTH_IN = 8.0
PNG_DPI = 100  # 800 px wide, a blog column; the SVG beside it stays sharp at any size
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"]

SPREAD_CAPTION = "Error bars: p5-p95 of the samples (pooled over the bundles of one series)."


def slug(text: str) -> str:
    """A file stem from a label: letters, digits and dashes."""
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()[:60]


LINESTYLES = ["-", "-.", ":"]  # never "--": a dashed line is a 1-GPU baseline


def _slot(identity: str) -> int:
    return int.from_bytes(hashlib.sha256(identity.encode()).digest()[:8], "big")


def style_of(identity: str, shift: int = 0) -> dict:
    """matplotlib's color, marker and linestyle of a series, from what it is (its label), never from its place among
    the other series of a report: a link keeps its look from one report to the next, a bundle added or not. shift
    moves it to the next marker of its colour (past all ten, the next colour): Palette's way around a clash."""
    slot = _slot(identity)
    colour, marker = slot % len(PALETTE) + shift // len(MARKERS), slot // len(PALETTE) + shift
    return {"color": PALETTE[colour % len(PALETTE)], "marker": MARKERS[marker % len(MARKERS)],
            "linestyle": LINESTYLES[slot // (len(PALETTE) * len(MARKERS)) % len(LINESTYLES)]}


class Palette(dict):
    """series -> colour, and machine (host · hardware) -> a colour of its own, for baselines (a dict: every
    suite's part reads colours[series]); style() adds a marker and a line style, so that lines stay told apart
    where colours repeat or cannot be seen (print, colour blindness). Each is its identity's (style_of); where
    two series of the report would look alike, the one whose identity sorts later takes its colour's next
    marker, so that no two series of a report share a colour and a marker."""

    def __init__(self, series: list[Series]):
        super().__init__()
        self.styles, taken = {}, set()
        for s in sorted(set(series), key=lambda s: (_slot(s.label), s.label)):
            shift = next((k for k in range(len(PALETTE) * len(MARKERS)) if _look(style_of(s.label, k)) not in taken), 0)
            self.styles[s] = style_of(s.label, shift)
            taken.add(_look(self.styles[s]))
            self[s] = self.styles[s]["color"]
            self[s.machine] = style_of(s.machine)["color"]

    def style(self, series: Series) -> dict:
        """matplotlib's color, marker and linestyle of a series (a copy: a figure may change its marker)."""
        return dict(self.styles.get(series) or style_of(series.label))


def _look(style: dict) -> tuple:
    return style["color"], style["marker"]


def palette(series: list[Series]) -> Palette:
    return Palette(series)


class Distinct:
    """The (colour, marker) pairs drawn in one figure so far: claim() keeps a line's own where it is
    free, else moves it to the next free marker of its colour (a series keeps its colour in every
    figure), and past those, to the next free colour. No two lines of a figure look alike."""

    def __init__(self):
        self.taken = set()

    def claim(self, style: dict, keep_marker: bool = False) -> dict:
        """style with a (color, marker) no other line of the figure has; keep_marker: a marker that
        says what a line is (a baseline's square) stays while a colour is free for it, and the colour
        moves instead. Past every pair (a figure of 100 lines: split() keeps figures far below), as given."""
        colours = [style["color"], *(c for c in PALETTE if c != style["color"])]
        mine = style["marker"] if style["marker"] in MARKERS else MARKERS[0]
        markers = MARKERS[MARKERS.index(mine):] + MARKERS[:MARKERS.index(mine)]
        tries = [(colour, style["marker"]) for colour in (colours if keep_marker else colours[:1])]
        for colour, marker in tries + [(colour, marker) for colour in colours for marker in markers]:
            if (colour, marker) not in self.taken:
                self.taken.add((colour, marker))
                return {**style, "color": colour, "marker": marker}
        return style


# A reader tells apart about eight lines by colour and marker at a glance (categorical palettes are
# designed for up to 8-10 hues, and a legend past 8 entries is read line by line, back and forth): a
# figure that would hold more is split (collectives: by op, then dtype, ...) rather than crowded.
MAX_SERIES = 8


def split(lines: list, keys: list) -> "list[tuple[tuple, list]]":
    """lines in groups of at most MAX_SERIES, each (what its lines share, lines): by the first of keys
    (functions of a line) whose values differ, then the next within each part; where no key is left
    to split by, in runs alike in length."""
    if len(lines) <= MAX_SERIES:
        return [((), lines)]
    for i, key in enumerate(keys):
        values = list(dict.fromkeys(key(line) for line in lines))
        if len(values) > 1:
            return [((value, *rest), part) for value in values
                    for rest, part in split([line for line in lines if key(line) == value], keys[i + 1:])]
    size = math.ceil(len(lines) / math.ceil(len(lines) / MAX_SERIES))  # parts alike in size: 9 lines as 5 and 4, not 8 and 1
    return [((f"part {k // size + 1}",), lines[k:k + size]) for k in range(0, len(lines), size)]


# Figures and panels drawn per workload: past this many a report's time grows with each (a figure
# takes 1.4 s on 2 cores) and no reader looks through them all; the tables hold every workload.
MOST_WORKLOADS_DRAWN = 8


def drawn_workloads(workloads) -> tuple[list, list]:
    """(the workloads whose figures are drawn: the first MOST_WORKLOADS_DRAWN by name, numbers in it by
    their value, so that every figure draws the same ones; those left out). A workload is its name in the
    answer, or has a title."""
    ordered = sorted(set(workloads), key=lambda w: [int(part) if part.isdigit() else part
                                                    for part in re.split(r"(\d+)", _name(w))])
    return ordered[:MOST_WORKLOADS_DRAWN], ordered[MOST_WORKLOADS_DRAWN:]


def _name(workload) -> str:
    return workload if isinstance(workload, str) else workload.title


def left_out_words(left: list, what: str) -> "str | None":
    """"Per-sample figures of 142 more workloads (gpt2 ..., ...) are not drawn: ..."; None where none was left out."""
    if not left:
        return None
    names = [_name(w) for w in left]
    shown = "; ".join(names[:3]) + ("; ..." if len(names) > 3 else "")
    return (f"{what} of {len(left)} more workload{'s' * (len(left) > 1)} ({shown}) are not drawn: a report draws those "
            f"of the first {MOST_WORKLOADS_DRAWN} workloads; the tables hold every one.")


def figure(height_in: float) -> Figure:
    return Figure(figsize=(WIDTH_IN, height_in), dpi=PNG_DPI, layout="constrained")


LEGEND_WRAP = 110  # characters: a longer label would run past the figure's edge at 8 pt


def legend(fig: Figure, *axes) -> None:
    """Under the axes, one entry a row (so no two entries can overlap), a long label wrapped; the
    data series first, reference lines (peaks, 100%) after them; an entry that several panels
    share, once."""
    entries = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            entries.setdefault(label, handle)
    ordered = sorted(entries.items(), key=lambda entry: isinstance(entry[1], Line2D))
    if ordered:
        fig.legend([handle for _, handle in ordered],
                   [textwrap.fill(label, LEGEND_WRAP, subsequent_indent="    ") for label, _ in ordered],
                   loc="outside lower center", fontsize=8, frameon=False)


def legend_height(entries: int, labels: "list[str] | None" = None) -> float:
    lines = entries + sum(len(label) // LEGEND_WRAP for label in labels or [])
    return 0.19 * lines + 0.25


BASELINE_COLOUR = "#404040"  # a lone 1-GPU baseline: never the colour of the N-GPU line beside it
MARKERS = ["o", "^", "v", "D", "P", "X", "*", "<", ">", "h"]
BASELINE_MARKER = "s"  # no series' marker: a baseline is never taken for a series


def drawn(ax) -> dict:
    """What an axes drew, as numbers in the units of its axes: "lines" ({label, points: [[x, y, low,
    high]]}), "values" (a bar's or a point's of a category: {label, group, value, low, high}) and
    "shaded" ({from, to, label}) spans. Each drawing helper adds what it draws as it draws it; save()
    writes every axes' record beside the PNG and SVG (NAME.json), so that a figure can be read back
    and set against its table."""
    return ax.__dict__.setdefault("_ddpbench_drawn", {"lines": [], "values": [], "shaded": []})


def _number(value) -> "float | None":
    value = float(value)
    return value if math.isfinite(value) else None


def drawn_line(ax, label: str, points) -> None:
    """A line's points, [(x, y)] or [(x, y, low, high)], into drawn(ax)."""
    drawn(ax)["lines"].append({"label": label, "points": [[_number(v) if v is not None else None for v in point] for point in points]})


def drawn_value(ax, label: str, group: str, value: float, low: "float | None" = None, high: "float | None" = None) -> None:
    drawn(ax)["values"].append({"label": label, "group": group, "value": _number(value),
                              "low": None if low is None else _number(low), "high": None if high is None else _number(high)})


def errorbar(ax, line: Line, factor: float, style: dict, in_legend: bool = True) -> None:
    """Median with p5-p95 bars, each point on its own x tick; lines at one x are told apart by
    marker and line style, their bars drawn light so that one does not hide another."""
    xs = [x for x, _ in line.points]
    med = np.array([s.median for _, s in line.points]) * factor
    low = np.array([s.low if s.low is not None else s.median for _, s in line.points]) * factor
    high = np.array([s.high if s.high is not None else s.median for _, s in line.points]) * factor
    drawn_line(ax, line.label, zip(xs, med, low, high))
    style = {"markersize": 5, "linewidth": 1.6, **style}
    _, _, bars = ax.errorbar(xs, med, yerr=[med - low, high - med], capsize=3, **style)
    for bar in bars:
        bar.set_alpha(0.45)
    if in_legend:
        ax.plot([], [], label=line.label, **style)  # a plain line in the legend: an error-bar entry is slow to draw


AXES_WIDTH_PT = 0.85 * WIDTH_IN * 72  # an axes' width in a figure of one column of panels
CHAR_WIDTH_EM = 0.6  # a character of DejaVu Sans is at most about 0.6 of its size wide (digits, most letters)


def category_ticks(ax, labels: list[str], fontsize: float) -> None:
    """One tick per category, its label level where the labels fit side by side, else turned upright:
    labels never run into each other, however many categories a panel holds."""
    slot = AXES_WIDTH_PT / max(1, len(labels))
    widest = max((len(line) for label in labels for line in label.split("\n")), default=0) * fontsize * CHAR_WIDTH_EM
    tallest = max((label.count("\n") + 1 for label in labels), default=1) * fontsize * 1.25
    if widest <= 0.9 * slot:
        ax.set_xticks(range(len(labels)), labels, fontsize=fontsize)
    else:
        # Turned upright a label is as wide as its lines are tall: where not even that fits, the text shrinks.
        size = min(fontsize, fontsize * 0.9 * slot / tallest)
        ax.set_xticks(range(len(labels)), labels, fontsize=size, rotation=90, ha="center")


def log2_ticks(ax, values: list, label, most: int = 9) -> None:
    """Ticks at measured values on a log axis, at most `most` and each a `most`th of the axis's range past
    the one before: sweeps of other sizes in one figure (83.45 MiB beside 64 MiB) would print over each other."""
    ticks = sorted(set(values))
    gap = math.log2(ticks[-1] / ticks[0]) / most if len(ticks) > 1 and ticks[0] > 0 else 0.0
    chosen = ticks[:1]
    for tick in ticks[1:]:
        if chosen[-1] <= 0 or math.log2(tick / chosen[-1]) >= gap:
            chosen.append(tick)
    ax.set_xticks(chosen, [label(t) for t in chosen])
    ax.minorticks_off()


def figure_data(fig: Figure) -> dict:
    """The figure's drawn values (drawn()), an entry per axes that drew any, with its title and axis labels."""
    panels = []
    for ax in fig.axes:
        record = drawn(ax)
        if any(record.values()):
            panels.append({"title": ax.get_title() or ax.get_title(loc="left"), "xlabel": ax.get_xlabel(), "ylabel": ax.get_ylabel(), **record})
    return {"title": fig.get_suptitle(), "axes": panels}


def save(fig: Figure, png: Path, svg: Path) -> None:
    """Write the PNG and the SVG from one layout, and the values drawn beside them (the PNG's stem + .json).

    One Agg draw lays the figure out and rasterizes it; the PNG is that buffer. The SVG then keeps
    those positions (no layout engine, so no second layout and no throw-away pre-draw) and its text
    as text (selectable, a third smaller, faster to write than glyph outlines), in DejaVu Sans
    where the reader has it and the nearest sans-serif where not. The PNG's glyphs are not hinted
    (as the SVG's are measured): text is most of the drawing time, and FreeType's hinter is a
    third of that for no difference a reader sees at 800 px.
    """
    for ax in fig.axes:  # tick labels are set from their formatter as the figure is drawn
        for axis in (ax.xaxis, ax.yaxis):
            for formatter in (axis.get_major_formatter(), axis.get_minor_formatter()):
                if isinstance(formatter, FixedFormatter):
                    formatter.seq = [plot_text(label) for label in formatter.seq]
    for text in fig.findobj(Text):
        text.set_text(plot_text(text.get_text()))
    with rc_context({"text.hinting": "none", "svg.fonttype": "none"}):
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        with open_anew(png, "wb") as out:
            imsave(out, canvas.buffer_rgba(), format="png", dpi=PNG_DPI,
                   pil_kwargs={"compress_level": 1})  # a little larger, much faster to write
        fig.set_layout_engine(None)
        with open_anew(svg, "wb") as out:
            fig.savefig(out, format="svg", metadata={"Date": None})
    with open_anew(png.with_suffix(".json")) as out:
        json.dump(figure_data(fig), out, indent=1, allow_nan=False)
