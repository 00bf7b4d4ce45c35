"""Honest reruns drawn from a noise model and judged by the real compare: an identical configuration is
never called slower or faster past the stated level, whether each side was measured by one launch
(the launch-to-launch floor right) or by two or three; and a real 10% slowdown is found.

The model: each launch moves a configuration's median by a launch effect of 5% (as far apart as a
GPU configuration's launches were seen on one node, and as wide as the band) and three times the
spread of its samples about it, lognormal or with heavier tails (Student's t of 3 degrees of
freedom); the launch-to-launch floor says 5% (the floor right).
The bundles are a published 2x H100 bundle of quick (six all-reduce sizes, the DDP step on 1 and 2
GPUs) with every run's headline samples drawn anew; compare_bundles judges all eight together at 95%
(Bonferroni), as verify does. Pure Python on synthetic samples: no run, no torch.
"""

from __future__ import annotations

import json
import math
import random

import pytest

from bench import suites
from bench.common import launch_floor
from bench.common.run import Run
from bench.common.stats import summarize
from bench.verify.compare import compare_bundles, outcome, parse_tolerances
from tests.conftest import REPO

TEMPLATE = json.loads((REPO / "benchmarks" / "results" / "bundles" / "20261125T213922Z-6e20a7.bundle.json").read_text())
DRAWS = 200
STATED_LEVEL = 0.05  # a comparison's intervals hold together at 95%: at most this share of honest reruns may fail
SAMPLES = 10  # quick's repetitions a size on a GPU; its DDP steps are 20
LAUNCH_SPREAD = 0.05  # as far apart as a GPU configuration's launches were seen on one node: as wide as the band
POWER_SPREAD = 0.025  # where ten launches a side can tell a 10% change from a 5% band
WITHIN = 1 / 3  # the samples' spread about a launch's median, of the launch effect's
POWER = 0.8


def _noise(rng: random.Random, spread: float, tails: bool) -> float:
    """A draw of standard deviation `spread`, normal or Student's t of 3 degrees of freedom."""
    if not tails:
        return rng.gauss(0.0, spread)
    return spread * rng.gauss(0.0, 1.0) / math.sqrt(rng.gammavariate(1.5, 2.0) / 3) / math.sqrt(3)


def drawn(rng: random.Random, launches: int, tails: bool, spread: float, slower: float = 1.0) -> dict:
    """The template bundle with each configuration measured by `launches` launches drawn from the model,
    the launch effect of standard deviation `spread`; `slower`: every time that many times longer
    (every bandwidth that many times lower)."""
    host = TEMPLATE["hosts"][0]
    runs = []
    for record in host["runs"]:
        run = Run(record)
        metric = suites.get(run.suite).headline_metric
        level = run.median(metric) * (slower if metric.endswith("_s") else 1 / slower)
        for repeat in range(1, launches + 1):
            offset = _noise(rng, spread, tails)
            samples = [level * math.exp(offset + _noise(rng, spread * WITHIN, tails)) for _ in range(SAMPLES)]
            runs.append({**record, "metrics": {**record["metrics"], metric: {"samples": samples, "summary": summarize(samples)}},
                         "repeat": repeat, "launch_id": record["launch_id"] + (f"-r{repeat}" if repeat > 1 else "")})
    return {**TEMPLATE, "hosts": [{**host, "runs": runs}]}


def floor_right(monkeypatch, spread: float) -> None:
    """Every kind's launch-to-launch floor is the model's launch spread, measured over 8 launches' worth."""
    monkeypatch.setattr(launch_floor, "table", lambda: {"floors": [
        {"match": {"device": "gpu", "metric": metric}, "spread_fraction": spread, "df": 8, "source": {"says": "the model's"}}
        for metric in ("busbw_gbps", "step_time_s")]})


def judged(original: dict, new: dict) -> list:
    return compare_bundles(original, new, parse_tolerances([]), [("local", "local")])


@pytest.mark.parametrize("launches,tails", [(1, False), (2, False), (3, False), (1, True), (3, True)],
                         ids=["one-launch", "two-launches", "three-launches", "one-launch-heavy-tails", "three-launches-heavy-tails"])
def test_an_honest_rerun_is_called_slower_or_faster_no_more_often_than_the_stated_level(monkeypatch, launches, tails):
    floor_right(monkeypatch, LAUNCH_SPREAD)
    rng = random.Random(launches * 10 + tails)
    outcomes = [outcome(judged(drawn(rng, launches, tails, LAUNCH_SPREAD), drawn(rng, launches, tails, LAUNCH_SPREAD)))
                for _ in range(DRAWS)]
    assert outcomes.count("failed") <= STATED_LEVEL * DRAWS, outcomes.count("failed")
    assert set(outcomes) <= {"passed", "inconclusive", "failed"}


def test_one_launch_a_side_without_the_floor_would_accuse_honest_reruns(monkeypatch):
    """The check above can fail: judged as if one launch's samples showed everything (floors of 0: the
    interval of the spread within launches alone), the same honest reruns fail far past the level."""
    monkeypatch.setattr(launch_floor, "table", lambda: {"floors": [
        {"match": {"device": "gpu", "metric": metric}, "spread_fraction": 1e-9, "df": 8, "source": {"says": "none"}}
        for metric in ("busbw_gbps", "step_time_s")]})
    rng = random.Random(5)
    failed = sum(outcome(judged(drawn(rng, 1, False, LAUNCH_SPREAD), drawn(rng, 1, False, LAUNCH_SPREAD))) == "failed"
                 for _ in range(40))
    assert failed > 0.5 * 40, failed


def test_a_real_ten_percent_slowdown_is_found_with_enough_launches(monkeypatch):
    """Every configuration 10% slower, launches 2.5% apart (the samples about each 0.8%), ten launches a
    side: judged slower in at least 80% of the runs, never faster, never reproduced."""
    floor_right(monkeypatch, POWER_SPREAD)
    rng = random.Random(11)
    verdicts = [v.verdict for _ in range(DRAWS // 8)
                for v in judged(drawn(rng, 10, False, POWER_SPREAD), drawn(rng, 10, False, POWER_SPREAD, slower=1.10))]
    assert verdicts.count("slower") >= POWER * len(verdicts), verdicts
    assert "faster" not in verdicts and "reproduced" not in verdicts
