"""Sampling toward a CV target (bench/agent/harness.py sample_until_steady) ends by saying why it
ended where the target was not reached: here, at the most samples a bundle keeps of a metric."""

from __future__ import annotations

import itertools

import torch

from bench.agent.harness import MAX_SAMPLES, Context, sample_until_steady
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
