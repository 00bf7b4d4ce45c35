from __future__ import annotations

import random
import statistics

import pytest

from bench.common import stats
from bench.common.stats import ratio_of_medians, summarize


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
