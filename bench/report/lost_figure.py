"""The answer's figure, the first a reader sees: the share of training throughput lost per workload
and link, with its interval, a panel per machine, on the verdicts' bands. answer.py gives it one
row per machine, workload, rank count and global batch, each with a value per link."""

from __future__ import annotations

import textwrap
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from bench.report import plots as P

BANDS = ("#e5f5e0", "#fff2cc", "#fde0dd")  # negligible, noticeable, severe: light, under the points
ROW_IN = 0.42  # a row's height: up to three lines of its label, its links' points one above another
LABEL_WRAP = 34  # characters of a row's label a line, so that the label column stays a third of the figure


@dataclass(frozen=True)
class Lost:
    """One link's point of a row: the share lost (percent), its interval (percent; None: none)."""

    link: str  # "default via P2P", "default (gloo)"
    value: float
    low: "float | None"
    high: "float | None"


@dataclass(frozen=True)
class Row:
    machine: str  # the panel: "local · 2x H100 80GB HBM3, NVLink NV18"
    workload: str  # "gpt2 bf16"
    detail: str  # "2 GPUs · global batch 16"
    warned: bool  # a line below says why (a flagged figure, hosts that shared a machine): "⚠" at its label's end
    points: tuple  # (Lost, ...), one per link

    @property
    def label(self) -> str:
        return f"{self.workload} · {self.detail}" + (" ⚠" if self.warned else "")

    @property
    def tick(self) -> str:
        return textwrap.fill(self.workload, LABEL_WRAP) + f"\n{self.detail}" + (" ⚠" if self.warned else "")


def height_in(rows: list[Row]) -> float:
    machines = len({row.machine for row in rows})
    links = len({point.link for row in rows for point in row.points})
    return ROW_IN * len(rows) + 0.45 * machines + 1.0 + P.legend_height(links + 3)


def lost_figure(rows: list[Row], bands: tuple, unit: str, interval: str) -> Figure:
    """A panel per machine, a row per workload (its rank count and global batch), a point per link
    with its interval; bands = (negligible below, severe above) in percent, shaded behind; unit:
    "GPUs" or "processes", and interval ("95% CI"), for the axis."""
    machines = list(dict.fromkeys(row.machine for row in rows))
    links = sorted({point.link for row in rows for point in row.points})
    distinct = P.Distinct()
    styles = {link: distinct.claim({key: value for key, value in P.style_of(link).items() if key != "linestyle"}) for link in links}
    counts = [sum(row.machine == machine for row in rows) for machine in machines]
    fig = P.figure(height_in(rows))
    axes = fig.subplots(len(machines), 1, squeeze=False, sharex=True, gridspec_kw={"height_ratios": counts})[:, 0]
    ends = [end for row in rows for point in row.points for end in (point.low, point.value, point.high) if end is not None]
    left, right = min([0.0, *ends]), max([bands[1] + 5, *ends])
    negligible, severe = bands
    for ax, machine in zip(axes, machines):
        mine = [row for row in rows if row.machine == machine]
        for colour, (start, end) in zip(BANDS, ((left - 100, negligible), (negligible, severe), (severe, 200))):
            ax.axvspan(start, end, color=colour, linewidth=0, zorder=0)
        at = defaultdict(list)  # link -> [(y, point)]: one line of points a link, each row's links one above another
        for y, row in enumerate(mine):
            for k, point in enumerate(row.points):
                at[point.link].append((y + (k - (len(row.points) - 1) / 2) * min(0.22, 0.8 / len(row.points)), point))
                P.drawn_value(ax, point.link, row.label, point.value, point.low, point.high)
        for link, placed in at.items():
            values = np.array([point.value for _, point in placed])
            lows = np.array([point.value if point.low is None else point.low for _, point in placed])
            highs = np.array([point.value if point.high is None else point.high for _, point in placed])
            ax.errorbar(values, [y for y, _ in placed], xerr=[values - lows, highs - values], capsize=3, markersize=6,
                        linestyle="none", linewidth=1.6, zorder=3, **styles[link])
        ax.set_yticks(range(len(mine)), [row.tick for row in mine], fontsize=8)
        ax.set_ylim(len(mine) - 0.5, -0.5)  # the first row on top
        ax.set_xlim(left - 1, min(right * 1.08 + 1, 101))
        ax.set_title(machine, fontsize=9, loc="left")
        ax.grid(True, axis="x", alpha=0.4)
    axes[-1].set_xlabel(f"training throughput lost (%) by N {unit} against N × one, with its {interval}")
    fig.suptitle("Training throughput lost per workload and link (lower is better)", fontsize=11)
    handles = [Line2D([], [], linestyle="none", markersize=6, **styles[link]) for link in links]
    names = (f"negligible: under {negligible:g}% lost", f"noticeable: {negligible:g}-{severe:g}%", f"severe: past {severe:g}%")
    bands_legend = [Patch(facecolor=colour, edgecolor="#999999", linewidth=0.5, label=name) for colour, name in zip(BANDS, names)]
    fig.legend([*handles, *bands_legend], [*links, *names], loc="outside lower center", fontsize=8, frameon=False,
               ncols=1 if len(links) > 3 else 2)
    return fig
