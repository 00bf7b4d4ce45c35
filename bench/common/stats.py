"""Every statistic of ddpbench: the summary the agent writes for each metric, a figure's spread in
the report, how precisely one launch has measured a median (what sampling stops on), and the ratio
of two figures with its confidence interval (one model, one level, for the report's scaling
efficiency and verify's verdicts alike).

The ratio's model: random effects on the log scale, launches first, then samples within them. A
side of a ratio is the samples of each launch that measured it. Launch i's median m_i is y_i =
log m_i on the log scale, known to within w_i = (pi/2) (1.4826 MAD_i / m_i)^2 / n_i: a median's
large-sample variance, its scale taken from the samples' median absolute deviation so that a few
wild samples do not widen it. A fresh set of processes moves the median by more than that (memory
placement, NCCL's channels, the cores a rank lands on): y_i = mu + b_i + e_i, the launch effects
b_i of variance sigma_b^2. The launches' own spread s^2 (k - 1 degrees of freedom) shows
sigma_b^2 + mean(w); the launch-to-launch floor f measured for this kind of run (`Floor`:
bench/common/launch_floor.json, from this project's multi-launch bundles) is its prior, worth nu0
launches (at most PRIOR_DF_MAX):

    sigma_b^2 = (nu0 f^2 + (k - 1) max(0, s^2 - mean(w))) / (nu0 + k - 1)

so one launch takes the floor, and many launches take their own spread. The side's estimate is
the mean of the y_i (the geometric mean of the launch medians), of variance
(sigma_b^2 + mean(w)) / k with nu0 + k - 1 degrees of freedom. A ratio's log is the difference of
its two sides' estimates, its variance their sum, and its interval Student's t at the
Welch-Satterthwaite degrees of freedom of the two.

A verdict over many runs at once (verify, compare) takes each run's interval at family_level,
so that all of them hold together at LEVEL (Bonferroni): one run in twenty outside a 95%
interval is what such an interval promises, and a bundle of twenty runs would otherwise fail an
honest rerun about every other time.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

LEVEL = 0.95
LEVEL_LABEL = f"{LEVEL:.0%} CI"
# A floor measured on other machines speaks for this one as this many launches would, at most:
# enough that one launch a side can be judged, few enough that a machine's own launches soon outweigh it.
PRIOR_DF_MAX = 8
MAD_TO_SIGMA = 1.4826  # a normal's standard deviation over its median absolute deviation
MEDIAN_VARIANCE_FACTOR = math.pi / 2  # a median's variance over the mean's, for normal samples
LOG_FLOAT_MAX = math.log(1e300)  # a ratio or an interval's end past e^this is no number to print
METHOD = (f"{LEVEL:.0%} interval from a random-effects model on the log scale: each launch's median, its "
          "spread within the launch from the samples, the spread between launches from the launches or, where a "
          "side has one launch, from the launch-to-launch floor measured for that kind of run; Student's t")


def family_level(count: int) -> float:
    """The level each of `count` intervals needs for all of them to hold together at LEVEL."""
    return 1 - (1 - LEVEL) / max(count, 1)


def percent(level: float) -> str:
    """95%, 99.4%: a level as the interval's name says it."""
    return f"{level * 100:.3g}%"


def family_method(level: float, count: int) -> str:
    """METHOD for `count` intervals taken together at LEVEL."""
    return (f"{percent(level)} interval for each of the {count} compared runs, so that all of them hold together at "
            f"{percent(LEVEL)} (Bonferroni), from a random-effects model on the log scale: each launch's median, its "
            "spread within the launch from the samples, the spread between launches from the launches or, where a side "
            "has one launch, from the launch-to-launch floor measured for that kind of run; Student's t")


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


# --- one launch's median --------------------------------------------------------------------------

def median_variance(samples: list) -> float:
    """The variance of the log of the samples' median: (pi/2) (1.4826 MAD / median)^2 / n; 0 for one
    sample, or where more than half the samples are equal (the median is then exact)."""
    middle = statistics.median(samples)
    if len(samples) < 2 or middle <= 0:
        return 0.0
    mad = statistics.median(abs(x - middle) for x in samples)
    return MEDIAN_VARIANCE_FACTOR * (MAD_TO_SIGMA * mad / middle) ** 2 / len(samples)


def median_halfwidth(samples: list, level: float = LEVEL) -> float:
    """Half the width of the `level` interval of the samples' median, as a fraction of it (0.02: +-2%):
    what sampling until the figure is clear stops on."""
    return _normal_quantile(level) * math.sqrt(median_variance(samples))


# --- a ratio of two sides, each measured by one or more launches ------------------------------------

@dataclass(frozen=True)
class Floor:
    """The spread between launches a side is taken to have where its own launches cannot show it:
    the standard deviation of a launch's log median about the configuration's (0.02: 2%), the
    launches' degrees of freedom it was measured with, and where it comes from."""

    fraction: float
    df: float
    source: str  # in words: what was measured, on which machine, when; or why a default stands
    measured: bool = True  # False: no measurement of this kind of run, a conservative default

    @property
    def prior_df(self) -> float:
        return min(max(self.df, 1.0), PRIOR_DF_MAX)


