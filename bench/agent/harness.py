"""The one timing harness every suite shares: warm-up, timing, repetitions, rank reduction.

On the GPU a repetition is timed with a CUDA event pair around `iters` calls (optionally
replayed from a CUDA graph, so that Python's launch cost does not hide a fast link); on
the CPU with perf_counter. Per-repetition times are then averaged over ranks, as
nccl-tests does by default (`-a 1`), and the maximum over ranks is kept too.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import torch
import torch.distributed as dist


@dataclass
class Context:
    """What a suite needs to know about the process it runs in."""

    rank: int
    local_rank: int
    world_size: int
    device: torch.device
    backend: str

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    def sync(self) -> None:
        if self.is_cuda:
            torch.cuda.synchronize(self.device)


def time_per_call(ctx: Context, fn: Callable[[], None], iters: int, graph: "torch.cuda.CUDAGraph | None" = None) -> float:
    """Seconds per call of `fn`, averaged over `iters` back-to-back calls (one repetition)."""
    if ctx.is_cuda:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
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


MAX_SAMPLES = 10000  # a metric's most samples in a bundle (schema/bundle.schema.json): sampling toward a CV stops there


@dataclass(frozen=True)
class Sampling:
    """How long to keep taking samples: past the first batch, more batches of the same size while the
    samples' CV is above cv_target (None: never) and cap_s has not passed, as Phoronix repeats a
    test until its standard deviation is low enough."""

    cv_target: "float | None"
    cap_s: float

    @classmethod
    def of(cls, params: dict) -> "Sampling":
        return cls(params["cv_target"], params["sampling_cap_s"])


def sample_until_steady(ctx: Context, take: Callable[[int], list[float]], count: int, sampling: Sampling) -> list[float]:
    """This rank's samples, `take(count)` at a time until steady; every rank takes as many batches."""
    began = time.monotonic()
    samples = take(count)
    while (sampling.cv_target is not None and len(samples) + count <= MAX_SAMPLES
           and _go_on(ctx, samples, sampling, time.monotonic() - began)):
        samples += take(count)
    return samples


def _go_on(ctx: Context, samples: list[float], sampling: Sampling, elapsed_s: float) -> bool:
    mean = sum(samples) / len(samples)
    variance = sum((x - mean) ** 2 for x in samples) / (len(samples) - 1) if len(samples) > 1 else 0.0
    wants_more = elapsed_s < sampling.cap_s and mean > 0 and variance ** 0.5 / mean > sampling.cv_target
    if ctx.world_size == 1:
        return wants_more
    flag = torch.tensor([int(wants_more)], dtype=torch.int32, device=ctx.device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)  # the ranks' sample lists must stay one length
    return bool(flag.item())


def repeat(ctx: Context, fn: Callable[[], None], *, warmup_iters: int, iters: int, repetitions: int, use_graph: bool,
           sampling: Sampling) -> tuple[list[float], list[float]]:
    """Per-repetition seconds per call: (mean over ranks, max over ranks)."""
    for _ in range(warmup_iters):
        fn()
    ctx.sync()
    graph = capture_graph(ctx, fn, iters) if use_graph and ctx.is_cuda else None
    if graph is not None:
        graph.replay()  # one untimed replay: the first replay pays for uploading the graph
        ctx.sync()
    local = sample_until_steady(ctx, lambda n: [time_per_call(ctx, fn, iters, graph) for _ in range(n)], repetitions, sampling)
    return reduce_over_ranks(ctx, local)


def reduce_over_ranks(ctx: Context, local: list[float]) -> tuple[list[float], list[float]]:
    """Element-wise mean and max of each rank's list (all ranks pass lists of one length)."""
    if ctx.world_size == 1:
        return list(local), list(local)
    values = torch.tensor(local, dtype=torch.float64, device=ctx.device)
    total, peak = values.clone(), values.clone()
    dist.all_reduce(total, op=dist.ReduceOp.SUM)
    dist.all_reduce(peak, op=dist.ReduceOp.MAX)
    return (total / ctx.world_size).tolist(), peak.tolist()
