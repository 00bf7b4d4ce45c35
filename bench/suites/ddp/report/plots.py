"""The ddp suite's figures: per-sample time x #GPUs against global batch, scaling
efficiency bars, and measured against predicted step time."""

from __future__ import annotations

import textwrap
from collections import defaultdict

import numpy as np
from matplotlib.figure import Figure

from bench.common.stats import METHOD
from bench.common.units import plain, time_unit
from bench.report import plots as P
from bench.report.merge import GPU_RANKS, Ranks
from bench.report.series import Line
from bench.suites.ddp.report.series import Bar, Prediction
from bench.suites.training.report import Workload


def efficiency_caption(ranks: Ranks) -> str:
    return (f"Scaling efficiency = per-sample time x #{ranks.many} on 1 {ranks.one} / the same on N {ranks.many} (100% is "
            f"perfect scaling). Error bars: {METHOD}.")


def prediction_caption(ranks: Ranks) -> str:
    return (f"The compute + exposed communication model, the column of that name in \"Predicted against measured\" below: "
            f"the step's compute (the 1-{ranks.one} step at this work per {ranks.one}, its launches pooled) + the all-reduce "
            f"of the gradient bytes on what the {ranks.many} crossed, none of it hidden. A bar per host of a bundle and "
            "configuration; its measured bar splits the same compute from the rest of the step. Error bars on measured: "
            "p5-p95 of the step times of every launch, pooled.")


BASELINES_NAMED = 4
TITLE_WRAP = 85  # characters of an 11 pt title a line: about the figure's 8 inches
ROW_TITLE_WRAP = 100  # characters of an 8 pt row title a line, within the axes
ROW_PITCH = 3.2  # a prediction figure's row: its two bars (1 high each) and a line of title above them


def _baselines_label(ranks: Ranks) -> str:
    one = "process" if ranks.cpu else "GPU or process"
    return f"1 {one} (baseline) of each machine, dashed in the colour of its first line"
PREDICTED_STYLES = [":", "-.", (0, (5, 2, 1, 2)), (0, (1, 1)), (0, (3, 1, 1, 1, 1, 1))]


def per_sample_figure(workload: Workload, lines: list[Line], colours: dict, predicted: tuple = (), ranks: Ranks = GPU_RANKS) -> Figure:
    """Per-sample time x #GPUs against global batch, every point on its batch's
    tick; each machine's 1-GPU baseline dashed in its colour, a reference line across the plot where
    it has one batch size (nothing to join); a thin line per predicted link (label, [(batch, s)])."""
    baselines = sum(line.baseline for line in lines)
    # A legend entry per baseline up to a few machines; past that one entry stands for them all.
    each = baselines <= BASELINES_NAMED
    shown = ([line.label for line in lines if each or not line.baseline] + ([] if each else [_baselines_label(ranks)])
             + [label for label, _ in predicted])
    fig = P.figure(4.4 + P.legend_height(len(shown), shown))
    ax = fig.add_subplot()
    factor, unit = time_unit([s.high if s.high is not None else s.median for line in lines for _, s in line.points]
                             + [y for _, points in predicted for _, y in points])
    for i, (label, points) in enumerate(predicted):  # under the measured points, thin, in the palette's far end
        xs, ys = zip(*sorted(points))
        ax.plot(xs, [y * factor for y in ys], color=P.PALETTE[-1 - i % len(P.PALETTE)], linestyle=PREDICTED_STYLES[i % len(PREDICTED_STYLES)],
                linewidth=1.1, alpha=0.8, marker="." if len(xs) == 1 else None, label=label)
        P.drawn_line(ax, label, [(x, y * factor) for x, y in zip(xs, ys)])
    distinct = P.Distinct()
    for line in lines:
        if line.baseline:
            style = distinct.claim({"color": colours[line.series.machine] if baselines > 1 else P.BASELINE_COLOUR,
                                    "marker": P.BASELINE_MARKER, "linestyle": "--"}, keep_marker=True)
            colour = style["color"]
            P.errorbar(ax, line, factor, style, in_legend=each)
            if len(line.points) == 1:
                ax.axhline(line.points[0][1].median * factor, color=colour, linestyle="--", linewidth=1.2, alpha=0.8)
        else:
            P.errorbar(ax, line, factor, distinct.claim(colours.style(line.series)))
    if not each:
        ax.plot([], [], color="grey", linestyle="--", marker=P.BASELINE_MARKER, markersize=5, linewidth=1.6, label=_baselines_label(ranks))
    ax.set_xscale("log", base=2)
    P.log2_ticks(ax, [x for line in lines for x, _ in line.points], lambda b: f"{b:g}")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("global batch size (samples per optimizer step, log scale)")
    ax.set_ylabel(f"per-sample time × #{ranks.many} ({unit})")
    # Wrapped where the words for both kinds of rank would run past the figure's edge.
    said = f"Time per sample × #{ranks.many} (lower is better; the dashed 1-{ranks.one} line is perfect scaling)"
    ax.set_title(f"{textwrap.fill(said, TITLE_WRAP)}\n{workload.title}", fontsize=11)
    ax.grid(True, alpha=0.3)
    P.legend(fig, ax)
    return fig


