"""The replay model: a training step's timeline played back on another link.

A step is what comes before the last micro-batch's backward (forwards, the earlier micro-batches,
which DDP keeps from communicating), that backward with its gradient buckets becoming ready one
after another, and what follows (the optimizer). Bucket i's all-reduce starts when it is ready and
bucket i-1's has finished, and lasts what the link gives for its bytes. While an all-reduce runs,
the compute beside it runs `slowdown` slower (NCCL's kernels take SMs and memory bandwidth from it:
10-19% more matmul time on 2x H200, benchmarks/results/ddp_h200x2.md), so the buckets after it
become ready later. The step ends at the later of the backward's end and the last all-reduce's
end, plus what follows.

Without bucket timings (an older bundle) the fallback is seed 002's model: every all-reduce after
the backward, fully exposed (bench/suites/ddp/derived.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Bucket:
    ready_s: float  # seconds of backward compute from the last backward's start until it is ready
    nbytes: float


@dataclass(frozen=True)
class Timeline:
    """One step, in seconds of compute alone (no communication slowing it)."""

    before_s: float  # the step's start to the last micro-batch's backward start
    backward_s: float  # the last backward's compute
    buckets: tuple  # Bucket, in the order they become ready
    after_s: float  # the optimizer and whatever else follows the backward

    @property
    def compute_s(self) -> float:
        return self.before_s + self.backward_s + self.after_s

    @property
    def nbytes(self) -> float:
        return sum(bucket.nbytes for bucket in self.buckets)


@dataclass(frozen=True)
class Replayed:
    step_s: float
    compute_end_s: float  # the backward's compute end, from its start, slowed where it overlapped an all-reduce
    comm_end_s: float  # the last all-reduce's end, from the backward's start
    comm_s: float  # the all-reduces' total time

    @property
    def exposed_s(self) -> float:
        """Communication no compute hid: the wait past the backward's end."""
        return max(0.0, self.comm_end_s - self.compute_end_s)


def _advance(now: float, done: float, target: float, busy_until: float, slowdown: float) -> tuple[float, float]:
    """Wall time and compute done once the compute reaches `target`, from (now, done); an all-reduce
    runs until busy_until and slows it meanwhile."""
    if target <= done:
        return now, done
    if now < busy_until:
        slow_rate = 1.0 / (1.0 + slowdown)
        if now + (target - done) / slow_rate <= busy_until:
            return now + (target - done) / slow_rate, target
        done += (busy_until - now) * slow_rate
        now = busy_until
    return now + (target - done), target


def replay(timeline: Timeline, allreduce_s: Callable[[float], float], slowdown: float = 0.0) -> Replayed:
    """The step on a link whose all-reduce of n bytes takes allreduce_s(n) seconds.

    The all-reduces run back to back from the first bucket's readiness as long as each next bucket
    is ready when its predecessor ends, so at any moment the link is busy from now until the
    last scheduled all-reduce's end (`busy_until`)."""
    now = done = busy_until = comm_s = 0.0
    for bucket in timeline.buckets:
        now, done = _advance(now, done, min(bucket.ready_s, timeline.backward_s), busy_until, slowdown)
        duration = allreduce_s(bucket.nbytes)
        busy_until = max(now, busy_until) + duration
        comm_s += duration
    compute_end, _ = _advance(now, done, timeline.backward_s, busy_until, slowdown)
    backward_end = max(compute_end, busy_until)
    return Replayed(timeline.before_s + backward_end + timeline.after_s, compute_end, busy_until, comm_s)


def exposed_only(timeline: Timeline, allreduce_s: Callable[[float], float]) -> Replayed:
    """Seed 002's model: the step's compute, then the gradients' all-reduce, none of it hidden."""
    comm = allreduce_s(timeline.nbytes) if timeline.nbytes else 0.0
    return Replayed(timeline.compute_s + comm, timeline.backward_s, timeline.backward_s + comm, comm)


def fitted_slowdown(without: Timeline, with_comm_backward_s: float, allreduce_s: Callable[[float], float]) -> float:
    """The slowdown that makes the replayed backward compute as long as the one measured with the
    all-reduces running (its buckets' readiness stretched by them), given the compute alone; 0 where
    the measurement shows none. Bisection: a longer slowdown always stretches the compute more."""
    target = with_comm_backward_s
    if target <= without.backward_s or not without.buckets:
        return 0.0
    low, high = 0.0, 1.0
    while replay(without, allreduce_s, high).compute_end_s < target and high < 64:
        high *= 2
    for _ in range(50):
        middle = (low + high) / 2
        if replay(without, allreduce_s, middle).compute_end_s < target:
            low = middle
        else:
            high = middle
    return (low + high) / 2
