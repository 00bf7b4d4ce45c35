"""Measured: the runs of a host the predictor computes with (ok DDP runs with a step time whose
timeline agrees with itself), what each trained, the nodes it spanned, and a configuration's step
pooled over its launches as the report pools it."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from bench.common.run import Run
from bench.suites.training import training_recipe


@dataclass(frozen=True, order=True)
class Workload:
    """What a GPU trains, whatever the GPU count: the model, its recipe and shapes, the micro-batch."""

    model: str
    recipe: str
    seq_len: "int | None"
    micro_batch: int


def workload_of(run: Run) -> Workload:
    p = run.params
    return Workload(p["model"], training_recipe(p), p.get("seq_len"), p["micro_batch"])


def accum_of(run: Run) -> int:
    return run.params["grad_accum"]


def ok_runs(host: dict) -> list[Run]:
    """The ok ddp runs with a step time (a bundle the schema accepts may hold an ok run without it)."""
    return [r for r in map(Run, host["runs"]) if r.suite == "ddp" and r.ok and r.metric("step_time_s")]


def step_median(run: Run) -> float:
    return run.median("step_time_s")


def pooled_step(runs: list[Run]) -> float:
    """The median step over every sample of the runs: one configuration's launches pooled, as the
    report's figures and scaling pool them (their medians where they kept no samples)."""
    samples = [s for run in runs for s in run.samples("step_time_s")]
    return statistics.median(samples or [step_median(run) for run in runs])


def timeline_problem(run: Run) -> "str | None":
    """Why the run's timeline cannot be replayed (its arrays disagree), or None."""
    found = run.timeline
    count = len(found.get("bucket_bytes") or [])
    for arm in ("steps", "steps_without_allreduce"):
        for step in found.get(arm) or []:
            if len(step["bucket_ready_s"]) != count:
                return (f"its step timeline has {count} bucket size(s) but a step ({arm}) with {len(step['bucket_ready_s'])} "
                        "ready time(s)")
    return None


def run_problem(run: Run) -> "str | None":
    """Why the predictor cannot compute with the run, or None."""
    step = step_median(run)
    if not (math.isfinite(step) and step > 0):
        return f"its median step is {step:g} s, which no step takes"
    return timeline_problem(run)


def run_name(run: Run) -> str:
    return f"{run.launch_id} (run {run.repeat}, {run.params['model']}, global batch {run.params['global_batch']})"


def nodes_of(host: dict) -> dict:
    """Launch id -> the hosts it spanned."""
    return {launch["id"]: launch.get("nodes", 1) for launch in host["launches"]}


def node_count(run: Run, nodes_of_launch: dict) -> int:
    """The nodes a run spanned: its transport's record (emulated nodes of one host, or a group's hosts),
    else its launch's hosts."""
    return (run.transport.get("nodes") or {}).get("count") or nodes_of_launch.get(run.launch_id, 1)
