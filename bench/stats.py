"""The statistics the report and verify share: a figure's spread and the ratio of two medians
with its bootstrap confidence interval (one resampler, one level, for every such figure).

Each side of a ratio is resampled with replacement (its own sample count), the ratio of the
resampled medians is taken, and the interval is the central LEVEL of those ratios. The generator
is seeded, so the same bundles always give the same interval. The agent keeps its own
stdlib-only summaries (bench.agent.stats); this module is the controller's and may use numpy.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import numpy as np

LEVEL = 0.95
RESAMPLES = 2000
SEED = 0
LEVEL_LABEL = f"{LEVEL:.0%} CI"
METHOD = (
    f"{LEVEL:.0%} interval from a bootstrap of the ratio of medians "
    f"({RESAMPLES} resamples of each side's samples, fixed seed {SEED})"
)


@dataclass(frozen=True)
class Spread:
    """A median with its spread: p5-p95 of samples, or the confidence interval of a ratio."""

    median: float
    low: "float | None"  # None when the samples cannot give an interval (a ratio over a non-positive sample)
    high: "float | None"
    n: int

    @classmethod
    def of(cls, samples: list) -> "Spread":
        values = np.asarray(samples, dtype=float)
        low, high = np.percentile(values, [5, 95])  # linear interpolation, as bench.agent.stats.percentile
        return cls(float(np.median(values)), float(low), float(high), int(values.size))

    def scaled(self, factor: float) -> "Spread":
        return Spread(self.median * factor, self.low * factor, self.high * factor, self.n)

    @property
    def width(self) -> "float | None":
        """The interval's width relative to its median (0.1: the interval spans 10% of the value)."""
        return None if self.low is None or not self.median else (self.high - self.low) / abs(self.median)


def ratio_of_medians(numerator: list, denominator: list) -> Spread:
    """median(numerator) / median(denominator) and its bootstrap interval; n is the smaller side's count."""
    top, bottom = np.asarray(numerator, dtype=float), np.asarray(denominator, dtype=float)
    value = float(np.median(top) / np.median(bottom))
    n = int(min(top.size, bottom.size))
    if bottom.min() <= 0:
        return Spread(value, None, None, n)
    rng = np.random.default_rng(SEED)
    top_medians = np.median(rng.choice(top, (RESAMPLES, top.size)), axis=1)
    bottom_medians = np.median(rng.choice(bottom, (RESAMPLES, bottom.size)), axis=1)
    tail = (1 - LEVEL) / 2 * 100
    low, high = np.percentile(top_medians / bottom_medians, [tail, 100 - tail])
    return Spread(value, float(low), float(high), n)


def cv(samples: list) -> float:
    """Coefficient of variation (sample standard deviation over the mean); 0 for one sample."""
    mean = statistics.fmean(samples)
    return statistics.stdev(samples) / mean if len(samples) > 1 and mean else 0.0
