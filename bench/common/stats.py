"""Every statistic of ddpbench: the summary the agent writes for each metric, a figure's spread in
the report, and the ratio of two medians with its bootstrap confidence interval (one resampler,
one level, for the report's scaling efficiency and verify's verdicts alike).

Each side of a ratio is resampled with replacement (its own sample count), the ratio of the
resampled medians is taken, and the interval is the central LEVEL of those ratios. The generator
is seeded, so the same bundles always give the same interval.

A verdict over many runs at once (verify, compare) takes each run's interval at family_level,
so that all of them hold together at LEVEL (Bonferroni): one run in twenty outside a 95%
interval is what such an interval promises, and a bundle of twenty runs would otherwise fail an
honest rerun about every other time. Past the levels RESAMPLES can resolve (TAIL_RESAMPLES_MIN
beyond each end: 99%), each end of the 99% percentile interval is pushed out on the log scale as
a normal quantile would be, z(level)/z(99%) times its distance from the resamples' median: the
resample count, and so the time, stays the same however many runs a bundle holds, and a few wild
resamples (one outlying sample drawn into half of a resample) cannot stretch the interval as
they would a standard deviation.

A side measured by several launches (a plan entry's launch_repeats) is resampled in two stages,
launches first and then the samples of each launch drawn: the spread between launches, which
the samples of one launch cannot show, then widens the interval as it should.
"""

from __future__ import annotations

import math
import random
import statistics
import sys
from dataclasses import dataclass

LEVEL = 0.95
RESAMPLES = 2000
TAIL_RESAMPLES_MIN = 10  # resamples beyond each end of a percentile interval, at the least
SEED = 0
DRAWN_RESAMPLE_MAX = 50  # above this many samples, drawing each resample costs more than its order statistics
LEVEL_LABEL = f"{LEVEL:.0%} CI"
METHOD = (
    f"{LEVEL:.0%} interval from a bootstrap of the ratio of medians "
    f"({RESAMPLES} resamples of each side's samples, fixed seed {SEED})"
)


def family_level(count: int) -> float:
    """The level each of `count` intervals needs for all of them to hold together at LEVEL."""
    return 1 - (1 - LEVEL) / max(count, 1)


def percent(level: float) -> str:
    """95%, 99.4%: a level as the interval's name says it."""
    return f"{level * 100:.3g}%"


def family_method(level: float, count: int) -> str:
    """METHOD for `count` intervals taken together at LEVEL."""
    beyond = "" if _resolved(level) else (f"; past {percent(RESOLVED_LEVEL)}, each end of the {percent(RESOLVED_LEVEL)} percentile "
                                          f"interval pushed out on the log scale as a normal quantile would be")
    return (f"{percent(level)} interval for each of the {count} compared runs, so that all of them hold together at "
            f"{percent(LEVEL)} (Bonferroni), from a bootstrap of the ratio of medians ({RESAMPLES} resamples "
            f"of each side's samples, launches first where a side has several, fixed seed {SEED}){beyond}")


RESOLVED_LEVEL = 1 - 2 * TAIL_RESAMPLES_MIN / RESAMPLES  # the widest percentile interval RESAMPLES resolve: 99%
LOG_FLOAT_MAX = math.log(sys.float_info.max)


def _resolved(level: float) -> bool:
    return level <= RESOLVED_LEVEL + 1e-12


def _interval(value: float, ratios: list[float], level: float, n: int) -> Spread:
    """The central `level` of the sorted resampled ratios; past RESOLVED_LEVEL, each end of their
    RESOLVED_LEVEL percentile interval extrapolated on the log scale by the ratio of normal
    quantiles, each tail by its own distance from the median (the resamples may be skewed). No
    interval where that scale has no room: half the ratios 0, or an end pushed past a float's range."""
    def central(at: float) -> tuple[float, float]:
        tail = (1 - at) / 2 * 100
        return percentile(ratios, tail), percentile(ratios, 100 - tail)
    if _resolved(level):
        return Spread(value, *central(level), n)
    low, high = central(RESOLVED_LEVEL)
    middle = percentile(ratios, 50)
    if middle <= 0:
        return Spread(value, None, None, n)
    def z(at: float) -> float:
        return statistics.NormalDist().inv_cdf(1 - (1 - at) / 2)
    stretch = z(level) / z(RESOLVED_LEVEL)
    centre = math.log(middle)
    top = centre + (math.log(high) - centre) * stretch
    if top > LOG_FLOAT_MAX:
        return Spread(value, None, None, n)
    # A low end of 0 stays 0: on the log scale it is already as far out as an end can be.
    bottom = math.exp(centre - (centre - math.log(low)) * stretch) if low > 0 else 0.0
    return Spread(value, bottom, math.exp(top), n)


def percentile(sorted_samples: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), q in [0, 100]."""
    if len(sorted_samples) == 1:
        return sorted_samples[0]
    pos = (len(sorted_samples) - 1) * q / 100.0
    low = math.floor(pos)
    high = min(low + 1, len(sorted_samples) - 1)
    return sorted_samples[low] + (sorted_samples[high] - sorted_samples[low]) * (pos - low)


def summarize(samples: list[float]) -> dict:
    """median, mean, stdev, cv, p5, p95, min, max and n; stdev and cv are 0 for one sample."""
    if not samples:
        raise ValueError("no samples to summarize")
    ordered = sorted(samples)
    mean = statistics.fmean(ordered)
    stdev = statistics.stdev(ordered) if len(ordered) > 1 else 0.0
    return {
        "n": len(ordered),
        "median": statistics.median(ordered),
        "mean": mean,
        "stdev": stdev,
        "cv": stdev / mean if mean else 0.0,
        "p5": percentile(ordered, 5),
        "p95": percentile(ordered, 95),
        "min": ordered[0],
        "max": ordered[-1],
    }


def metric(samples: list[float]) -> dict:
    """The bundle's form of one metric: the raw samples and their summary."""
    return {"samples": list(samples), "summary": summarize(samples)}


