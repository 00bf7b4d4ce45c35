from __future__ import annotations

import random
import statistics

import pytest

from bench.common import stats
from bench.common.stats import family_level, ratio_of_medians, ratio_of_pooled_medians, summarize


def test_summary_of_known_samples():
    s = summarize([4.0, 1.0, 3.0, 2.0, 10.0])
    assert (s["n"], s["median"], s["min"], s["max"], s["mean"]) == (5, 3.0, 1.0, 10.0, 4.0)
    assert s["p5"] == pytest.approx(1.2) and s["p95"] == pytest.approx(8.8)  # numpy's linear interpolation
    assert s["stdev"] == pytest.approx(3.5355339) and s["cv"] == pytest.approx(3.5355339 / 4)


def test_one_sample_has_no_spread():
    assert summarize([2.5]) == {"n": 1, "median": 2.5, "mean": 2.5, "stdev": 0.0, "cv": 0.0, "p5": 2.5, "p95": 2.5, "min": 2.5, "max": 2.5}


def test_ratio_interval_is_the_same_every_time_and_holds_the_ratio():
    slower = [1.2 + 0.01 * (i % 5) for i in range(12)]
    baseline = [1.0 + 0.01 * (i % 4) for i in range(10)]
    ratio = ratio_of_medians(slower, baseline)
    assert ratio == ratio_of_medians(slower, baseline)  # seeded: a report or verdict never changes on rerun
    assert ratio.n == 10 and ratio.low < ratio.median < ratio.high
    assert ratio.median == pytest.approx(1.215 / 1.01)
    assert ratio_of_medians(baseline, baseline).low <= 1.0 <= ratio_of_medians(baseline, baseline).high


def test_ratio_over_a_non_positive_sample_has_no_interval():
    ratio = ratio_of_medians([1.0, 2.0], [1.0, 0.0, 3.0])
    assert (ratio.median, ratio.low, ratio.high) == (1.5, None, None)


@pytest.mark.parametrize("n", [51, 200, 201])
def test_many_samples_get_the_interval_a_drawn_bootstrap_gives(n):
    """Past DRAWN_RESAMPLE_MAX each resample's median comes from its order statistics: the same
    distribution as drawing the resample, so the same interval up to resampling noise."""
    rng = random.Random(n)
    top, bottom = [rng.lognormvariate(0.1, 0.2) for _ in range(n)], [rng.lognormvariate(0, 0.2) for _ in range(n)]
    assert n > stats.DRAWN_RESAMPLE_MAX
    drawn_rng = random.Random(1)
    drawn = sorted(statistics.median(drawn_rng.choices(top, k=n)) / statistics.median(drawn_rng.choices(bottom, k=n))
                   for _ in range(5000))
    ratio = ratio_of_medians(top, bottom)
    width = ratio.high - ratio.low
    assert ratio.low == pytest.approx(stats.percentile(drawn, 2.5), abs=0.1 * width)
    assert ratio.high == pytest.approx(stats.percentile(drawn, 97.5), abs=0.1 * width)


def test_the_spread_between_launches_widens_the_interval_that_samples_alone_would_give():
    """Two launches a side, each tight (+-0.5%) but 8% apart: pooled as if one launch, the interval
    is that of a bimodal sample; resampled as launches, it reaches the ratios the launches can give."""
    def launch(level: float) -> list:
        return [level * (1 + 0.001 * (i - 5)) for i in range(11)]
    original, new = [launch(1.0), launch(1.08)], [launch(1.08), launch(1.08)]
    by_launch = ratio_of_pooled_medians(new, original)
    assert by_launch == ratio_of_pooled_medians(new, original)  # seeded
    assert by_launch.n == 22 and by_launch.median == pytest.approx(statistics.median(new[0] + new[1]) / statistics.median(original[0] + original[1]))
    assert by_launch.low == pytest.approx(1.0, abs=0.006) and by_launch.high == pytest.approx(1.08, abs=0.006)
    # Against one launch of the original only, the same new samples are plainly 8% apart.
    alone = ratio_of_pooled_medians(new, [original[0]])
    assert alone.low > 1.07 and alone.high < 1.09


