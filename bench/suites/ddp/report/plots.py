"""The ddp suite's figures: seed 000's per-sample time x #GPUs against global batch, scaling
efficiency bars, and measured against predicted step time."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from bench.common.stats import METHOD
from bench.common.units import time_unit
from bench.report import plots as P
from bench.report.series import Line
from bench.suites.ddp.report.series import Bar, Prediction, Workload


EFFICIENCY_CAPTION = (
    "Scaling efficiency = per-sample time x #GPUs on 1 GPU / the same on N GPUs (seed 000's metric; 100% is "
    f"perfect scaling). Error bars: {METHOD}."
)


PREDICTION_CAPTION = (
    "Seed 002's model: predicted step time = the step's compute (1-GPU step time at this global batch / #GPUs) "
    "+ the exposed all-reduce time of the gradient bytes. Each bar splits into that compute and the exposed "
    "communication. Error bars on measured: p5-p95 of the step-time samples."
)


PREDICTED_STYLES = [":", "-.", (0, (5, 2, 1, 2)), (0, (1, 1)), (0, (3, 1, 1, 1, 1, 1))]


def per_sample_figure(workload: Workload, lines: list[Line], colours: dict, predicted: tuple = ()) -> Figure:
    """Seed 000's figure: per-sample time x #GPUs against global batch; 1-GPU baselines dashed, as
    reference lines across the plot where a baseline has one batch size (nothing to join); the
    measured runs as points with their p5-p95; a thin line per predicted link (label, [(batch, s)])."""
    fig = P.figure(4.4 + P.legend_height(len([line for line in lines if not line.baseline]) + len(predicted) + 1))
    ax = fig.add_subplot()
    factor, unit = time_unit([s.high for line in lines for _, s in line.points] + [y for _, points in predicted for _, y in points])
    for i, (label, points) in enumerate(predicted):
        xs, ys = zip(*sorted(points))
        ax.plot(xs, [y * factor for y in ys], color=P.PALETTE[(i + 3) % len(P.PALETTE)], linestyle=PREDICTED_STYLES[i % len(PREDICTED_STYLES)],
                linewidth=1.3, marker="." if len(xs) == 1 else None, label=label)
    # Several machines: one legend entry stands for all their baselines, each in its machine's colour.
    baselines = sum(line.baseline for line in lines)
    for line, shift in zip(lines, P.shifts(len(lines))):
        if line.baseline:
            colour = P.BASELINE_COLOUR if baselines == 1 else colours[line.series.machine]
            P.errorbar(ax, line, factor, colour, shift, in_legend=baselines == 1, marker="s")
            if len(line.points) == 1:
                ax.axhline(line.points[0][1].median * factor, color=colour, linestyle="--", linewidth=1.2, alpha=0.8)
        else:
            P.errorbar(ax, line, factor, colours[line.series], shift)
    if baselines > 1:
        ax.plot([], [], color="grey", linestyle="--", marker="s", markersize=5, linewidth=1.6,
                label="1 GPU (baseline) of each machine, in the colour of its first line")
    ax.set_xscale("log", base=2)
    P.log2_ticks(ax, [x for line in lines for x, _ in line.points], lambda b: f"{b:g}")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("global batch size (samples per optimizer step, log scale)")
    ax.set_ylabel(f"per-sample time × #GPUs ({unit})")
    ax.set_title(f"Time per sample × #GPUs (lower is better; the dashed 1-GPU line is perfect scaling)\n{workload.title}",
                 fontsize=11)
    ax.grid(True, alpha=0.3)
    P.legend(fig, ax)
    return fig


def efficiency_figure(bars: list[Bar], colours: dict) -> Figure:
    """Scaling efficiency bars, grouped by model, batch and #GPUs, one bar per series."""
    groups = list(dict.fromkeys(bar.group for bar in bars))
    series = sorted({bar.series for bar in bars})
    fig = P.figure(4.4 + P.legend_height(len(series) + 1))
    ax = fig.add_subplot()
    width = 0.8 / len(series)
    for i, s in enumerate(series):
        mine = [bar for bar in bars if bar.series == s]
        xs = [groups.index(bar.group) + (i - (len(series) - 1) / 2) * width for bar in mine]
        med = np.array([bar.value.median for bar in mine]) * 100
        low = np.array([bar.value.low for bar in mine]) * 100
        high = np.array([bar.value.high for bar in mine]) * 100
        ax.bar(xs, med, width * 0.92, yerr=[med - low, high - med], capsize=3, color=colours[s],
               hatch="//" if s.mismatch else None, edgecolor="white", label=s.label)
        if len(bars) <= 16:  # more bars leave no room to write on them
            for x, m in zip(xs, med):  # at the foot of the bar, clear of the error bar
                ax.text(x, 2, f"{m:.0f}%", ha="center", va="bottom", fontsize=8, fontweight="bold",
                        bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "edgecolor": "none", "alpha": 0.85})
    ax.axhline(100, color="black", linestyle="--", linewidth=1, label="100% = perfect scaling")
    ax.set_xticks(range(len(groups)), groups, fontsize=9)
    ax.set_ylim(0, max(110, max(bar.value.high * 100 for bar in bars) + 5))
    ax.set_ylabel("scaling efficiency (%)")
    ax.set_title("DDP scaling efficiency against the 1-GPU baseline (higher is better)", fontsize=11)
    ax.grid(True, axis="y", alpha=0.3)
    P.legend(fig, ax)
    return fig


def prediction_figure(predictions: list[Prediction]) -> Figure:
    """Measured against predicted step time, each bar split into compute and exposed communication."""
    fig = P.figure(1.3 + 1.0 * len(predictions) + P.legend_height(4))
    ax = fig.add_subplot()
    factor, unit = time_unit([max(p.measured.high, p.predicted) for p in predictions])
    right = max(max(p.measured.high, p.predicted) for p in predictions) * factor
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
    P.legend(fig, ax)
    return fig