def cv(samples: list) -> float:
    """Coefficient of variation (sample standard deviation over the mean); 0 for one sample."""
    mean = statistics.fmean(samples)
    return statistics.stdev(samples) / mean if len(samples) > 1 and mean else 0.0


@dataclass(frozen=True)
class Spread:
    """A median with its spread: p5-p95 of samples, or the confidence interval of a ratio."""

    median: float
    low: "float | None"  # None when the samples cannot give an interval (a ratio over a non-positive sample)
    high: "float | None"
    n: int

    @classmethod
    def of(cls, samples: list) -> "Spread":
        ordered = sorted(float(x) for x in samples)
        return cls(statistics.median(ordered), percentile(ordered, 5), percentile(ordered, 95), len(ordered))

    def scaled(self, factor: float) -> "Spread":
        if self.low is None:
            return Spread(self.median * factor, None, None, self.n)
        return Spread(self.median * factor, self.low * factor, self.high * factor, self.n)

    @property
    def width(self) -> "float | None":
        """The interval's width relative to its median (0.1: the interval spans 10% of the value)."""
        return None if self.low is None or not self.median else (self.high - self.low) / abs(self.median)


def _resampled_medians(rng: random.Random, samples: list[float]) -> list[float]:
    """RESAMPLES medians, each of len(samples) draws with replacement. Up to DRAWN_RESAMPLE_MAX
    samples each resample is drawn; above, where drawing costs time in proportion to the samples
    (a report pooling hundreds of bundles), each median comes from its order statistics instead."""
    if len(samples) <= DRAWN_RESAMPLE_MAX:
        return [statistics.median(rng.choices(samples, k=len(samples))) for _ in range(RESAMPLES)]
    ordered = sorted(samples)
    return [_resampled_median_of_many(rng, ordered) for _ in range(RESAMPLES)]


def _resampled_median_of_many(rng: random.Random, ordered: list[float]) -> float:
    """The median of one resample of `ordered` (sorted), without drawing it: a draw takes
    ordered[floor(u * n)] for a uniform u, so the resample's k-th smallest value is
    ordered[floor(u_k * n)] where u_k, the k-th smallest of n uniforms, is Beta(k, n - k + 1);
    the next one up is the smallest of the n - k uniforms above it: u_k + (1 - u_k) * Beta(1, n - k)."""
    n = len(ordered)
    k = (n + 1) // 2
    u = rng.betavariate(k, n - k + 1)
    low = ordered[min(int(u * n), n - 1)]
    if n % 2:
        return low
    above = u + (1 - u) * rng.betavariate(1, n - k)
    return (low + ordered[min(int(above * n), n - 1)]) / 2


def ratio_of_medians(numerator: list, denominator: list, level: float = LEVEL) -> "Spread | None":
    """median(numerator) / median(denominator) and its bootstrap interval; n is the smaller side's count."""
    return ratio_of_pooled_medians([numerator], [denominator], level)


def ratio_of_pooled_medians(numerator: "list[list]", denominator: "list[list]", level: float = LEVEL) -> "Spread | None":
    """As ratio_of_medians, each side given as the samples of each launch that measured it: the
    medians are of the pooled samples, the interval resamples launches, then samples within each.

    None where the ratio is no number: a side without samples, a denominator whose median is not
    positive, a quotient past a float's range. No interval (low and high None) where a resample's
    ratio could be none: a denominator sample not positive, a resampled quotient past that range."""
    top, bottom = ([[float(x) for x in launch] for launch in side if launch] for side in (numerator, denominator))
    pooled_top, pooled_bottom = [x for launch in top for x in launch], [x for launch in bottom for x in launch]
    if not pooled_top or not pooled_bottom or statistics.median(pooled_bottom) <= 0:
        return None
    value = statistics.median(pooled_top) / statistics.median(pooled_bottom)
    if not math.isfinite(value):
        return None
    n = min(len(pooled_top), len(pooled_bottom))
    if min(pooled_bottom) <= 0:
        return Spread(value, None, None, n)
    rng = random.Random(SEED)
    ratios = sorted(t / b for t, b in zip(_resampled_pooled_medians(rng, top), _resampled_pooled_medians(rng, bottom)))
    if not math.isfinite(ratios[-1]):
        return Spread(value, None, None, n)
    return _interval(value, ratios, level, n)


def _resampled_pooled_medians(rng: random.Random, launches: "list[list[float]]") -> list[float]:
    """RESAMPLES medians of a two-stage resample: as many launches drawn with replacement, then
    each drawn launch's samples drawn with replacement (one launch: _resampled_medians)."""
    if len(launches) == 1:
        return _resampled_medians(rng, launches[0])
    return [statistics.median([x for launch in rng.choices(launches, k=len(launches)) for x in rng.choices(launch, k=len(launch))])
            for _ in range(RESAMPLES)]