def efficiency_figure(bars: list[Bar], colours: dict, ranks: Ranks = GPU_RANKS) -> Figure:
    """Scaling efficiency bars: one panel per workload (small multiples, so that no panel holds more
    groups than its labels have room for), grouped by batch and #GPUs, one bar per series."""
    workloads = list(dict.fromkeys(bar.workload for bar in bars))
    series = sorted({bar.series for bar in bars})
    fig = P.figure(3.2 * len(workloads) + 0.6 + P.legend_height(len(series) + 1, [s.label for s in series]))
    axes = fig.subplots(len(workloads), 1, squeeze=False)[:, 0]
    top = max(110, max((bar.value.high or bar.value.median) * 100 for bar in bars) + 5)
    for ax, shown in zip(axes, workloads):
        _efficiency_panel(ax, [bar for bar in bars if bar.workload == shown], series, colours, top)
        ax.set_title(shown.title, fontsize=10)
    fig.suptitle(f"DDP scaling efficiency against the 1-{ranks.one} baseline (higher is better)", fontsize=11)
    P.legend(fig, *axes)
    return fig


HATCHES = ("..", "xx", "oo", "++")


def _hatches(series: list, colours: dict) -> dict:
    """series -> its bars' hatch: a transport mismatch striped; a series whose colour an earlier one of the
    figure has, dotted (then crossed, ...), so that no two bars look alike."""
    found, seen = {}, defaultdict(int)
    for s in series:
        earlier = seen[colours[s]]
        seen[colours[s]] += 1
        found[s] = "//" if s.mismatch else HATCHES[(earlier - 1) % len(HATCHES)] if earlier else None
    return found


def _efficiency_panel(ax, bars: list[Bar], series: list, colours: dict, top: float) -> None:
    """One workload's bars: a group per batch and rank count, each group's bars side by side about its tick."""
    groups = list(dict.fromkeys(bar.tick for bar in bars))
    most = max(sum(bar.tick == group for bar in bars) for group in groups)
    width = 0.8 / most
    # Values written on the bars only where a bar is wide enough for "100%" at 8 pt.
    labelled = P.AXES_WIDTH_PT / len(groups) * width >= 4 * 8 * P.CHAR_WIDTH_EM
    hatches = _hatches(series, colours)
    for x, group in enumerate(groups):
        mine = sorted((bar for bar in bars if bar.tick == group), key=lambda bar: series.index(bar.series))
        for i, bar in enumerate(mine):
            at = x + (i - (len(mine) - 1) / 2) * width
            v = bar.value
            low, high = (v.low, v.high) if v.low is not None and v.high is not None else (v.median, v.median)
            ax.bar(at, v.median * 100, width * 0.92, yerr=[[(v.median - low) * 100], [(high - v.median) * 100]], capsize=3,
                   color=colours[bar.series], hatch=hatches[bar.series], edgecolor="white", label=bar.series.label)
            P.drawn_value(ax, bar.series.label, group, v.median * 100, low * 100, high * 100)
            if labelled:  # at the foot of the bar, clear of the error bar
                ax.text(at, 2, f"{v.median * 100:.0f}%", ha="center", va="bottom", fontsize=8, fontweight="bold",
                        bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "edgecolor": "none", "alpha": 0.85})
    ax.axhline(100, color="black", linestyle="--", linewidth=1, label="100% = perfect scaling")
    P.category_ticks(ax, groups, fontsize=9)
    ax.set_ylim(0, top)
    ax.set_ylabel("scaling efficiency (%)")
    ax.grid(True, axis="y", alpha=0.3)


