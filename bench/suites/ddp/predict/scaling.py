"""Modelled: weak and strong scaling. What a configuration keeps as the GPUs change, one GPU's compute
in its step at N GPUs, and the 1-GPU step it scales against, each from the host's runs in the order
that models the least.

Weak scaling keeps the batch per GPU: each GPU trains the bundle's micro-batch `accum` times a step,
so at N GPUs the global batch is N x micro-batch x accum and each GPU computes what the bundle
measured at that accumulation. Strong scaling keeps the global batch B: at N GPUs each trains
B / (N x micro-batch) micro-batches, where that is a whole number. Either way the scaling is the
1-GPU per-sample time over the predicted per-sample time x N: T1 / TN under weak scaling (the same
work per GPU), T1(B) / (N x TN(B)) under strong.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Callable

from bench.common.replay import NONE, Bucket, Replayed, Slowdown, Timeline, exposed_only, replay
from bench.common.run import Run
from bench.suites.ddp.predict.notes import EXPOSED_MODEL, ONE_GPU_SOURCE
from bench.suites.ddp.predict.runs import Workload, accum_of, pooled_step, step_median, workload_of
from bench.suites.ddp.predict.timelines import Profile, Profiles, grad_bytes

WEAK, STRONG = "weak", "strong"
SCALINGS = (WEAK, STRONG)


@dataclass(frozen=True, order=True)
class Configuration:
    """What stays as the GPUs change: the workload, and its accumulation (weak) or global batch (strong)."""

    workload: Workload
    scaling: str
    kept: int  # the micro-batches a GPU accumulates a step (weak), or the global batch (strong)

    def accum_at(self, gpus: int) -> "int | None":
        """The micro-batches each of `gpus` GPUs accumulates a step; None where the global batch does not divide."""
        if self.scaling == WEAK:
            return self.kept
        accum, left = divmod(self.kept, gpus * self.workload.micro_batch)
        return accum if accum >= 1 and not left else None

    def batch_at(self, gpus: int) -> int:
        return gpus * self.workload.micro_batch * self.kept if self.scaling == WEAK else self.kept

    @property
    def name(self) -> str:
        w = self.workload
        if self.scaling == WEAK:
            return f"{w.model}, micro-batch {w.micro_batch} x {self.kept} accumulated per GPU"
        return f"{w.model}, global batch {self.kept}"


def configuration_of(run: Run, scaling: "str | None") -> Configuration:
    """The run's configuration under `scaling`; None: as its plan measured it (strong where the plan
    swept global batches, else weak), which is how its scaling efficiency was derived."""
    kind = scaling or (STRONG if run.params.get("global_batches") else WEAK)
    return Configuration(workload_of(run), kind, run.params["global_batch"] if kind == STRONG else accum_of(run))


@dataclass(frozen=True)
class Compute:
    """One GPU's step with no communication, and where it came from: a timeline to replay, or without
    one the compute + exposed communication model's step (its compute, then every gradient byte's
    all-reduce, none of it hidden)."""

    timeline: Timeline
    source: str
    replayed: bool = True

    def step(self, allreduce_s: Callable[[float], float], slowdown: Slowdown = NONE) -> Replayed:
        return replay(self.timeline, allreduce_s, slowdown) if self.replayed else exposed_only(self.timeline, allreduce_s)


@dataclass(frozen=True)
class Baseline:
    per_sample_s: float  # the 1-GPU step / its global batch: per-sample time x 1 GPU
    source: str  # "" where it is the 1-GPU run of that batch per GPU, measured; else what stands for it


class Sources:
    """A host's runs as the sources of compute and baselines (measured), each asked in the order that
    models the least: the same work per GPU before micro-batches counted again, a 1-GPU measurement
    before a multi-GPU run's steps without all-reduce."""

    def __init__(self, runs: list[Run], profiles: Profiles) -> None:
        self.runs = runs
        self.profiles = profiles

    def _one_gpu(self, work: Workload, accum: "int | None" = None) -> list[Run]:
        return [r for r in self.runs if r.world_size == 1 and workload_of(r) == work and accum in (None, accum_of(r))]

    def _profile(self, run: Run) -> "Profile | None":
        if run.world_size > 1:
            return self.profiles.own(run)
        # calibrated to the step pooled over its launches, the baseline's own figure
        return self.profiles.of(run, "steps", ONE_GPU_SOURCE, pooled_step(self._one_gpu(workload_of(run), accum_of(run))))

    def _first(self, work: Workload, rank: Callable[[Run], tuple], one_gpu: bool = False) -> "Profile | None":
        runs = [r for r in self.runs if workload_of(r) == work and r.timeline and (r.world_size == 1 or not one_gpu)]
        for run in sorted(runs, key=lambda r: (*rank(r), r.repeat, r.launch_id)):
            profile = self._profile(run)
            if profile is not None:
                return profile
        return None

    def _stands_for_one_gpu(self, work: Workload, accum: int) -> "tuple[float, str] | None":
        """A 1-GPU step at `accum` micro-batches where none was measured, and what it is: a 1-GPU timeline
        counted again, else a multi-GPU run's steps without all-reduce (its compute alone), else a 1-GPU
        run of another accumulation in proportion."""
        profile = self._first(work, lambda r: (r.world_size > 1, accum_of(r) != accum, abs(accum_of(r) - accum), r.world_size))
        if profile is not None:
            alone = "" if profile.source == ONE_GPU_SOURCE else " (its compute alone, as one GPU would step)"
            return profile.timeline(accum).compute_s, profile.source_at(accum) + alone
        exposed = self.exposed(work, accum)
        if exposed is not None:
            return exposed.timeline.compute_s, "the 1-GPU run of another accumulation, in proportion"
        return None

    def replayed(self, work: Workload, accum: int, gpus: int) -> "Compute | None":
        """A timeline of one GPU's compute at `accum` micro-batches among `gpus`: the `gpus`-GPU run's steps
        without all-reduce at that accumulation, else the 1-GPU run's timeline at it, else another world
        size's steps without all-reduce at it (the same work per GPU); else the same at the nearest
        accumulation, its micro-batches counted again."""
        profile = self._first(work, lambda r: (accum_of(r) != accum, 0 if r.world_size == gpus else 1 if r.world_size == 1 else 2,
                                               abs(accum_of(r) - accum), abs(r.world_size - gpus)))
        return Compute(profile.timeline(accum), profile.source_at(accum)) if profile is not None else None

    def one_gpu_replayed(self, work: Workload, accum: int) -> "Compute | None":
        """The 1-GPU timeline at `accum` micro-batches: that accumulation's run, else the nearest's, counted again."""
        profile = self._first(work, lambda r: (abs(accum_of(r) - accum), accum_of(r)), one_gpu=True)
        return Compute(profile.timeline(accum), profile.source_at(accum)) if profile is not None else None

    def exposed(self, work: Workload, accum: int) -> "Compute | None":
        """The compute + exposed communication model's step at `accum` micro-batches: the 1-GPU step for
        that work per GPU (the same accumulation's, else the nearest's in proportion, as
        bench/suites/ddp/derived.py's compute), its gradients all-reduced after it."""
        ones = self._one_gpu(work)
        if not ones:
            return None
        near = min(ones, key=lambda r: (abs(accum_of(r) - accum), accum_of(r), r.repeat, r.launch_id))
        seconds = pooled_step(self._one_gpu(work, accum_of(near))) * accum / accum_of(near)
        return Compute(Timeline(0.0, seconds, (Bucket(seconds, grad_bytes(near)),), 0.0), EXPOSED_MODEL, replayed=False)

    def compute(self, work: Workload, accum: int, gpus: int) -> "Compute | None":
        """One GPU's compute at `accum` micro-batches among `gpus`: replayed where a timeline is, else the
        compute + exposed communication model."""
        return self.replayed(work, accum, gpus) or self.exposed(work, accum)

    def one_gpu_busy(self, work: Workload) -> "float | None":
        """The share of the 1-GPU step its GPU was busy computing (the profiled steps' kernels, median over the
        1-GPU runs of the workload): well under 1, the step is the CPU's pace, which a replay on N GPUs does
        not keep (its GPU runs ahead where it waited for an all-reduce) and which moves from launch to launch."""
        shares = [busy / step_median(r) for r in self._one_gpu(work) if r.on_gpu
                  for busy in [r.median("gpu_compute_busy_s")] if busy and step_median(r) > 0]
        return statistics.median(shares) if shares else None

    def baseline(self, config: Configuration) -> "Baseline | None":
        """The 1-GPU step the configuration scales against, per sample: the 1-GPU runs of its batch per
        GPU at one GPU, pooled; else a 1-GPU timeline counted again, else a multi-GPU run's steps without
        all-reduce (its compute alone), else a 1-GPU run's step in proportion."""
        work, accum = config.workload, config.accum_at(1)
        if accum is None:
            return None
        measured = self._one_gpu(work, accum)
        found = (pooled_step(measured), "") if measured else self._stands_for_one_gpu(work, accum)
        if found is None or not (math.isfinite(found[0]) and found[0] > 0):  # no step takes 0 s
            return None
        return Baseline(found[0] / (work.micro_batch * accum), found[1])
