"""The copy suite's ranks, after nvbandwidth: how fast each GPU's links move bytes, with nothing else running.

Per GPU, host-to-device (h2d) and device-to-host (d2h) with pinned host memory; per ordered
GPU pair, device-to-device (d2d); each by copy engine (`ce`: cudaMemcpyAsync through torch's
copy_) and by SM (`sm`: a kernel on the GPU reads the source and writes the destination),
unidirectional and bidirectional (the reverse copy on a second stream at the same time).

How the bytes count: a point's `size_bytes` is one copy's size; copy_gbps = bytes moved /
time, summed over both directions when bidirectional. One process drives every GPU, so
the launch is always one rank.

The SM kernel is torch's elementwise negation (x -> -x): one read and one write per element at
memory speed, not a plain load/store loop as nvbandwidth's, and its result is checked as -x.
For h2d/d2h it runs on a CUDA view of the pinned host buffer (zero copy: with unified
addressing the pinned allocation is addressable from the GPU); for d2d the kernel runs on the
source GPU and writes into the peer's memory, which needs peer access.

Without a GPU the suite copies host memory to host memory (`h2h`, engine `cpu`): no link,
but the same sweep, check and statistics, so the suite runs for real on any machine.
"""

from __future__ import annotations

import contextlib
from typing import Callable

import torch

from bench.agent import wake
from bench.agent.harness import Context, repeat, run_record
from bench.common.stats import metric
from bench.suites.copy.suite import WARMUP_LEAST_S, Params

ELEMENT = torch.float32
_TYPESTR = "<f4"  # ELEMENT as __cuda_array_interface__ spells it


class _CudaView:
    """Exposes a pinned host tensor through __cuda_array_interface__, so torch wraps the same
    memory as a CUDA tensor (no copy) on the GPU that the pinned allocation belongs to."""

    def __init__(self, host: torch.Tensor):
        self.host = host
        self.__cuda_array_interface__ = {
            "shape": tuple(host.shape), "typestr": _TYPESTR, "data": (host.data_ptr(), False), "version": 2, "strides": None,
        }


def zero_copy_view(host: torch.Tensor, device: torch.device) -> "torch.Tensor | None":
    """A CUDA tensor on `device` aliasing the pinned `host` buffer, or None where CUDA places it elsewhere."""
    view = torch.as_tensor(_CudaView(host), device=device)
    return view if view.data_ptr() == host.data_ptr() else None


def _values(count: int, device, seed: int) -> torch.Tensor:
    """seed + (i mod 251): distinct neighbours, exact in float32, cheap to rebuild for the check."""
    return (torch.arange(count, dtype=torch.int32, device=device).remainder_(251) + seed).to(ELEMENT)


def _copy(engine: str) -> Callable[[torch.Tensor, torch.Tensor], None]:
    """A copy by copy engine, or (sm) torch's negation kernel: copying from a negated view is
    not a memcpy, so torch runs its elementwise kernel, on the source GPU, even into a peer."""
    if engine == "sm":
        return lambda dst, src: dst.copy_(torch._neg_view(src), non_blocking=True)
    return lambda dst, src: dst.copy_(src, non_blocking=True)


def _expected(engine: str, values: torch.Tensor) -> torch.Tensor:
    return -values if engine == "sm" else values


def _record(ctx: Context, point: dict, status: str, *, error: "str | None" = None, times: "list[float] | None" = None,
            moved: int = 0) -> dict:
    """One process drives every GPU: a copy record is always one rank's. Its records have always
    said `error: null` when the copy went well."""
    metrics = {} if times is None else {"time_s": metric(times), "copy_gbps": metric([moved / t / 1e9 for t in times])}
    return run_record(ctx, point, metrics, status=status, error=error, error_when_ok=True)


def _on(stream: "torch.cuda.Stream | None"):
    return torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext()


def _time_copies(ctx: Context, copies: list, params: Params) -> list[float]:
    """Seconds per call where one call runs every (stream, dst, src, copy) of `copies` at once:
    the first on the timing stream, each other on its own stream, joined back before the next
    call. The first copy needs no join, so a one-way point is back-to-back copies on one stream,
    queued ahead of its start event, as nvbandwidth times it."""
    if not ctx.is_cuda:
        (_, dst, src, copy), = copies
        mean_s, _ = repeat(ctx, lambda: copy(dst, src), params, use_graph=False, warmup_least_s=WARMUP_LEAST_S)
        return mean_s
    main = torch.cuda.current_stream(ctx.device)
    (_, first_dst, first_src, first_copy), *others = copies

    def call() -> None:
        for stream, *_ in others:
            stream.wait_stream(main)
        first_copy(first_dst, first_src)
        for stream, dst, src, copy in others:
            with torch.cuda.stream(stream):
                copy(dst, src)
        for stream, *_ in others:
            main.wait_stream(stream)

    with torch.cuda.device(ctx.device):
        mean_s, _ = repeat(ctx, call, params, use_graph=False, queue_ahead=True, warmup_least_s=WARMUP_LEAST_S)
    return mean_s


def _check(copies: list, seeds: list, engine: str) -> "str | None":
    """One more call into cleared destinations; each must hold its source (negated for sm)."""
    for stream, dst, src, copy in copies:
        with _on(stream):  # cleared on the copy's own stream, so the copy comes after
            dst.zero_()
            copy(dst, src)
    for stream, *_ in copies:
        if stream is not None:
            stream.synchronize()
    for (_, dst, _, _), seed in zip(copies, seeds):
        expected = _expected(engine, _values(dst.numel(), dst.device, seed))
        if not torch.equal(dst, expected):
            bad = (dst.float() - expected).abs().argmax().item()
            return f"wrong result: element {bad} is {dst.view(-1)[bad].item()}, expected {expected.view(-1)[bad].item()}"
    return None