def prediction_figure(predictions: list[Prediction], ranks: Ranks = GPU_RANKS) -> Figure:
    """Measured against the compute + exposed communication model's step, each bar split into the model's compute
    and the rest: the modelled all-reduce, or what the measured step took past that compute."""
    # The row's title above its two bars, across the plot; a longer one (a bundle named, a mismatch) on two lines,
    # its configuration on the second, the rows apart by as much more.
    titles = [p.group if len(p.group) <= ROW_TITLE_WRAP else p.group.replace(" — ", "\n— ", 1) for p in predictions]
    lines = max(title.count("\n") + 1 for title in titles)
    pitch = ROW_PITCH + 0.55 * (lines - 1)
    fig = P.figure(1.3 + pitch / ROW_PITCH * len(predictions) + P.legend_height(4))
    ax = fig.add_subplot()
    factor, unit = time_unit([max(p.measured.high, p.predicted) for p in predictions])
    right = max(max(p.measured.high, p.predicted) for p in predictions) * factor or 1.0  # all 0: an axis all the same
    for row, title in enumerate(titles):
        ax.text(right * 0.005, -row * pitch + 0.55, title, fontsize=8, va="bottom")
    rows = -pitch * np.arange(len(predictions))
    ticks = []
    # One barh per kind of bar, for all rows: matplotlib's cost per call, not per bar, is most of building this plot.
    for name, offset, colour, totals, ends in (
            ("predicted", -0.45, "#ff7f0e", [p.predicted for p in predictions], [p.predicted for p in predictions]),
            ("measured", -1.55, "#d62728", [p.measured.median for p in predictions], [p.measured.high for p in predictions])):
        ys = rows + offset
        # A step faster than its compute share (noise, or the 1-GPU run's own overhead) exposes nothing: all grey.
        computes = np.array([min(p.compute, total) for p, total in zip(predictions, totals)])
        totals = np.array(totals)
        ax.barh(ys, computes * factor, 1.0, color="#b0b0b0",
                label=f"compute: the 1-{ranks.one} step at this work per {ranks.one}" if name == "predicted" else None)
        ax.barh(ys, (totals - computes) * factor, 1.0, left=computes * factor, color=colour,
                label="all-reduce of the gradients, modelled: none of it hidden" if name == "predicted" else
                "the rest of the step, measured: exposed communication")
        for y, total, end in zip(ys, totals, ends):
            ax.text(end * factor + right * 0.01, y, f"{plain(total * factor, 4)} {unit}", va="center", fontsize=8)
        ticks += [(y, name) for y in ys]
    spreads = [p.measured.scaled(factor) for p in predictions]
    for p, spread in zip(predictions, spreads):
        row = p.group
        P.drawn_value(ax, "predicted", row, p.predicted * factor)
        P.drawn_value(ax, "predicted: compute", row, p.compute * factor)
        P.drawn_value(ax, "predicted: all-reduce", row, p.allreduce * factor)
        P.drawn_value(ax, "measured", row, spread.median, spread.low, spread.high)
    medians = np.array([spread.median for spread in spreads])
    ax.errorbar(medians, rows - 1.55, xerr=[medians - [spread.low for spread in spreads], [spread.high for spread in spreads] - medians],
                fmt="none", color="black", capsize=3, linewidth=1.2, label="p5-p95 of the measured step times")
    ax.set_yticks([y for y, _ in ticks], [name for _, name in ticks], fontsize=8)
    ax.set_ylim(-(len(predictions) - 1) * pitch - 2.0, 0.75 + 0.55 * lines)
    ax.set_xlim(0, right * 1.15)
    ax.set_xlabel(f"step time ({unit})")
    ax.set_title("Measured against predicted DDP step time (the compute + exposed communication model)", fontsize=11)
    ax.grid(True, axis="x", alpha=0.3)
    P.legend(fig, ax)
    return fig
