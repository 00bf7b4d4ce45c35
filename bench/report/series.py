"""What each plot and table shows, computed from the samples of the merged runs.

Spread is always taken from the raw samples (pooled over the runs of one series), never from a
single number: p5-p95 of the samples for measured quantities; for scaling efficiency, a figure
computed from two sets of runs, the confidence interval of bench/common/stats.py's model of
launches and the samples within them.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.common.stats import Spread
from bench.report.merge import RunEntry, Series


def pooled(entries: list[RunEntry], metric: str) -> list:
    """The samples of one metric over the runs of a series: its spread is taken from these."""
    return [s for entry in entries for s in entry.samples(metric)]


# --- DDP ------------------------------------------------------------------------------------


@dataclass
class Line:
    """One line of a plot: a series (or a machine's 1-GPU baseline) against x."""

    series: Series
    label: str
    points: list  # [(x, Spread)], sorted by x
    baseline: bool = False
    detail: tuple = ()  # what else tells this line apart (op, dtype, ranks), for the label


def lines_of(groups: dict, make_label) -> list[Line]:
    lines = []
    for key, by_x in sorted(groups.items()):
        points = sorted((x, Spread.of(samples)) for x, samples in by_x.items() if samples)
        if points:
            lines.append(make_label(key, points))
    return lines


# --- Collectives ----------------------------------------------------------------------------


