"""The collectives suite's ranks, after nccl-tests: each collective says how to run it and count its bytes.

Sizes are nccl-tests' "size": the full buffer in bytes (for all_gather the gathered output,
for reduce_scatter the scattered input). algbw = size / time; busbw = algbw x factor(n),
the bandwidth a ring would need on its busiest link, comparable across collectives.

torch.distributed's all_reduce and broadcast work in place only, so those two are always
recorded as in place; all_gather and reduce_scatter run both ways.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.distributed as dist

from bench.agent.harness import Context, first_complaint, repeat, run_record
from bench.common.stats import metric
from bench.suites.collectives.suite import Params

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# Results are small integers, exact in every dtype above; the tolerance is for an honest
# rounding difference, not for a wrong answer.
TOLERANCE = {torch.float32: 0.0, torch.bfloat16: 1e-2, torch.float16: 1e-3}


def pattern(ctx: Context, count: int, dtype: torch.dtype, value: int, start: int = 0) -> torch.Tensor:
    """value + ((start + i) mod 7): distinct per rank and position, exact in low precision."""
    index = torch.arange(start, start + count, dtype=torch.int32, device=ctx.device)
    return (index.remainder_(7) + value).to(dtype)


@dataclass
class Buffers:
    run: Callable[[], None]  # one call of the collective
    reset: Callable[[], None]  # put the inputs back (in-place calls destroy them)
    check: Callable[[], "tuple[torch.Tensor, torch.Tensor] | None"]  # (got, expected) for this rank


@dataclass(frozen=True)
class Collective:
    name: str
    busbw_factor: Callable[[int], float]
    out_of_place: bool
    elements_multiple: Callable[[int], int]  # the size must be a multiple of this many elements
    make: Callable[[Context, int, torch.dtype, bool], Buffers]


def _all_reduce(ctx: Context, count: int, dtype: torch.dtype, in_place: bool) -> Buffers:
    n = ctx.world_size
    buf = torch.empty(count, dtype=dtype, device=ctx.device)
    return Buffers(
        run=lambda: dist.all_reduce(buf),
        reset=lambda: buf.copy_(pattern(ctx, count, dtype, ctx.rank + 1)),
        check=lambda: (buf, pattern(ctx, count, torch.float32, 0) * n + n * (n + 1) // 2),
    )


def _all_gather(ctx: Context, count: int, dtype: torch.dtype, in_place: bool) -> Buffers:
    n, per_rank = ctx.world_size, count // ctx.world_size
    out = torch.empty(count, dtype=dtype, device=ctx.device)
    inp = out[ctx.rank * per_rank:(ctx.rank + 1) * per_rank] if in_place else torch.empty(per_rank, dtype=dtype, device=ctx.device)
    expected = lambda: torch.cat([pattern(ctx, per_rank, torch.float32, r + 1) for r in range(n)])
    return Buffers(
        run=lambda: dist.all_gather_into_tensor(out, inp),
        reset=lambda: inp.copy_(pattern(ctx, per_rank, dtype, ctx.rank + 1)),
        check=lambda: (out, expected()),
    )


def _reduce_scatter(ctx: Context, count: int, dtype: torch.dtype, in_place: bool) -> Buffers:
    n, per_rank = ctx.world_size, count // ctx.world_size
    inp = torch.empty(count, dtype=dtype, device=ctx.device)
    out = inp[ctx.rank * per_rank:(ctx.rank + 1) * per_rank] if in_place else torch.empty(per_rank, dtype=dtype, device=ctx.device)
    return Buffers(
        run=lambda: dist.reduce_scatter_tensor(out, inp),
        reset=lambda: inp.copy_(pattern(ctx, count, dtype, ctx.rank + 1)),
        check=lambda: (out, pattern(ctx, per_rank, torch.float32, 0, ctx.rank * per_rank) * n + n * (n + 1) // 2),
    )


def _broadcast(ctx: Context, count: int, dtype: torch.dtype, in_place: bool) -> Buffers:
    buf = torch.empty(count, dtype=dtype, device=ctx.device)
    return Buffers(
        run=lambda: dist.broadcast(buf, src=0),
        reset=lambda: buf.copy_(pattern(ctx, count, dtype, ctx.rank + 1)),
        check=lambda: (buf, pattern(ctx, count, torch.float32, 1)),
    )


COLLECTIVES = {
    c.name: c
    for c in (
        Collective("all_reduce", lambda n: 2 * (n - 1) / n, False, lambda n: 1, _all_reduce),
        Collective("all_gather", lambda n: (n - 1) / n, True, lambda n: n, _all_gather),
        Collective("reduce_scatter", lambda n: (n - 1) / n, True, lambda n: n, _reduce_scatter),
        Collective("broadcast", lambda n: 1.0, False, lambda n: 1, _broadcast),
    )
}
SENDRECV_BUSBW_FACTOR = 1.0


def check_result(ctx: Context, buffers: Buffers, dtype: torch.dtype, what: str) -> "str | None":
    """Run once on fresh inputs and compare; every rank gets the first rank's complaint, if any."""
    buffers.reset()
    ctx.sync()
    buffers.run()
    ctx.sync()
    got_expected = buffers.check()
    complaint = None
    if got_expected is not None:
        got, expected = got_expected[0].float(), got_expected[1]
        if not torch.allclose(got, expected, rtol=TOLERANCE[dtype], atol=0.0):
            bad = (got - expected).abs().argmax().item()
            complaint = f"{what}: wrong result on rank {ctx.rank}: element {bad} is {got[bad].item()}, expected {expected[bad].item()}"
    return first_complaint(ctx, complaint)


