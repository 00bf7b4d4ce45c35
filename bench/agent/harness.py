"""The one harness every suite's ranks share: warm-up, timing, repetitions, sampling until the
figure is clear (the plan's precision, bench/common/sampling.py) or to a CV, rank reduction, and the
run record (the typed parameters it samples by: bench/suites/params.py).

On the GPU a repetition is timed with a CUDA event pair around `iters` calls (optionally
replayed from a CUDA graph, so that Python's launch cost does not hide a fast link); on
the CPU with perf_counter. Per-repetition times are then averaged over ranks, as
nccl-tests does by default (`-a 1`), and the maximum over ranks is kept too.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.distributed as dist

from bench.common.protocol import Mark, Phase
from bench.common.sampling import HOST_PACED_SAMPLES, LEAST_SAMPLES, MAX_SAMPLES, Target
from bench.common.stats import median_halfwidth
from bench.suites.params import RepeatedParams, SampledParams


class MeasuredWindow:
    """A rank's timed calls since its last run record, on the host's CLOCK_MONOTONIC (time.monotonic,
    one clock for every process of a host), so the agent can cut its GPU counter samples to the
    run. A run timed in several parts would span the first part's start to the last one's end and
    sum their calls."""

    def __init__(self):
        self.window: "dict | None" = None

    def add(self, start_s: float, end_s: float, steps_count: int) -> None:
        if self.window is None:
            self.window = {"start_s": start_s, "end_s": end_s, "steps_count": steps_count}
        else:
            self.window.update(end_s=end_s, steps_count=self.window["steps_count"] + steps_count)

    def take(self) -> "dict | None":
        window, self.window = self.window, None
        return window


class Sampled:
    """How a rank's sampling toward the plan's precision target ended since its last run record
    (schema/bundle.schema.json's run.sampling); a run sampled in several parts keeps the worst."""

    def __init__(self):
        self.record: "dict | None" = None

    def add(self, record: dict) -> None:
        if self.record is None or (self.record["met"] and not record["met"]):
            self.record = record

    def take(self) -> "dict | None":
        record, self.record = self.record, None
        return record
class Marks:
    """Where a launch's local rank 0 marks the phase it enters (bench.common.protocol.Mark); other ranks, and
    a launch run without a marks file, mark nothing. A phase entered again while in it is not marked again."""

    def __init__(self, path: "str | None" = None):
        self.path = path
        self.phase: "str | None" = None

    def at(self, phase: str, at_s: float) -> None:
        if self.path and phase != self.phase:
            Mark(phase, at_s).append(self.path)
            self.phase = phase

    def enter(self, phase: str) -> None:
        self.at(phase, time.monotonic())

    def end(self) -> None:
        self.enter("end")


@dataclass
class Context:
    """What a suite needs to know about the process it runs in; `measured` collects the timed
    calls that the next run record will hold, `notes` what it should say about them. `deadline`
    (this host's CLOCK_MONOTONIC) is when the launch must have written its records: sampling and
    warming up stop before it, so that a launch ends with what it measured rather than killed."""

    rank: int
    local_rank: int
    world_size: int
    device: torch.device
    backend: str
    measured: MeasuredWindow = field(default_factory=MeasuredWindow, repr=False, compare=False)
    deadline: "float | None" = None
    target: "Target | None" = None  # the plan's precision for this launch; None: each run takes its minimum
    sampled: Sampled = field(default_factory=Sampled, repr=False, compare=False)
    notes: list = field(default_factory=list, repr=False, compare=False)
    ranks_per_node: "int | None" = None  # ranks of its node (an emulated node's, where one host is split); None: unknown
    phase_path: "str | None" = None  # where rank 0 says what it is doing (bench.common.protocol.Phase)
    marks: Marks = field(default_factory=Marks, repr=False, compare=False)  # the phases the launch enters, for its record
    profiled_records: "str | None" = None  # a repeat: the run records (a path) of the launch that profiled its configurations; this one profiles none

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    def say(self, kind: str, doing: str, last_step_s: "float | None" = None) -> None:
        """What the launch is doing now (Phase), from rank 0: what the runner names if the launch's timeout_s passes."""
        if self.rank == 0 and self.phase_path:
            Phase(kind, doing, time.monotonic(), last_step_s).write(self.phase_path)

    def mark(self, phase: str) -> None:
        """The launch enters `phase` (bench.common.protocol.PHASES): where its time goes, in its launch record."""
        self.marks.enter(phase)

    def seconds_left(self) -> "float | None":
        """The seconds every rank has left before the launch's deadline (the least of them); None: no deadline."""
        if self.deadline is None:
            return None
        return -max_over_ranks(self, [time.monotonic() - self.deadline])[0]

    def time_for(self, seconds: float) -> bool:
        """Whether every rank has `seconds` left before the launch's deadline (every rank gets the same answer)."""
        return every_rank(self, self.deadline is None or time.monotonic() + seconds < self.deadline)

    def sync(self) -> None:
        if self.is_cuda:
            torch.cuda.synchronize(self.device)


# GPU cycles spun before a queued-ahead repetition: 2.5 ms at 2 GHz, several times what Python
# takes to queue ten calls of a few copies each.
QUEUE_AHEAD_CYCLES = 5_000_000


def time_per_call(ctx: Context, fn: Callable[[], None], iters: int, graph: "torch.cuda.CUDAGraph | None" = None,
                  queue_ahead: bool = False) -> float:
    """Seconds per call of `fn`, averaged over `iters` back-to-back calls (one repetition).
    With queue_ahead the GPU spins before the start event until every call is queued, as
    nvbandwidth's spin kernel does, so Python's issue time never opens gaps between calls."""
    if ctx.is_cuda:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if queue_ahead:
            torch.cuda._sleep(QUEUE_AHEAD_CYCLES)
        start.record()
        if graph is not None:
            graph.replay()
        else:
            for _ in range(iters):
                fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / iters
    begin = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - begin) / iters


