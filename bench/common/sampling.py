"""Sampling until each figure is clear, within a budget: the plan's `precision`, what one run may
spend on it, and what a run is expected to spend (the cost model's part of a plan's estimate).

The contract: a run samples its minimum (its entry's repetitions or steps), then more batches of the
same size until its headline median is known to +-halfwidth_fraction (its 95% interval,
bench/common/stats.py median_halfwidth) on every rank, and at most `budget_s` seconds past its
minimum: its share of the launch's timeout_s (budget_fraction of it, split evenly over the launch's
runs), and never more than its entry's sampling_cap_s. A run whose figure is scaled against a
1-rank baseline (a training step) aims tighter, so that the scaling's "lost" interval of two such
runs is at most lost_width_fraction wide. A training step the host paces stops at HOST_PACED_SAMPLES:
its figure measures the host, whose spread between launches more samples cannot narrow. What stopped
it (the target, the host's pacing, the budget share, the most samples a bundle keeps, the launch's
deadline) is recorded in the run (its `sampling`).

Each configuration runs in at least `launches` launches (the entry's launch_repeats raised to it):
the spread between launches is what a rerun elsewhere meets, and samples of one launch never show it.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass

from bench.common.run import Run
from bench.common.stats import LEVEL, MEDIAN_VARIANCE_FACTOR

LEAST_SAMPLES = 5  # fewer samples' MAD says too little of their spread to stop on
# A run whose step the host paces is compared with a launch-to-launch spread at least its steps' own
# (bench/common/launch_floor.py). Once its median's interval (z sqrt(pi/2) cv / sqrt(n)) is within half
# of that (z cv / 2), from 2 pi samples on, more samples narrow nothing a comparison sees.
HOST_PACED_SAMPLES = math.ceil(4 * MEDIAN_VARIANCE_FACTOR)
MAX_SAMPLES = 10000  # a metric's most samples in a bundle (schema/bundle.schema.json): sampling stops there
# A sample's expected coefficient of variation, what the cost model prices sampling by: on a GPU, the
# GPU-bound training steps of the shipped plans on 1x H100 (0.1-2.4% within a launch, most under 1%)
# and quick's all-reduces of 4 MiB and up on 2x H200 (0.1-0.8%; 5.45% at 1 MiB), at 1.5% the launches
# the GPU's costs were fitted on within 15% (at 1% pacing-shipped's were 18% short); on the shared
# 2-core CPU, small gloo all-reduces and the tiny DDP step (10-30%).
TYPICAL_CV = {"gpu": 0.015, "cpu": 0.2}


@dataclass(frozen=True)
class Precision:
    """The plan's precision block (schema/plan.schema.json), as the controller writes its defaults out."""

    halfwidth_fraction: float  # a headline median's 95% interval within +- this (busbw, copy bandwidth, step time)
    lost_width_fraction: float  # the scaling's "lost" interval at most this wide (0.05: 5 points)
    budget_fraction: float  # of timeout_s, what a launch's runs may spend sampling past their minimums
    launches: int  # each configuration runs in at least this many launches

    @classmethod
    def of(cls, plan: dict) -> "Precision | None":
        """The plan's precision; None where the plan asks for none (each run takes its minimum, once)."""
        block = plan.get("precision")
        return None if block is None else cls(**block)

    def target(self, timeout_s: float, configurations: int) -> "Target":
        """What the ranks of a launch of `configurations` runs sample toward."""
        return Target(self.halfwidth_fraction, min(self.halfwidth_fraction, scaled_halfwidth(self.lost_width_fraction)),
                      self.budget_fraction * timeout_s / max(configurations, 1))


def scaled_halfwidth(lost_width: float) -> float:
    """The half-width each of two runs' medians needs for their ratio's interval to be `lost_width`
    wide: the ratio's half-width is about sqrt(2) times each side's, at an efficiency of 1 at most."""
    return lost_width / 2 / math.sqrt(2)


@dataclass(frozen=True)
class Target:
    """What the ranks of one launch sample toward (protocol.LaunchSpec.sampling)."""

    halfwidth_fraction: float  # a run's headline median to +- this
    scaled_halfwidth_fraction: float  # the same for a run scaled against a 1-rank baseline
    budget_s: float  # the most seconds a run samples past its minimum

    def to_json(self) -> dict:
        return asdict(self)

    def halfwidth(self, scaled: bool) -> float:
        return self.scaled_halfwidth_fraction if scaled else self.halfwidth_fraction


def samples_needed(halfwidth: float, cv: float) -> int:
    """The samples whose median's 95% interval is +-halfwidth, for samples of coefficient of variation `cv`
    (a normal's: its MAD-based scale is its standard deviation); at most MAX_SAMPLES, where sampling
    stops whatever its target, so that a target no count of samples reaches costs that many."""
    z = statistics.NormalDist().inv_cdf(1 - (1 - LEVEL) / 2)
    root = z * cv / halfwidth if halfwidth > 0 else math.inf
    return min(MAX_SAMPLES, math.ceil(MEDIAN_VARIANCE_FACTOR * min(root, math.sqrt(MAX_SAMPLES)) ** 2))


def expected_sampling_s(samples: int, minimum_samples: int, minimum_s: float, budget_s: float) -> float:
    """The seconds a run is expected to sample past its minimum: to `samples` from the `minimum_samples`
    that took `minimum_s`, at the same pace, and never more than budget_s."""
    return min(budget_s, max(0, samples - minimum_samples) * minimum_s / max(minimum_samples, 1))


def contradiction(record: dict) -> "str | None":
    """How a run's sampling record (schema/bundle.schema.json's run.sampling) contradicts itself, which
    JSON Schema cannot say, or None: a run met its target exactly where the target stopped it, and a
    target met is one its half-width is within."""
    met, stopped = record["met"], record["stopped_by"]
    if met != (stopped == "target"):
        return f"says met {str(met).lower()} beside stopped_by {stopped!r}: a run meets its target exactly where the target stops it"
    if met and record["halfwidth_fraction"] > record["target_halfwidth_fraction"]:
        return (f"says met with its median's interval +-{record['halfwidth_fraction']:.3g}, wider than its target "
                f"+-{record['target_halfwidth_fraction']:.3g}")
    return None


def sampling_outcome(runs: "list[Run]") -> "str | None":
    """"met" where every launch's sampling reached its precision target, else what stopped the ones that did
    not ("budget share", "launch deadline" ...); None where none sampled toward a target."""
    records = [run.sampling for run in runs if run.sampling]
    if not records:
        return None
    missed = sorted({r["stopped_by"] for r in records if not r["met"]})
    return "met" if not missed else "not met: " + ", ".join(missed)