def _endpoint(device: "torch.device | None") -> str:
    return "host" if device is None or device.type == "cpu" else f"gpu{device.index}"


def _buffer(count: int, endpoint: "torch.device | None", gpu: torch.device, engine: str, seed: int) -> torch.Tensor:
    """One end of a copy. Host ends are pinned where there is a GPU; for an SM copy the
    operand is the host buffer's zero-copy CUDA view on `gpu`."""
    if endpoint is not None:
        return _values(count, endpoint, seed)
    if gpu.type == "cpu":
        return _values(count, "cpu", seed)
    with torch.cuda.device(gpu):
        host = _values(count, "cpu", seed).pin_memory()
    if engine != "sm":
        return host
    view = zero_copy_view(host, gpu)
    if view is None:
        raise _Unsupported("the pinned host buffer has no zero-copy CUDA address on this system")
    return view


class _Unsupported(Exception):
    """This point cannot run on this machine; the record says why."""


def _point_copies(ctx: Context, legs: list, count: int, engine: str) -> tuple[list, list]:
    """(stream, dst, src, copy) per leg and the seed of each leg's source values; a leg is
    (src device or None for host, dst ..., issuing device)."""
    copies, seeds = [], []
    for leg, (src, dst, gpu) in enumerate(legs):
        stream = torch.cuda.Stream(device=gpu) if ctx.is_cuda else None
        copies.append((stream, _buffer(count, dst, gpu, engine, 0), _buffer(count, src, gpu, engine, leg + 1), _copy(engine)))
        seeds.append(leg + 1)
    return copies, seeds


def _legs(direction: str, bidirectional: bool, a: torch.device, b: "torch.device | None") -> list:
    """(src, dst, issuing GPU) per concurrent copy; None stands for pinned host memory."""
    forward = {"h2d": (None, a, a), "d2h": (a, None, a), "d2d": (a, b, a), "h2h": (None, None, a)}[direction]
    if not bidirectional:
        return [forward]
    src, dst, _ = forward
    return [forward, (dst, src, dst if dst is not None else a)]


def _peer_missing(a: torch.device, b: torch.device) -> "str | None":
    if torch.cuda.can_device_access_peer(a.index, b.index):
        return None
    return f"gpu{a.index} cannot access gpu{b.index}'s memory (no P2P): the SM copy needs peer access"


def _targets(ctx: Context, direction: str) -> list[tuple]:
    if not ctx.is_cuda:
        return [(ctx.device, None)] if direction == "h2h" else []
    gpus = [torch.device("cuda", i) for i in range(torch.cuda.device_count())]
    if direction == "d2d":
        return [(a, b) for a in gpus for b in gpus if a != b]
    return [(a, None) for a in gpus] if direction in ("h2d", "d2h") else []


def run(ctx: Context, entry: dict, emit: Callable[[dict], None]) -> None:
    """Every (direction, engine, bidirectional, GPU or GPU pair, size) the plan entry asks for
    and this machine has; one record per point through `emit`."""
    params = Params.of(entry)
    sizes = params.sizes()
    element = torch.tensor([], dtype=ELEMENT).element_size()
    directions = params.directions if ctx.is_cuda else ["h2h"]
    engines = params.engines if ctx.is_cuda else ["cpu"]
    both_ways = params.bidirectional if ctx.is_cuda else [False]  # one host buffer pair has one way
    if ctx.is_cuda:  # a peer copy needs both ends awake, not only the GPU this process started on
        wake.wake([torch.device("cuda", i) for i in range(torch.cuda.device_count())])
    for direction in directions:
        for engine in engines:
            for bidirectional in both_ways:
                for a, b in _targets(ctx, direction):
                    legs = _legs(direction, bidirectional, a, b)
                    for requested in sizes:
                        count = max(1, requested // element)
                        point = {
                            "direction": direction, "engine": engine, "bidirectional": bidirectional,
                            "src": _endpoint(legs[0][0]), "dst": _endpoint(legs[0][1]), "size_bytes": count * element,
                            "warmup_iters": params.warmup_iters, "iters": params.iters, "repetitions": params.repetitions,
                            "cv_target": params.cv_target, "sampling_cap_s": params.sampling_cap_s,
                        }
                        emit(_measure(ctx, params, point, legs, count, engine, a, b, direction))


def _measure(ctx: Context, params: Params, point: dict, legs: list, count: int, engine: str, a, b, direction: str) -> dict:
    if direction == "d2d" and engine == "sm":
        missing = _peer_missing(a, b)
        if missing:
            return _record(ctx, point, "failed", error=missing)
    point_ctx = Context(rank=0, local_rank=0, world_size=1, device=a, backend=ctx.backend, deadline=ctx.deadline, marks=ctx.marks,
                        target=ctx.target)
    try:
        ctx.mark("build")
        copies, seeds = _point_copies(point_ctx, legs, count, engine)
        times = _time_copies(point_ctx, copies, params)
        ctx.mark("instruments")
        complaint = _check(copies, seeds, engine)
        ctx.mark("other")
    except _Unsupported as reason:
        return _record(point_ctx, point, "failed", error=f"{direction} {engine}: {reason}")
    except torch.OutOfMemoryError:
        return _record(point_ctx, point, "oom", error=f"{point['size_bytes']} bytes per buffer did not fit")
    finally:
        copies = None  # the buffers go before the cache is emptied
        if ctx.is_cuda:
            torch.cuda.empty_cache()
    if complaint:
        return _record(point_ctx, point, "failed", error=f"{direction} {engine} {point['src']}->{point['dst']} {point['size_bytes']} bytes: {complaint}")
    return _record(point_ctx, point, "ok", times=times, moved=point["size_bytes"] * len(legs))