def capture_graph(ctx: Context, fn: Callable[[], None], iters: int) -> "torch.cuda.CUDAGraph":
    """`iters` calls of `fn` captured once, replayed as one launch."""
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream(device=ctx.device)
    stream.wait_stream(torch.cuda.current_stream(ctx.device))
    with torch.cuda.stream(stream):
        fn()  # NCCL sets up its graph-side state on the first call outside capture
    torch.cuda.current_stream(ctx.device).wait_stream(stream)
    ctx.sync()
    with torch.cuda.graph(graph, stream=stream):
        for _ in range(iters):
            fn()
    ctx.sync()
    return graph


def sample_until_steady(ctx: Context, take: Callable[[int], list[float]], count: int, sampling: SampledParams,
                        calls_per_sample: int = 1, scaled: bool = False,
                        host_paced: "Callable[[list[float]], bool] | None" = None) -> list[float]:
    """This rank's samples, `take(count)` at a time: the minimum, then more batches while the median's
    interval is wider than the plan's target (ctx.target; `scaled`: the run is scaled against a 1-rank
    baseline, whose target is tighter) or the CV is above cv_target, on any rank, until the budget
    (sampling_cap_s, and the target's budget_s) past the minimum is spent, the most samples a bundle
    keeps, or the launch's deadline; or, where host_paced(samples) says the host paces what they time
    (the same answer on every rank), at HOST_PACED_SAMPLES (bench/common/sampling.py says why). Every
    rank takes as many batches. The timed span goes to ctx.measured, as calls_per_sample calls per
    sample; how it ended, to ctx.sampled."""
    target = ctx.target.halfwidth(scaled) if ctx.target is not None else None
    budget_s = min(sampling.sampling_cap_s, ctx.target.budget_s) if ctx.target is not None else sampling.sampling_cap_s
    began = time.monotonic()
    samples = take(count)
    minimum_end = time.monotonic()
    batch_s = minimum_end - began
    stopped, widest = "target", 0.0
    while target is not None or sampling.cv_target is not None:
        mine = _halfwidth(samples) if target is not None else 0.0
        short, over, widest = max_over_ranks(ctx, [float(_short(samples, mine, target, sampling.cv_target)),
                                                   float(time.monotonic() - minimum_end >= budget_s), mine])
        if not short:
            break
        if host_paced is not None and len(samples) >= HOST_PACED_SAMPLES and host_paced(samples):
            stopped = "host-paced"
            break
        lacking = _short_words(samples, widest, target, sampling.cv_target)
        if over:
            stopped = "budget share"
            break
        if len(samples) + count > MAX_SAMPLES:  # one length on every rank: they all stop here
            stopped = "sample cap"
            ctx.notes.append(f"sampling stopped at {len(samples)} samples, the most a bundle keeps of a metric "
                             f"({MAX_SAMPLES}), with {lacking}: what was measured is kept")
            break
        if not ctx.time_for(2 * batch_s):
            stopped = "launch deadline"
            ctx.notes.append(f"sampling stopped at the launch's timeout_s with {len(samples)} samples, {lacking}: "
                             "what was measured is kept")
            break
        samples += take(count)
    ctx.measured.add(began, time.monotonic(), len(samples) * calls_per_sample)
    if target is not None:
        ctx.sampled.add({"target_halfwidth_fraction": target, "halfwidth_fraction": widest, "met": stopped == "target",
                         "stopped_by": stopped, "budget_s": budget_s, "past_minimum_s": time.monotonic() - minimum_end,
                         "samples": len(samples)})
    return samples


