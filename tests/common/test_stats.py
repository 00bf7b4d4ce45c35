from __future__ import annotations

import math
import random
import statistics

import pytest

from bench.common import stats
from bench.common.stats import Floor, Launches, family_level, median_halfwidth, ratio_interval, summarize, t_quantile

FLOOR = Floor(0.02, 8, "a 2% floor measured over 8 launches' worth")


def side(*launches, floor: Floor = FLOOR) -> Launches:
    return Launches.of([list(launch) for launch in launches], floor)


def tight(level: float, n: int = 11) -> list:
    """n samples within +-0.5% of level."""
    return [level * (1 + 0.001 * (i - n // 2)) for i in range(n)]


def test_summary_of_known_samples():
    s = summarize([4.0, 1.0, 3.0, 2.0, 10.0])
    assert (s["n"], s["median"], s["min"], s["max"], s["mean"]) == (5, 3.0, 1.0, 10.0, 4.0)
    assert s["p5"] == pytest.approx(1.2) and s["p95"] == pytest.approx(8.8)  # numpy's linear interpolation
    assert s["stdev"] == pytest.approx(3.5355339) and s["cv"] == pytest.approx(3.5355339 / 4)


def test_one_sample_has_no_spread():
    assert summarize([2.5]) == {"n": 1, "median": 2.5, "mean": 2.5, "stdev": 0.0, "cv": 0.0, "p5": 2.5, "p95": 2.5, "min": 2.5, "max": 2.5}


@pytest.mark.parametrize("p,df,expected", [(0.975, 1, 12.706), (0.975, 4, 2.776), (0.975, 10, 2.228), (0.995, 2, 9.925),
                                           (0.9999, 3, 22.204), (0.975, 1000, 1.962)])
def test_student_t_quantiles_are_the_tables(p, df, expected):
    assert t_quantile(p, df) == pytest.approx(expected, abs=1e-3)


def test_a_medians_halfwidth_is_what_normal_samples_give():
    """The 95% half-width of the median of n normal samples of CV c is 1.96 sqrt(pi/2) c / sqrt(n)."""
    rng = random.Random(7)
    samples = [rng.gauss(100.0, 2.0) for _ in range(4000)]
    assert median_halfwidth(samples) == pytest.approx(1.96 * math.sqrt(math.pi / 2) * 0.02 / math.sqrt(4000), rel=0.05)
    assert median_halfwidth([3.0]) == 0.0 and median_halfwidth([2.0, 2.0, 2.0, 9.0]) == 0.0  # the median is exact


def test_one_launch_a_side_takes_the_floor_however_tight_its_samples():
    """Two launches 1% apart, each tight: samples alone would call them different; the floor says a fresh
    launch moves by 2%, and the interval says so."""
    ratio = ratio_interval(side(tight(1.01)), side(tight(1.0)))
    assert ratio.median == pytest.approx(1.01)
    reach = t_quantile(0.975, ratio.df) * math.sqrt(2 * 0.02 ** 2 + ratio.numerator.within ** 2 + ratio.denominator.within ** 2)
    assert math.log(ratio.high / ratio.median) == pytest.approx(reach)
    assert ratio.low < 1.0 < ratio.high and ratio.df == pytest.approx(16)  # two sides of 8 degrees of freedom each
    assert ratio.numerator.measured_between is None and ratio.numerator.between == 0.02
    assert ratio == ratio_interval(side(tight(1.01)), side(tight(1.0)))  # no randomness: a verdict never changes on rerun


def test_launches_of_their_own_outweigh_the_floor_as_they_grow():
    """Launches 8% apart, each tight: two a side keep much of the 2% floor's weight, twelve a side say
    what the launches say."""
    levels = [1.0, 1.08]
    few = ratio_interval(side(*(tight(x) for x in levels)), side(*(tight(x) for x in levels)))
    many = ratio_interval(side(*(tight(x) for x in levels * 6)), side(*(tight(x) for x in levels * 6)))
    spread = statistics.stdev([math.log(x) for x in levels * 6])
    assert few.numerator.measured_between == pytest.approx(statistics.stdev([math.log(x) for x in levels]), rel=0.01)
    assert 0.02 < few.numerator.between < few.numerator.measured_between
    assert many.numerator.between == pytest.approx(math.sqrt((8 * 0.02 ** 2 + 11 * spread ** 2) / 19), rel=0.01)
    assert few.median == pytest.approx(1.0) and few.low < 0.95 and few.high > 1.05
    assert many.low < 1.0 < many.high and many.width < few.width


def test_steady_launches_narrow_the_interval_below_one_launchs():
    one = ratio_interval(side(tight(1.0)), side(tight(1.0)))
    three = ratio_interval(side(tight(1.0), tight(1.0), tight(1.0)), side(tight(1.0), tight(1.0), tight(1.0)))
    assert three.width < one.width / 1.5
    assert three.numerator.measured_between == 0.0  # no spread beyond the samples': the floor alone widens it


def test_a_difference_beyond_the_launches_spread_is_found():
    """Three launches a side, each tight, the new ones 10% slower: the interval lies wholly above 1.05."""
    ratio = ratio_interval(side(tight(1.10), tight(1.11), tight(1.09)), side(tight(1.0), tight(1.01), tight(0.99)))
    assert 1.05 < ratio.low < ratio.median < ratio.high


def test_intervals_judged_together_are_each_wider_so_that_all_hold_at_95_percent():
    rng = random.Random(3)
    top, bottom = [rng.lognormvariate(0.05, 0.1) for _ in range(30)], [rng.lognormvariate(0, 0.1) for _ in range(30)]
    one, of_twenty = ratio_interval(side(top), side(bottom)), ratio_interval(side(top), side(bottom), family_level(20))
    assert family_level(1) == stats.LEVEL and family_level(20) == pytest.approx(0.9975)
    assert of_twenty.median == one.median and of_twenty.low < one.low and of_twenty.high > one.high


def test_one_wild_sample_does_not_widen_a_launchs_median():
    """A 1 MiB all-reduce rerun on 2x H200 with one sample at 23 GB/s among nine at 63-65: the median's
    spread comes from the MAD, which one wild sample does not move."""
    rerun = [23.4, 63.2, 64.3, 64.7, 64.6, 64.7, 64.2, 64.6, 64.2, 65.0]
    steady = [64.0, 63.2, 64.3, 64.7, 64.6, 64.7, 64.2, 64.6, 64.2, 65.0]
    assert median_halfwidth(rerun) == pytest.approx(median_halfwidth(steady), rel=0.25)
    assert median_halfwidth(rerun) < 0.01


# --- Samples a schema-valid bundle may hold: 0, and anything up to 1e15 ---------------------------

@pytest.mark.parametrize("numerator,denominator", [([1.0, 2.0], [0.0, 0.0, 1.0]), ([1.0], []), ([], [1.0]), ([1e15] * 3, [5e-324] * 3)],
                         ids=["zero_median_below", "no_denominator", "no_numerator", "quotient_past_float"])
def test_a_ratio_that_is_no_number_is_none(numerator, denominator):
    assert ratio_interval(side(numerator), side(denominator)) is None
    assert ratio_interval(side(numerator, numerator), side(denominator), family_level(50)) is None


@pytest.mark.parametrize("level", [stats.LEVEL, family_level(20), family_level(100_000)])
def test_a_zero_median_above_is_a_ratio_of_0_without_interval(level):
    positive = [1.0 + 0.01 * i for i in range(10)]
    ratio = ratio_interval(side([0.0] * 9 + [1.0]), side(positive), level)
    assert ratio.median == 0.0 and (ratio.low, ratio.high) == (None, None)
    mostly_positive = ratio_interval(side([0.0, 1.0, 1.0]), side(positive), level)
    assert 0 < mostly_positive.low <= mostly_positive.median <= mostly_positive.high


def test_an_interval_past_a_float_is_none():
    """A quotient of 1e250, its interval at one of 100,000 runs with a floor of 100%: its ends pass 1e300."""
    wide = Floor(1.0, 1, "as wide as a floor may be")
    ratio = ratio_interval(side([1e125] * 3, floor=wide), side([1e-125] * 3, floor=wide), family_level(100_000))
    assert ratio is not None and ratio.median == pytest.approx(1e250) and (ratio.low, ratio.high) == (None, None)


def test_a_spread_without_interval_scales_without_one():
    assert stats.Spread(2.0, None, None, 3).scaled(100) == stats.Spread(200.0, None, None, 3)
