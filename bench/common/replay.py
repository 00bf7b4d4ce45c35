"""The replay model: a training step's timeline played back on another link.

A step is what comes before the last micro-batch's backward (forwards, the earlier micro-batches,
which DDP keeps from communicating), that backward with its gradient buckets becoming ready one
after another, and what follows (the optimizer). Bucket i's all-reduce starts when it is ready and
bucket i-1's has finished, and lasts what the link gives for its bytes. While an all-reduce runs,
the compute beside it runs slower (NCCL's kernels take SMs and memory bandwidth from it: 10-19%
more matmul time on 2x H200, benchmarks/results/ddp_h200x2.md), so the buckets after it become
ready later; and an all-reduce inside a step may take longer than the curve says (ranks that reach
it apart, the reducer's own work). Both are measured where a DDP run timed its backward with and
without its all-reduces (fitted_slowdown). The step ends at the later of the backward's end and the last all-reduce's
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


@dataclass(frozen=True)
class Slowdown:
    """What a step's own all-reduces do that the link's curve, measured alone, does not say: compute
    runs at 1 / (1 + compute) of its speed while an all-reduce runs beside it (NCCL's kernels take SMs
    and memory bandwidth; gloo's threads take the ranks' cores), and each all-reduce takes (1 + comm)
    times what the curve gives (ranks that reach it at different moments, the reducer's own work)."""

    compute: float = 0.0
    comm: float = 0.0


NONE = Slowdown()


def replay(timeline: Timeline, allreduce_s: Callable[[float], float], slowdown: Slowdown = NONE) -> Replayed:
    """The step on a link whose all-reduce of n bytes takes allreduce_s(n) seconds alone.

    Event by event: the compute goes on to the next bucket's readiness or its end (slowed while an
    all-reduce runs), the all-reduce in flight to its end; a bucket that becomes ready waits behind
    the all-reduces before it."""
    thresholds = [min(bucket.ready_s, timeline.backward_s) for bucket in timeline.buckets]
    queue: list = []  # seconds of all-reduce (alone) still to run, in order; queue[0] is in flight
    now = done = comm_s = 0.0
    compute_end = comm_end = None
    ready = 0
    while True:
        while ready < len(thresholds) and thresholds[ready] <= done:  # buckets ready now join the queue
            duration = allreduce_s(timeline.buckets[ready].nbytes)
            queue.append(duration)
            comm_s += duration
            ready += 1
        computing = done < timeline.backward_s
        if not computing and compute_end is None:
            compute_end = now
        if not computing and not queue:
            break
        compute_rate = 1.0 / (1.0 + slowdown.compute) if queue else 1.0
        comm_rate = 1.0 / (1.0 + slowdown.comm)
        target = thresholds[ready] if ready < len(thresholds) else timeline.backward_s
        to_compute = (target - done) / compute_rate if computing else float("inf")
        to_comm = queue[0] / comm_rate if queue else float("inf")
        step = min(to_compute, to_comm)
        now += step
        if computing:
            done = target if step == to_compute else done + step * compute_rate
        if queue:
            if step == to_comm:
                queue.pop(0)
                comm_end = now
            else:
                queue[0] -= step * comm_rate
    backward_end = max(compute_end, comm_end or 0.0)
    return Replayed(timeline.before_s + backward_end + timeline.after_s, compute_end, comm_end or 0.0, comm_s)


def exposed_only(timeline: Timeline, allreduce_s: Callable[[float], float]) -> Replayed:
    """Seed 002's model: the step's compute, then the gradients' all-reduce, none of it hidden."""
    comm = allreduce_s(timeline.nbytes) if timeline.nbytes else 0.0
    return Replayed(timeline.compute_s + comm, timeline.backward_s, timeline.backward_s + comm, comm)


def _bisect(function: Callable[[float], float], target: float) -> float:
    """The least x >= 0 (to 1e-9 of its bracket) where a growing function reaches target; 0 where it
    is there already, 64 at most."""
    if function(0.0) >= target:
        return 0.0
    low, high = 0.0, 1.0
    while function(high) < target and high < 64:
        high *= 2
    for _ in range(32):
        middle = (low + high) / 2
        low, high = (middle, high) if function(middle) < target else (low, middle)
    return high


def fitted_slowdown(without: Timeline, compute_end_s: float, backward_end_s: float,
                    allreduce_s: Callable[[float], float]) -> Slowdown:
    """The slowdown under which the replayed last backward, from the same compute alone (`without`),
    matches one measured with its all-reduces: its compute ending (the last bucket ready) at
    compute_end_s and the backward, all-reduces included, at backward_end_s. The compute's end
    answers mostly to the compute slowdown and the backward's to the all-reduces': each is fitted
    with the other held, in turn, until they settle."""
    if not without.buckets:
        return NONE
    found = NONE
    for _ in range(12):
        comm = _bisect(lambda m: _backward_end(replay(without, allreduce_s, Slowdown(found.compute, m))), backward_end_s)
        compute = _bisect(lambda c: replay(without, allreduce_s, Slowdown(c, comm)).compute_end_s, compute_end_s)
        settled = abs(compute - found.compute) < 1e-6 and abs(comm - found.comm) < 1e-6
        found = Slowdown(compute, comm)
        if settled:
            break
    return found


def _backward_end(done: Replayed) -> float:
    return max(done.compute_end_s, done.comm_end_s)