def _halfwidth(samples: list[float]) -> float:
    """The 95% half-width of the median, a fraction; past any target below LEAST_SAMPLES samples."""
    return median_halfwidth(samples) if len(samples) >= LEAST_SAMPLES else 1.0


def _short(samples: list[float], halfwidth: float, target: "float | None", cv_target: "float | None") -> bool:
    """Whether this rank's samples fall short of the precision target or the CV target."""
    return (target is not None and halfwidth > target) or (cv_target is not None and _cv(samples) > cv_target)


def _short_words(samples: list[float], halfwidth: float, target: "float | None", cv_target: "float | None") -> str:
    """What the samples lack: "the median's interval +-3.1% wider than the target +-2.0%", "CV 9.0% above cv_target 5.0%"."""
    said = []
    if target is not None and halfwidth > target:
        said.append(f"the median's interval +-{halfwidth:.1%} wider than the target +-{target:.1%}")
    if cv_target is not None and _cv(samples) > cv_target:
        said.append(f"CV {_cv(samples):.1%} above cv_target {cv_target:.1%}")
    return " and ".join(said) or "its targets met on this rank"


def _cv(samples: list[float]) -> float:
    mean = sum(samples) / len(samples)
    variance = sum((x - mean) ** 2 for x in samples) / (len(samples) - 1) if len(samples) > 1 else 0.0
    return variance ** 0.5 / mean if mean > 0 else 0.0


def warm_up(ctx: Context, fn: Callable[[], None], calls: int, least_s: float = 0.0) -> None:
    """`calls` untimed calls of `fn`, then more, one at a time, until at least `least_s` seconds
    have passed; every rank makes as many calls."""
    began = time.perf_counter()
    for _ in range(calls):
        fn()
    ctx.sync()
    while least_s and any_rank(ctx, time.perf_counter() - began < least_s):
        fn()
        ctx.sync()