def _point(ctx: Context, params: Params, dtype_name: str, in_place: bool) -> dict:
    """A record's params before its op and size: what the point ran with."""
    return {"dtype": dtype_name, "in_place": in_place, "warmup_iters": params.warmup_iters, "iters": params.iters,
            "repetitions": params.repetitions, "cuda_graph": params.cuda_graph and ctx.is_cuda}


def _record(ctx: Context, op: str, point: dict, size_bytes: int, complaint: "str | None", busbw_factor: float,
            mean_s: list, max_s: list) -> dict:
    params = {**point, "op": op, "size_bytes": size_bytes}
    if complaint:
        return run_record(ctx, params, {}, status="failed", error=complaint)
    algbw = [size_bytes / t / 1e9 for t in mean_s]
    return run_record(ctx, params, {
        "time_s": metric(mean_s),
        "time_max_rank_s": metric(max_s),
        "algbw_gbps": metric(algbw),
        "busbw_gbps": metric([b * busbw_factor for b in algbw]),
    })


def run(ctx: Context, entry: dict, emit: Callable[[dict], None]) -> None:
    """Every (op, dtype, placement, size) of the plan entry; one record per point through `emit`."""
    params = Params.of(entry)
    for op in params.ops:
        for dtype_name in params.dtypes:
            if op == "sendrecv":
                _sendrecv_matrix(ctx, params, dtype_name, emit)
            else:
                _sweep(ctx, params, COLLECTIVES[op], dtype_name, emit)


def _sweep(ctx: Context, params: Params, collective: Collective, dtype_name: str, emit: Callable[[dict], None]) -> None:
    """Every placement and size of one collective in one dtype."""
    dtype = DTYPES[dtype_name]
    elem = torch.tensor([], dtype=dtype).element_size()
    multiple = collective.elements_multiple(ctx.world_size)
    placements = sorted({p if collective.out_of_place else True for p in params.in_place})
    for in_place in placements:
        for requested in params.sizes():
            count = max(multiple, requested // elem // multiple * multiple)
            size_bytes = count * elem
            ctx.mark("build")
            buffers = collective.make(ctx, count, dtype, in_place)
            buffers.reset()
            mean_s, max_s = repeat(ctx, buffers.run, params, use_graph=params.cuda_graph)
            ctx.mark("instruments")
            complaint = check_result(ctx, buffers, dtype, f"{collective.name} {dtype_name} {size_bytes} bytes")
            ctx.mark("other")
            del buffers
            emit(_record(ctx, collective.name, _point(ctx, params, dtype_name, in_place), size_bytes, complaint,
                         collective.busbw_factor(ctx.world_size), mean_s, max_s))


def _sendrecv_matrix(ctx: Context, params: Params, dtype_name: str, emit: Callable[[dict], None]) -> None:
    """One-way bandwidth from each rank to each other rank, one pair at a time (nvbandwidth-style)."""
    dtype = DTYPES[dtype_name]
    elem = torch.tensor([], dtype=dtype).element_size()
    for size_requested in params.p2p_sizes():
        count = max(1, size_requested // elem)
        size_bytes = count * elem
        ctx.mark("build")
        buf = torch.empty(count, dtype=dtype, device=ctx.device)
        for src in range(ctx.world_size):
            for dst in range(ctx.world_size):
                if src == dst:
                    continue
                role = "send" if ctx.rank == src else "recv" if ctx.rank == dst else None
                call = {
                    "send": lambda: dist.send(buf, dst),
                    "recv": lambda: dist.recv(buf, src),
                    None: lambda: None,
                }[role]
                buf.copy_(pattern(ctx, count, dtype, ctx.rank + 1))
                dist.barrier()
                # Idle ranks time nothing; the pair's time is the slower of its two ends.
                _, max_s = repeat(ctx, call, params, use_graph=params.cuda_graph and role is not None)
                point = {**_point(ctx, params, dtype_name, False), "src_rank": src, "dst_rank": dst}
                ctx.mark("instruments")
                buf.copy_(pattern(ctx, count, dtype, ctx.rank + 1))
                call()
                ctx.sync()
                wrong = role == "recv" and not torch.equal(buf.float(), pattern(ctx, count, torch.float32, src + 1))
                complaint = first_complaint(ctx, f"sendrecv {src}->{dst}: wrong result on rank {dst}" if wrong else None)
                ctx.mark("other")
                emit(_record(ctx, "sendrecv", point, size_bytes, complaint, SENDRECV_BUSBW_FACTOR, max_s, max_s))
