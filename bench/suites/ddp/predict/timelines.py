"""Measured: a run's step timeline (bench/agent/timeline.py) as the medians over its steps, compute
alone, in a form that counts its micro-batches again for another accumulation; and the gradient
bytes a step all-reduces."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace

from bench.common.replay import Timeline, buckets_of
from bench.common.run import Run
from bench.suites.ddp.predict.runs import accum_of, step_median


@dataclass(frozen=True)
class Profile:
    """A run's timeline as medians over its steps, compute alone, with what it takes to count its
    micro-batches again: the step at `accum` micro-batches is before_s + last backward + after_s."""

    forward_s: float  # one micro-batch's forward
    backward_s: float  # one earlier micro-batch's backward
    before_s: float  # the step's start to the last backward's, at `accum`
    last_backward_s: float
    buckets: tuple
    after_s: float
    accum: int
    source: str  # where it came from, for the report

    def timeline(self, accum: int) -> Timeline:
        """The step at `accum` micro-batches: each one more or less adds or takes a forward and an
        earlier backward before the last backward."""
        return Timeline(self.before_s + (accum - self.accum) * (self.forward_s + self.backward_s), self.last_backward_s,
                        self.buckets, self.after_s)

    def source_at(self, accum: int) -> str:
        """Its source, saying where its micro-batches were counted again."""
        return self.source if accum == self.accum else f"{self.source}, its {self.accum} micro-batches counted as {accum}"


def ready_medians(steps: list) -> list:
    """Each bucket's median ready time over the steps (a list per step, one length)."""
    half, odd = divmod(len(steps), 2)
    columns = map(sorted, zip(*(step["bucket_ready_s"] for step in steps)))
    return [column[half] for column in columns] if odd else [(column[half - 1] + column[half]) / 2 for column in columns]


def profile_of(run: Run, arm: str, source: str, calibrate_to: "float | None" = None,
               ready: "list | None" = None) -> "Profile | None":
    """The run's timeline arm ("steps" or "steps_without_allreduce") as a Profile; calibrate_to: a
    measured median step, which the profile's own step then equals; ready: the arm's ready_medians,
    where known. The run's timeline agrees with itself (runs.timeline_problem finds none)."""
    found = run.timeline
    steps = found.get(arm) or []
    if not steps:
        return None
    accum = accum_of(run)
    figure = {name: statistics.median(step[name] for step in steps)
              for name in ("step_s", "forward_s", "backward_s", "last_backward_start_s", "last_backward_s")}
    ready = ready_medians(steps) if ready is None else ready
    earlier = (figure["backward_s"] - figure["last_backward_s"]) / (accum - 1) if accum > 1 else figure["last_backward_s"]
    after = figure["step_s"] - figure["last_backward_start_s"] - figure["last_backward_s"]
    if calibrate_to is not None:
        after += calibrate_to - figure["step_s"]  # the harness's step: between steps too
    buckets = buckets_of(ready, found["bucket_bytes"])  # a replay takes none as ready past the backward's end
    return Profile(figure["forward_s"] / accum, earlier, figure["last_backward_start_s"], figure["last_backward_s"],
                   buckets, max(after, 0.0), accum, source)


class Profiles:
    """Each run's profiles, made once, from its buckets' ready times, read once: a profile reads every
    step of every bucket."""

    def __init__(self) -> None:
        self._made: dict = {}
        self._ready: dict = {}

    def of(self, run: Run, arm: str, source: str, calibrate_to: "float | None") -> "Profile | None":
        key = (id(run), arm, calibrate_to)
        if key not in self._made:
            steps = run.timeline.get(arm) or []
            ready = self._ready.setdefault((id(run), arm), ready_medians(steps) if steps else [])
            self._made[key] = profile_of(run, arm, "", calibrate_to, ready)
        made = self._made[key]
        return replace(made, source=source) if made is not None else None

    def own(self, run: Run) -> "Profile | None":
        """An N-GPU run's step with its all-reduces taken out: its timed steps' forwards, earlier
        backwards and optimizer, none of which communicate (DDP reduces in the last backward and
        waits for it there), with the last backward of its steps without all-reduce (timeline_steps)."""
        alone = self.of(run, "steps_without_allreduce", "", None)
        timed = self.of(run, "steps", "", step_median(run))
        if alone is None or timed is None:
            return None
        return replace(timed, last_backward_s=alone.last_backward_s, buckets=alone.buckets,
                       source=f"the {run.world_size}-GPU run's steps without all-reduce")


def grad_bytes(run: Run) -> float:
    """The gradient bytes DDP all-reduces per step: the timeline's buckets, else what the run says,
    else its parameters at the bytes they are reduced in (a 1-GPU run reduces nothing)."""
    buckets = run.timeline.get("bucket_bytes")
    if buckets:
        return float(sum(buckets))
    said = run.metric("grad_allreduce_bytes")
    if said and said["summary"]["median"] > 0:
        return said["summary"]["median"]
    p = run.params
    half = p.get("weights_dtype") == "bfloat16" or p.get("grad_reduce_dtype") == "bf16"
    return float(p.get("num_params", 0)) * (2 if half else 4)