def repeat(ctx: Context, fn: Callable[[], None], timing: RepeatedParams, use_graph: bool,
           queue_ahead: bool = False, warmup_least_s: float = 0.0) -> tuple[list[float], list[float]]:
    """Per-repetition seconds per call: (mean over ranks, max over ranks); queue_ahead as in
    time_per_call; the warm-up as in warm_up."""
    ctx.mark("warmup")
    warm_up(ctx, fn, timing.warmup_iters, warmup_least_s)
    graph = capture_graph(ctx, fn, timing.iters) if use_graph and ctx.is_cuda else None
    if graph is not None:
        graph.replay()  # one untimed replay: the first replay pays for uploading the graph
        ctx.sync()
    ctx.mark("measured")
    local = sample_until_steady(
        ctx, lambda n: [time_per_call(ctx, fn, timing.iters, graph, queue_ahead) for _ in range(n)], timing.repetitions, timing,
        calls_per_sample=timing.iters)
    ctx.mark("other")
    return reduce_over_ranks(ctx, local)


def time_each_call(ctx: Context, fn: Callable[[], None], count: int) -> list[float]:
    """Seconds of each of `count` back-to-back calls of `fn` (a training step each)."""
    if ctx.is_cuda:
        events = [torch.cuda.Event(enable_timing=True) for _ in range(count + 1)]
        events[0].record()
        for i in range(count):
            fn()
            events[i + 1].record()
        events[-1].synchronize()
        return [a.elapsed_time(b) / 1e3 for a, b in zip(events, events[1:])]
    times = []
    for _ in range(count):
        begin = time.perf_counter()
        fn()
        times.append(time.perf_counter() - begin)
    return times


def reduce_over_ranks(ctx: Context, local: list[float]) -> tuple[list[float], list[float]]:
    """Element-wise mean and max of each rank's list (all ranks pass lists of one length)."""
    if ctx.world_size == 1:
        return list(local), list(local)
    values = torch.tensor(local, dtype=torch.float64, device=ctx.device)
    total = values.clone()
    dist.all_reduce(total, op=dist.ReduceOp.SUM)
    return (total / ctx.world_size).tolist(), max_over_ranks(ctx, local)


def max_over_ranks(ctx: Context, local: list[float]) -> list[float]:
    """Element-wise max of each rank's list, as floats (all ranks pass lists of one length)."""
    if ctx.world_size == 1:
        return [float(x) for x in local]
    values = torch.tensor(local, dtype=torch.float64, device=ctx.device)
    dist.all_reduce(values, op=dist.ReduceOp.MAX)
    return values.tolist()


def any_rank(ctx: Context, flag: bool) -> bool:
    """Whether the flag is set on some rank; every rank gets the same answer."""
    return max_over_ranks(ctx, [float(flag)])[0] > 0


def every_rank(ctx: Context, flag: bool) -> bool:
    """Whether the flag is set on every rank; every rank gets the same answer."""
    return not any_rank(ctx, not flag)


def first_complaint(ctx: Context, complaint: "str | None") -> "str | None":
    """The first rank's complaint, if any, on every rank."""
    if ctx.world_size == 1:
        return complaint
    complaints = [None] * ctx.world_size
    dist.all_gather_object(complaints, complaint)
    return next((c for c in complaints if c), None)


def run_record(ctx: Context, params: dict, metrics: dict, *, status: str = "ok",
               error: "str | None" = None, error_when_ok: bool = False) -> dict:
    """One configuration's record: schema/bundle.schema.json's `run`, less what others add (rank 0's
    worker adds the suite as it writes the record; the agent's runner, bench/agent/collect.py's
    run_records, adds transport, launch_id, repeat, gpu_counters, and env, gpus and profiled_in where the
    launch has them). `error` is set where one is given, and with error_when_ok even when it is None;
    `measured_window` is the rank's timed calls since its last record (None: none); `sampling`, how its
    sampling toward the plan's precision ended, and `notes` are set only where there are some. Taking
    the window, the sampling and the notes clears them for the next record."""
    record = {"params": params, "world_size": ctx.world_size, "status": status}
    if error is not None or error_when_ok:
        record["error"] = error
    record["metrics"] = metrics
    record["measured_window"] = ctx.measured.take()
    sampled = ctx.sampled.take()
    if sampled is not None:
        record["sampling"] = sampled
    if ctx.notes:
        record["notes"], ctx.notes = ctx.notes, []
    return record