def test_intervals_judged_together_are_each_wider_so_that_all_hold_at_95_percent():
    rng = random.Random(3)
    top, bottom = [rng.lognormvariate(0.05, 0.1) for _ in range(30)], [rng.lognormvariate(0, 0.1) for _ in range(30)]
    one, of_twenty = ratio_of_medians(top, bottom), ratio_of_medians(top, bottom, family_level(20))
    assert family_level(1) == stats.LEVEL and family_level(20) == pytest.approx(0.9975)
    assert of_twenty.median == one.median and of_twenty.low < one.low and of_twenty.high > one.high
    # Past 99% the resamples cannot resolve the tails: the interval is never narrower than their 99% one.
    resolved = ratio_of_medians(top, bottom, 0.99)
    assert of_twenty.low <= resolved.low and of_twenty.high >= resolved.high


def test_one_wild_sample_does_not_stretch_a_family_interval_past_what_its_resamples_show():
    """A 1 MiB all-reduce rerun on 2x H200 with one sample at 23 GB/s among nine at 63-65 (its
    original ten at 61-63), judged as one of 8 runs: the resamples' own 99.4% interval is about
    [1.009, 1.037], well inside a 5% band. One outlier drawn into half of a few resamples must not
    widen it to a 5%-band straddle, as a normal interval from their standard deviation did."""
    original = [61.4, 62.4, 62.7, 62.8, 62.6, 63.0, 62.7, 62.6, 62.4, 62.4]
    rerun = [23.4, 63.2, 64.3, 64.7, 64.6, 64.7, 64.2, 64.6, 64.2, 65.0]
    level = family_level(8)
    judged = ratio_of_medians(rerun, original, level)
    assert 0.95 < judged.low and judged.high < 1.05
    rng = random.Random(1)
    drawn = sorted(statistics.median(rng.choices(rerun, k=10)) / statistics.median(rng.choices(original, k=10))
                   for _ in range(50_000))
    tail = (1 - level) / 2 * 100
    assert judged.low == pytest.approx(stats.percentile(drawn, tail), abs=0.005)
    assert judged.high == pytest.approx(stats.percentile(drawn, 100 - tail), abs=0.005)


# --- Samples a schema-valid bundle may hold: 0, and anything up to 1e15 ---------------------------

@pytest.mark.parametrize("numerator,denominator", [([1.0, 2.0], [0.0, 0.0, 1.0]), ([1.0], []), ([], [1.0]), ([1e15] * 3, [5e-324] * 3)],
                         ids=["zero_median_below", "no_denominator", "no_numerator", "quotient_past_float"])
def test_a_ratio_that_is_no_number_is_none(numerator, denominator):
    assert ratio_of_medians(numerator, denominator) is None
    assert ratio_of_pooled_medians([numerator, numerator], [denominator], family_level(50)) is None


@pytest.mark.parametrize("level", [stats.LEVEL, family_level(20), family_level(100_000)])
def test_zeros_above_give_an_interval_down_to_zero_or_none_never_an_error(level):
    mostly_zero, half_zero = [0.0] * 9 + [1.0], [0.0, 1.0] * 5
    positive = [1.0 + 0.01 * i for i in range(10)]
    for top in (mostly_zero, half_zero, [0.0] * 10):
        ratio = ratio_of_medians(top, positive, level)
        assert ratio.median == pytest.approx(statistics.median(top) / statistics.median(positive))
        assert ratio.low is None or 0 <= ratio.low <= ratio.median <= ratio.high


def test_resampled_quotients_past_a_float_give_no_interval():
    """1e15 over 1e-300 overflows in some resamples only: the ratio stands, its interval does not."""
    ratio = ratio_of_medians([1.0] * 5 + [1e15], [1.0] * 5 + [1e-300])
    assert ratio is not None and ratio.median == 1.0 and (ratio.low, ratio.high) == (None, None)


def test_an_interval_pushed_past_a_float_is_none():
    """Resampled ratios from 1e-200 to 1e200, each finite; their 99% interval pushed out twice as
    far on the log scale (one of 100,000 runs) would end past 1e308."""
    top, bottom = [1.0] * 6 + [1e15] * 6, [1.0] * 6 + [1e-185] * 6
    assert ratio_of_medians(top, bottom).high > 1e100
    ratio = ratio_of_medians(top, bottom, family_level(100_000))
    assert ratio is not None and (ratio.low, ratio.high) == (None, None)


def test_a_spread_without_interval_scales_without_one():
    assert stats.Spread(2.0, None, None, 3).scaled(100) == stats.Spread(200.0, None, None, 3)
