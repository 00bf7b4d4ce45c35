"""The replay model: a training step's timeline played back on another link.

A step is what comes before the last micro-batch's backward (forwards, the earlier micro-batches,
which DDP keeps from communicating), that backward with its gradient buckets becoming ready one
after another, and what follows (the optimizer). Bucket i's all-reduce starts when it is ready and
bucket i-1's has finished, and lasts what the link gives for its bytes. While an all-reduce runs,
the compute beside it runs slower (NCCL's kernels take SMs and memory bandwidth from it: 10-19%
more matmul time on 2x H200, benchmarks/results/ddp_h200x2.md), so the buckets after it become
ready later; and an all-reduce inside a step may take longer than the curve says (ranks that reach
it apart, the reducer's own work), or less (the curve measured in another launch, its calls alone).
Both are measured where a DDP run timed its backward with and
without its all-reduces (fitted_slowdown). The step ends at the later of the backward's end and the last all-reduce's
end, plus what follows. A replay is one pass over the buckets (those ready together queued as one,
GROUP_SHARE), so that a timeline of 100,000 buckets replays, and is fitted, in a fraction of a second.

Without bucket timings (an older bundle) the fallback is the compute + exposed communication model: every all-reduce after
the backward, fully exposed (bench/suites/ddp/derived.py).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from functools import cached_property
from itertools import accumulate, repeat
from operator import itemgetter
from typing import Callable, NamedTuple


class Bucket(NamedTuple):
    ready_s: float  # seconds of backward compute from the last backward's start until it is ready
    nbytes: float


def buckets_of(ready_s, nbytes) -> tuple:
    """Buckets from their ready times and sizes, made without a call per bucket (a timeline may hold
    100,000)."""
    return tuple(map(tuple.__new__, repeat(Bucket), zip(ready_s, nbytes)))


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

    @cached_property
    def groups(self) -> tuple:
        """(each bucket's bytes, where each group of buckets ends, when each is ready): a bucket ready no
        earlier than the one before it (DDP reduces them in order), those within GROUP_SHARE of the
        backward of a group's first in that group, ready with its last. Made once per timeline, which
        is replayed on many links."""
        ready = list(accumulate(map(itemgetter(0), self.buckets), max))
        past = bisect_right(ready, self.backward_s)  # ready after the backward's end: at its end
        ready[past:] = repeat(self.backward_s, len(ready) - past)
        within = GROUP_SHARE * self.backward_s
        ends, grouped = [], []
        first = 0
        while first < len(ready):
            first = bisect_right(ready, ready[first] + within, first)
            ends.append(first)
            grouped.append(ready[first - 1])
        return tuple(map(itemgetter(1), self.buckets)), tuple(ends), tuple(grouped)


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
    times what the curve gives: more where ranks reach it at different moments or the reducer adds its
    own work, less (comm below 0, down to COMM_FLOOR) where the step's back-to-back all-reduces ran
    faster than the sweep's calls did alone in their own launch (sockets between launches: 0.6x to
    1.2x of the sweep in this project's bundles, benchmarks/results/predictor_diagnosis.md)."""

    compute: float = 0.0
    comm: float = 0.0


# (1 + comm) is a share of the curve's time, never below nothing.
COMM_FLOOR = -1.0
NONE = Slowdown()


# Buckets that become ready within this share of the backward of their group's first one are queued
# as one, at the group's last readiness, their all-reduce times summed: exact where they are ready at
# once (a compiled backward, a 1-GPU timeline), and otherwise the step moves by about this share of
# the backward at most. It bounds a replay at a thousand groups, whatever the bucket count.
GROUP_SHARE = 1e-3


@dataclass(frozen=True)
class Events:
    """A timeline's all-reduces on one link, in groups: when each group is ready (seconds of backward
    compute alone from its start) and how long its all-reduces take alone."""

    ready_s: tuple
    seconds: tuple
    backward_s: float

    @property
    def comm_s(self) -> float:
        return sum(self.seconds)


def events(timeline: Timeline, allreduce_s: Callable[[float], float]) -> Events:
    """The timeline's groups of buckets (Timeline.groups) with their all-reduces' time, each size's
    time asked once. Linear in the buckets."""
    sizes, ends, ready = timeline.groups
    took = {size: allreduce_s(size) for size in set(sizes)}
    seconds = list(map(took.__getitem__, sizes))
    return Events(ready, tuple(sum(seconds[start:end]) for start, end in zip((0, *ends), ends)), timeline.backward_s)


def play(found: Events, slowdown: Slowdown = NONE) -> tuple[float, float]:
    """(the backward's compute end, the last all-reduce's end), from the backward's start: the compute
    runs at 1 / (1 + slowdown.compute) of its speed while the queue of all-reduces is not empty, each
    all-reduce takes (1 + slowdown.comm) times its time alone and starts when its group is ready and
    the one before has ended. One pass over the groups."""
    stretch_compute, stretch_comm = 1.0 + slowdown.compute, 1.0 + slowdown.comm
    now = done = comm_end = 0.0  # wall clock, compute done, the queue's end

    def compute_to(target: float) -> None:
        nonlocal now, done
        need = target - done
        if need <= 0:
            return
        if now < comm_end:  # the queue runs: slowed compute until it empties
            beside = (comm_end - now) / stretch_compute
            if beside >= need:
                now += need * stretch_compute
                done = target
                return
            done += beside
            now = comm_end
        now += target - done
        done = target

    for ready, seconds in zip(found.ready_s, found.seconds):
        compute_to(ready)
        comm_end = max(comm_end, now) + seconds * stretch_comm
    compute_to(found.backward_s)
    return now, comm_end


def replay(timeline: Timeline, allreduce_s: Callable[[float], float], slowdown: Slowdown = NONE) -> Replayed:
    """The step on a link whose all-reduce of n bytes takes allreduce_s(n) seconds alone: bucket i's
    all-reduce starts when it is ready and bucket i-1's has ended (play)."""
    found = events(timeline, allreduce_s)
    compute_end, comm_end = play(found, slowdown)
    return Replayed(timeline.before_s + max(compute_end, comm_end) + timeline.after_s, compute_end, comm_end, found.comm_s)


def exposed_only(timeline: Timeline, allreduce_s: Callable[[float], float]) -> Replayed:
    """The compute + exposed communication model: the step's compute, then the gradients' all-reduce, none of it hidden."""
    comm = allreduce_s(timeline.nbytes) if timeline.nbytes else 0.0
    return Replayed(timeline.compute_s + comm, timeline.backward_s, timeline.backward_s + comm, comm)


def _least_reaching(function: Callable[[float], float], target: float, floor: float = 0.0) -> float:
    """The least x >= floor (floor <= 0) where a growing, continuous function reaches target (64 at
    most): its bracket found from 0 by doubling (or between floor and 0), then closed by false
    position with the Illinois rule (a replay is piecewise linear in a slowdown, so a few steps settle
    it where bisection takes thirty)."""
    low, below = floor, function(floor) - target
    if below >= 0:
        return floor
    high, above = 0.0, function(0.0) - target
    if above < 0:
        low, below = high, above
        high, above = 1.0, function(1.0) - target
    while above < 0:
        if high >= 64:
            return high
        low, below = high, above
        high *= 2
        above = function(high) - target
    kept = 0  # which end the last step kept: Illinois halves the other's value when one end stays twice
    for _ in range(60):
        if high - low <= 1e-9 * max(abs(high), 1.0):
            break
        x = high - above * (high - low) / (above - below)
        if not low < x < high:
            x = (low + high) / 2
        value = function(x) - target
        if value >= 0:
            high, above = x, value
            below = below / 2 if kept == 1 else below
            kept = 1
        else:
            low, below = x, value
            above = above / 2 if kept == -1 else above
            kept = -1
        if value == 0:
            break
    return high


def fitted_slowdown(without: Timeline, compute_end_s: float, backward_end_s: float,
                    allreduce_s: Callable[[float], float]) -> Slowdown:
    """The slowdown under which the replayed last backward, from the same compute alone (`without`),
    matches one measured with its all-reduces: its compute ending (the last bucket ready) at
    compute_end_s and the backward, all-reduces included, at backward_end_s. The compute's end
    answers mostly to the compute slowdown and the backward's to the all-reduces': each is fitted
    with the other held, in turn, until they settle. The compute's is none where it ran no slower
    beside its all-reduces; the all-reduces' may be below none (COMM_FLOOR), where the backward ended
    sooner than the curve's all-reduces would let it."""
    if not without.buckets:
        return NONE
    found_events = events(without, allreduce_s)
    found = NONE
    for _ in range(12):
        comm = _least_reaching(lambda m: max(play(found_events, Slowdown(found.compute, m))), backward_end_s, COMM_FLOOR)
        compute = _least_reaching(lambda c: play(found_events, Slowdown(c, comm))[0], compute_end_s)
        settled = abs(compute - found.compute) < 1e-6 and abs(comm - found.comm) < 1e-6
        found = Slowdown(compute, comm)
        if settled:
            break
    return found
