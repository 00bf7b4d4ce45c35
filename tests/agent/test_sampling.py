"""Sampling (bench/agent/harness.py sample_until_steady): toward a CV target, ending by saying why it
ended where the target was not reached (here, at the most samples a bundle keeps of a metric); and
toward the plan's precision, until the median is clear or the run's budget is spent, recording which."""

from __future__ import annotations

import itertools
import random
import statistics
from types import SimpleNamespace

import pytest
import torch

from bench.agent import harness
from bench.agent.harness import MAX_SAMPLES, Context, sample_until_steady
from bench.common.sampling import HOST_PACED_SAMPLES, LEAST_SAMPLES, Target
from bench.common.stats import median_halfwidth
from bench.suites.params import SampledParams


def one_rank() -> Context:
    return Context(rank=0, local_rank=0, world_size=1, device=torch.device("cpu"), backend="gloo")


def test_sampling_that_reaches_the_bundles_sample_limit_keeps_them_and_says_so():
    ctx, noisy = one_rank(), itertools.cycle([1.0, 3.0])  # a CV of about 50%, never below the target
    samples = sample_until_steady(ctx, lambda n: [next(noisy) for _ in range(n)], 1500, SampledParams(1e-9, 86400.0))
    assert len(samples) == 9000  # six batches of 1500; a seventh would pass MAX_SAMPLES
    (note,) = ctx.notes
    assert note.startswith(f"sampling stopped at 9000 samples, the most a bundle keeps of a metric ({MAX_SAMPLES}), with CV ")
    assert note.endswith("above cv_target 0.0%: what was measured is kept")


def test_sampling_that_reaches_its_target_says_nothing():
    ctx = one_rank()
    samples = sample_until_steady(ctx, lambda n: [2.0] * n, 1500, SampledParams(0.01, 86400.0))
    assert len(samples) == 1500 and ctx.notes == []


# --- Sampling until the figure is clear (the plan's precision) -------------------------------------

def with_target(halfwidth: float, budget_s: float) -> Context:
    ctx = one_rank()
    ctx.target = Target(halfwidth, halfwidth / 2, budget_s)
    return ctx


def test_samples_that_are_already_clear_stop_at_their_minimum_and_say_the_target_was_met():
    ctx = with_target(0.02, 60.0)
    steady = itertools.cycle([1.00, 1.01, 0.99, 1.005, 0.995])
    samples = sample_until_steady(ctx, lambda n: [next(steady) for _ in range(n)], 10, SampledParams(None, 60.0))
    assert len(samples) == 10
    record = ctx.sampled.take()
    assert record["met"] and record["stopped_by"] == "target" and record["samples"] == 10
    assert 0 < record["halfwidth_fraction"] <= 0.02 and record["target_halfwidth_fraction"] == 0.02


def test_noisy_samples_sample_on_until_their_median_is_clear():
    """+-10% samples: ten give the median to about +-5%; the target +-2% needs about six times as many."""
    ctx, rng = with_target(0.02, 60.0), random.Random(1)
    samples = sample_until_steady(ctx, lambda n: [rng.uniform(0.9, 1.1) for _ in range(n)], 10, SampledParams(None, 60.0))
    record = ctx.sampled.take()
    assert record["met"] and 30 <= len(samples) <= 150 and len(samples) % 10 == 0
    assert median_halfwidth(samples) <= 0.02 < median_halfwidth(samples[:-10])


def test_a_run_whose_budget_is_spent_keeps_what_it_measured_and_says_what_stopped_it(monkeypatch):
    ctx, rng, clock = with_target(0.001, 0.05), random.Random(2), [0.0]
    monkeypatch.setattr(harness, "time", SimpleNamespace(monotonic=lambda: clock[0]))

    def slow(n: int) -> list:  # 20 ms a batch on the harness's clock, however busy the machine
        clock[0] += 0.02
        return [rng.uniform(0.5, 1.5) for _ in range(n)]

    samples = sample_until_steady(ctx, slow, 5, SampledParams(None, 60.0))
    record = ctx.sampled.take()
    # the minimum, then batches 0, 20 and 40 ms past it: the one that ends 60 ms past it spends the 50 ms budget
    assert not record["met"] and record["stopped_by"] == "budget share" and record["samples"] == len(samples) == 20
    assert record["budget_s"] == 0.05 and record["past_minimum_s"] == pytest.approx(0.06)
    # The entry's sampling_cap_s bounds a run too, below the plan's share.
    ctx = with_target(0.001, 60.0)
    sample_until_steady(ctx, slow, 5, SampledParams(None, 0.05))
    assert ctx.sampled.take()["budget_s"] == 0.05


def test_fewer_samples_than_a_mad_can_judge_are_never_clear():
    ctx = with_target(0.5, 60.0)
    samples = sample_until_steady(ctx, lambda n: [1.0] * n, 2, SampledParams(None, 60.0))
    assert len(samples) == LEAST_SAMPLES + 1  # 2, 4, then 6: the first count a MAD may judge


def test_without_a_target_a_run_takes_exactly_its_minimum_and_records_nothing():
    ctx, rng = one_rank(), random.Random(3)
    samples = sample_until_steady(ctx, lambda n: [rng.uniform(0.5, 1.5) for _ in range(n)], 7, SampledParams(None, 60.0))
    assert len(samples) == 7 and ctx.sampled.take() is None and ctx.notes == []


def test_a_host_paced_run_stops_where_its_median_is_within_half_its_own_spread():
    """Steps the host paces are compared with a launch-to-launch spread at least their own: past
    HOST_PACED_SAMPLES more samples narrow nothing, so the run stops there and says why. A GPU-bound
    run with the same spread samples on to the target."""
    asked = []

    def host_paced(paced: bool):
        def judge(samples: list) -> bool:
            asked.append(len(samples))
            return paced
        return judge

    ctx, rng = with_target(0.02, 60.0), random.Random(4)
    samples = sample_until_steady(ctx, lambda n: [rng.uniform(0.8, 1.2) for _ in range(n)], 4, SampledParams(None, 60.0),
                                  host_paced=host_paced(True))
    record = ctx.sampled.take()
    assert HOST_PACED_SAMPLES == 7 and len(samples) == 8 and asked == [8]  # 4, then 8: the first count past 7
    assert not record["met"] and record["stopped_by"] == "host-paced" and record["halfwidth_fraction"] > 0.02
    middle = statistics.median(samples)  # within half their own spread, as a comparison takes it (1.4826 MAD)
    assert median_halfwidth(samples) <= 1.96 * 1.4826 * statistics.median(abs(x - middle) for x in samples) / middle / 2
    ctx = with_target(0.02, 60.0)
    samples = sample_until_steady(ctx, lambda n: [rng.uniform(0.8, 1.2) for _ in range(n)], 4, SampledParams(None, 60.0),
                                  host_paced=host_paced(False))
    assert ctx.sampled.take()["stopped_by"] == "target" and len(samples) > 40
