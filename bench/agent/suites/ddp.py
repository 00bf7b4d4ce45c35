"""DDP training suite: step time of a GPT under DistributedDataParallel on synthetic data.

A global batch is reached by micro-batches; all but the last run under `no_sync()`, so the
gradients cross the link once per step, as in seed 000. Each configuration is one record.
"""

from __future__ import annotations

import contextlib
import resource
import time
from typing import Callable

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from bench.agent.gpu_peaks import dense_bf16_peak_tflops
from bench.agent.harness import Context, reduce_over_ranks
from bench.agent.models.gpt import GPT, PRESETS
from bench.agent.stats import metric


def grad_accum_for(global_batch: int, world_size: int, micro_batch: int) -> int:
    """Micro-batches per rank per step; the planner has already refused a global batch that does not divide."""
    return global_batch // (world_size * micro_batch)


def make_model(ctx: Context, params: dict) -> tuple[GPT, "DDP | None"]:
    """The model, wrapped in DDP when there is a peer: one rank trains as a plain
    single-GPU script would, so the baseline carries no communication machinery at all."""
    torch.manual_seed(params["seed"])  # the same initial weights on every rank, as DDP expects
    model = GPT(PRESETS[params["model"]]).to(ctx.device)
    if ctx.world_size == 1:
        return model, None
    ddp = DDP(
        model,
        device_ids=[ctx.device.index] if ctx.is_cuda else None,
        bucket_cap_mb=params["bucket_cap_mb"],
        gradient_as_bucket_view=params["gradient_as_bucket_view"],
        static_graph=params["static_graph"],
    )
    return model, ddp


def install_comm_hook(ddp: DDP, grad_reduce_dtype: str, count: bool) -> "list[int] | None":
    """bf16 gradient all-reduce when asked (half the bytes on the link, at bf16's precision),
    and optionally a counter of bucket all-reduces: it proves no_sync() skips communication."""
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook, bf16_compress_hook

    reduce = bf16_compress_hook if grad_reduce_dtype == "bf16" else allreduce_hook
    if not count and reduce is allreduce_hook:
        return None  # DDP's built-in C++ all-reduce: no Python on the gradient path
    calls = [0]

    def hook(state, bucket):
        calls[0] += 1
        return reduce(state, bucket)

    ddp.register_comm_hook(None, hook)
    return calls if count else None


def peak_memory_bytes(ctx: Context) -> int:
    if ctx.is_cuda:
        return torch.cuda.max_memory_allocated(ctx.device)
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def run_config(ctx: Context, params: dict, global_batch: int) -> dict:
    micro_batch, seq_len = params["micro_batch"], params["seq_len"]
    accum = grad_accum_for(global_batch, ctx.world_size, micro_batch)
    model, ddp = make_model(ctx, params)
    calls = install_comm_hook(ddp, params["grad_reduce_dtype"], params["count_allreduce"]) if ddp is not None else None
    # Compiling the DDP wrapper (not the inner model) lets dynamo split the graph at bucket
    # boundaries, so gradients are all-reduced while the backward pass goes on.
    step_model = torch.compile(ddp or model) if params["compile"] else (ddp or model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=ctx.is_cuda)
    generator = torch.Generator(device=ctx.device).manual_seed(params["seed"] + ctx.rank)
    tokens = torch.randint(model.cfg.vocab_size, (accum, micro_batch, seq_len + 1), device=ctx.device, generator=generator)
    inputs, targets = tokens[..., :-1].contiguous(), tokens[..., 1:].contiguous()
    autocast = (
        torch.autocast(ctx.device.type, dtype=torch.bfloat16)
        if params["precision"] == "bf16"
        else contextlib.nullcontext()
    )

    def step() -> None:
        for m in range(accum):
            with ddp.no_sync() if ddp is not None and m < accum - 1 else contextlib.nullcontext():
                with autocast:
                    loss = step_model(inputs[m], targets[m]) / accum
                loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for _ in range(params["warmup_steps"]):
        step()
    ctx.sync()
    if ctx.is_cuda:
        torch.cuda.reset_peak_memory_stats(ctx.device)
    calls_before = calls[0] if calls else 0
    local = time_steps(ctx, step, params["steps"])
    _, step_s = reduce_over_ranks(ctx, local)  # a step ends when its slowest rank does
    return record(ctx, params, model, global_batch, accum, step_s, calls and (calls[0] - calls_before) / params["steps"])


def time_steps(ctx: Context, step: Callable[[], None], steps: int) -> list[float]:
    if ctx.is_cuda:
        events = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)]
        events[0].record()
        for i in range(steps):
            step()
            events[i + 1].record()
        events[-1].synchronize()
        return [a.elapsed_time(b) / 1e3 for a, b in zip(events, events[1:])]
    times = []
    for _ in range(steps):
        begin = time.perf_counter()
        step()
        times.append(time.perf_counter() - begin)
    return times


def record(ctx: Context, params: dict, model: GPT, global_batch: int, accum: int, step_s: list, calls_per_step) -> dict:
    seq_len, n = params["seq_len"], ctx.world_size
    reduced_element_bytes = 2 if params["grad_reduce_dtype"] == "bf16" else None
    grad_bytes = sum(p.numel() * (reduced_element_bytes or p.element_size()) for p in model.parameters() if p.requires_grad)
    memory = torch.tensor([peak_memory_bytes(ctx)], dtype=torch.float64, device=ctx.device)
    if n > 1:
        dist.all_reduce(memory, op=dist.ReduceOp.MAX)
    metrics = {
        "step_time_s": metric(step_s),
        "samples_per_s": metric([global_batch / t for t in step_s]),
        "tokens_per_s": metric([global_batch * seq_len / t for t in step_s]),
        "per_sample_gpu_time_s": metric([t / global_batch * n for t in step_s]),
        "peak_memory_bytes": metric([memory.item()]),
        "grad_allreduce_bytes": metric([float(grad_bytes if n > 1 else 0)]),
    }
    peak = dense_bf16_peak_tflops(torch.cuda.get_device_name(ctx.device)) if ctx.is_cuda else None
    if peak is not None:
        flops_per_step = model.flops_per_token(seq_len) * global_batch * seq_len
        metrics["mfu_fraction"] = metric([flops_per_step / t / (n * peak * 1e12) for t in step_s])
    if calls_per_step is not None:
        metrics["allreduce_calls_per_step_count"] = metric([float(calls_per_step)])
    return {
        "suite": "ddp",
        "params": {**params, "global_batch": global_batch, "grad_accum": accum, "num_params": model.num_params()},
        "world_size": n,
        "status": "ok",
        "metrics": metrics,
    }


def run(ctx: Context, params: dict, emit: Callable[[dict], None]) -> None:
    if ctx.is_cuda:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    global_batches = params.get("global_batches") or [params["micro_batch"] * params["grad_accum"] * ctx.world_size]
    base = {k: v for k, v in params.items() if k != "grad_accum"}
    for global_batch in global_batches:
        try:
            emit(run_config(ctx, base, global_batch))
        except torch.cuda.OutOfMemoryError as err:
            emit({
                "suite": "ddp",
                "params": {**base, "global_batch": global_batch},
                "world_size": ctx.world_size,
                "status": "oom",
                "error": f"out of memory at micro-batch {params['micro_batch']}: {str(err).splitlines()[0]}",
                "metrics": {},
            })
        finally:
            if ctx.is_cuda:
                torch.cuda.empty_cache()
