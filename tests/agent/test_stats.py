from __future__ import annotations

import pytest

from bench.agent.stats import summarize


def test_summary_of_known_samples():
    s = summarize([4.0, 1.0, 3.0, 2.0, 10.0])
    assert (s["n"], s["median"], s["min"], s["max"], s["mean"]) == (5, 3.0, 1.0, 10.0, 4.0)
    assert s["p5"] == pytest.approx(1.2) and s["p95"] == pytest.approx(8.8)  # numpy's linear interpolation
    assert s["stdev"] == pytest.approx(3.5355339) and s["cv"] == pytest.approx(3.5355339 / 4)


def test_one_sample_has_no_spread():
    assert summarize([2.5]) == {"n": 1, "median": 2.5, "mean": 2.5, "stdev": 0.0, "cv": 0.0, "p5": 2.5, "p95": 2.5, "min": 2.5, "max": 2.5}