@dataclass(frozen=True)
class Launches:
    """One side of a ratio: the samples of each launch that measured it, and its kind of run's floor."""

    samples: tuple  # one tuple of samples a launch
    floor: Floor

    @classmethod
    def of(cls, launches: "list[list]", floor: Floor) -> "Launches":
        return cls(tuple(tuple(float(x) for x in launch) for launch in launches if launch), floor)

    @property
    def pooled(self) -> list:
        return [x for launch in self.samples for x in launch]

    def fit(self) -> "Side | None":
        """The side's estimate under the model; None without samples or with a launch median not positive."""
        medians = [statistics.median(launch) for launch in self.samples]
        if not medians or min(medians) <= 0:
            return None
        logs = [math.log(m) for m in medians]
        k = len(logs)
        within = statistics.fmean(median_variance(launch) for launch in self.samples)
        prior = self.floor.prior_df
        measured = None
        if k > 1:
            measured = max(0.0, statistics.variance(logs) - within)
            between = (prior * self.floor.fraction ** 2 + (k - 1) * measured) / (prior + k - 1)
        else:
            between = self.floor.fraction ** 2
        return Side(statistics.fmean(logs), k, len(self.pooled), math.sqrt(between),
                    None if measured is None else math.sqrt(measured), math.sqrt(within), self.floor, prior + k - 1)


@dataclass(frozen=True)
class Side:
    """A side's estimate: the log of its centre (the geometric mean of its launch medians), the spread
    between launches it takes (sigma_b) and the one its own launches showed beyond their samples, the
    spread of one launch's median within the launch, and the degrees of freedom of its variance."""

    log_centre: float
    launches: int
    samples: int
    between: float  # sigma_b taken: the floor and the launches' own, weighed
    measured_between: "float | None"  # the launches' own, beyond their samples' (None: one launch)
    within: float  # one launch median's own standard deviation (log scale)
    floor: Floor
    df: float

    @property
    def centre(self) -> float:
        return math.exp(self.log_centre)

    def variance(self, launches: "int | None" = None) -> float:
        """The variance of the side's log estimate; with `launches` launches instead of its own, as spread."""
        return (self.between ** 2 + self.within ** 2) / (launches or self.launches)


@dataclass(frozen=True)
class Ratio(Spread):
    """numerator / denominator with its interval, and the two sides' fits it was made of."""

    numerator: "Side | None" = None
    denominator: "Side | None" = None
    df: "float | None" = None
    level: float = LEVEL


def combined_df(parts: "list[tuple[float, float]]") -> float:
    """Welch-Satterthwaite: the degrees of freedom of a sum of variances, each given as (variance, df)."""
    total = sum(v for v, _ in parts)
    spread = sum(v * v / df for v, df in parts if v > 0)
    return total * total / spread if spread > 0 else min(df for _, df in parts)


def ratio_interval(numerator: Launches, denominator: Launches, level: float = LEVEL) -> "Ratio | None":
    """numerator / denominator, each side's centre the geometric mean of its launch medians, with
    its `level` interval under the model (module docstring). n is the smaller side's sample count.

    None where the ratio is no number: a side without samples, a denominator whose centre is not
    positive, a quotient past a float's range. No interval (low and high None) where the numerator's
    centre is 0 (no log), or an end of the interval falls past a float's range."""
    top, bottom = numerator.fit(), denominator.fit()
    if bottom is None or not numerator.samples:
        return None
    n = min(len(numerator.pooled), len(denominator.pooled))
    if top is None:
        value = statistics.median(numerator.pooled) / bottom.centre
        return Ratio(value, None, None, n, None, bottom, None, level) if math.isfinite(value) and value >= 0 else None
    log_value = top.log_centre - bottom.log_centre
    if abs(log_value) >= LOG_FLOAT_MAX:
        return None
    df = combined_df([(top.variance(), top.df), (bottom.variance(), bottom.df)])
    reach = t_quantile(1 - (1 - level) / 2, df) * math.sqrt(top.variance() + bottom.variance())
    if abs(log_value) + reach >= LOG_FLOAT_MAX:
        return Ratio(math.exp(log_value), None, None, n, top, bottom, df, level)
    return Ratio(math.exp(log_value), math.exp(log_value - reach), math.exp(log_value + reach), n, top, bottom, df, level)



# --- quantiles ----------------------------------------------------------------------------------

def _normal_quantile(level: float) -> float:
    """The two-sided `level` quantile of the normal: 1.96 at 95%."""
    return statistics.NormalDist().inv_cdf(1 - (1 - level) / 2)


def t_quantile(p: float, df: float) -> float:
    """Student's t quantile at probability p (above 0.5), df degrees of freedom (any positive real):
    Newton's steps on its distribution function from the normal quantile, kept inside a bracket
    that bisection narrows wherever a step would leave it."""
    z = statistics.NormalDist().inv_cdf(p)
    if df > 1e6:
        return z
    low, high = z, max(2 * z, 1.0)
    while _t_cdf(high, df) < p:
        low, high = high, high * 4
    t = z + (z ** 3 + z) / (4 * df)  # Cornish-Fisher's first term
    t = t if low < t < high else (low + high) / 2
    density = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)
    for _ in range(100):
        error = _t_cdf(t, df) - p
        if error < 0:
            low = t
        else:
            high = t
        step = t - error / (density * (1 + t * t / df) ** (-(df + 1) / 2))
        t = step if low < step < high else (low + high) / 2
        if abs(error) < 1e-13 or high - low <= 1e-12 * high:
            break
    return t


def _t_cdf(t: float, df: float) -> float:
    """P(T <= t) for t >= 0: 1 - I_x(df/2, 1/2) / 2, x = df / (df + t^2)."""
    return 1 - 0.5 * _incomplete_beta(df / 2, 0.5, df / (df + t * t))


def _incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b), by its continued fraction (Lentz)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x > (a + 1) / (a + b + 2):  # the fraction converges fast on this side only
        return 1 - _incomplete_beta(b, a, 1 - x)
    tiny = 1e-300
    c, d = 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 500):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= c * d
        if abs(c * d - 1) < 1e-15:
            break
    return front * result / a
