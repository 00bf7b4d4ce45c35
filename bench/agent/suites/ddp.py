"""DDP training suite: step time of a model preset under DistributedDataParallel on synthetic data.

A global batch is reached by micro-batches; all but the last run under `no_sync()`, so the
gradients cross the link once per step, as in seed 000. Each configuration (one global
batch size) is one record; one that runs out of memory is recorded as `oom` and the sweep
goes on.
"""

from __future__ import annotations

import contextlib
import gc
import resource
import time
from typing import Callable

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from bench.agent import copy_engine_allreduce, kernel_time, models, rank_errors
from bench.agent.gpu_peaks import dense_bf16_peak_tflops
from bench.agent.harness import Context, Sampling, reduce_over_ranks, sample_until_steady
from bench.common.polling import wait_until
from bench.common.stats import metric


def grad_accum_for(global_batch: int, world_size: int, micro_batch: int) -> int:
    """Micro-batches per rank per step; the planner has already refused a global batch that does not divide."""
    return global_batch // (world_size * micro_batch)


def wrap(ctx: Context, module: torch.nn.Module, params: dict) -> "DDP | None":
    """The model in DDP when there is a peer: one rank trains as a plain single-GPU script
    would, so the baseline carries no communication machinery at all."""
    if ctx.world_size == 1:
        return None
    return DDP(
        module,
        device_ids=[ctx.device.index] if ctx.is_cuda else None,
        bucket_cap_mb=params["bucket_cap_mb"],
        gradient_as_bucket_view=params["gradient_as_bucket_view"],
        static_graph=params["static_graph"],
    )


def gradient_reducer(ctx: Context, module: torch.nn.Module, params: dict) -> Callable:
    """The comm hook that reduces each bucket: NCCL's all-reduce (fp32, or bf16 through DDP's
    compress hook: half the bytes on the link, at bf16's precision) or the copy-engine one."""
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook, bf16_compress_hook

    if params["allreduce"] != "copy_engine":
        return bf16_compress_hook if params["grad_reduce_dtype"] == "bf16" else allreduce_hook
    missing = copy_engine_allreduce.peer_access_missing(ctx.device, ctx.world_size)
    if missing:
        rank_errors.end_launch(f"allreduce: copy_engine cannot run here: {missing}; use allreduce: nccl")
    try:
        reducer = copy_engine_allreduce.CopyEngineAllReduce(
            dist.group.WORLD, ctx.device, copy_engine_allreduce.max_bucket_numel(module, params["bucket_cap_mb"]),
            next(module.parameters()).dtype)
    except RuntimeError as err:
        rank_errors.end_launch(f"allreduce: copy_engine could not map its buffers between the GPUs "
                               f"({(str(err).splitlines() or ['symmetric memory failed'])[0]}); use allreduce: nccl")
    return reducer.hook


def install_comm_hook(ctx: Context, ddp: DDP, module: torch.nn.Module, params: dict) -> "list[int] | None":
    """The gradient reducer as DDP's comm hook, optionally counting bucket all-reduces (it proves
    no_sync() skips communication)."""
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    reduce = gradient_reducer(ctx, module, params)
    if not params["count_allreduce"] and reduce is allreduce_hook:
        return None  # DDP's built-in C++ all-reduce: no Python on the gradient path
    calls = [0]

    def hook(state, bucket):
        calls[0] += 1
        return reduce(state, bucket)

    ddp.register_comm_hook(None, hook)
    return calls if params["count_allreduce"] else None


def make_optimizer(name: str, module: torch.nn.Module, ctx: Context) -> torch.optim.Optimizer:
    """AdamW (fused on a GPU), or Adafactor: factored second moments, a few bytes per matrix row
    and column instead of AdamW's 8 bytes per weight, for models that fill a 24 GB card."""
    if name == "adafactor":
        return torch.optim.Adafactor(module.parameters(), lr=1e-3, foreach=True)
    return torch.optim.AdamW(module.parameters(), lr=1e-4, fused=ctx.is_cuda)


def autocast_for(ctx: Context, precision: str):
    if precision == "bf16":
        return torch.autocast(ctx.device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def peak_memory_bytes(ctx: Context) -> int:
    if ctx.is_cuda:
        return torch.cuda.max_memory_allocated(ctx.device)
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def throughput_metrics(
    step_s: list, global_batch: int, world_size: int,
    tokens_per_sample: "int | None", flops_per_sample: float, peak_tflops: "float | None",
) -> dict:
    """The per-step figures of one configuration, sample by sample.

    per_sample_gpu_time_s is seed 000's metric: step time / global batch x #GPUs (GPU-seconds
    per sample; equal across world sizes when scaling is perfect). MFU needs a known peak.
    """
    metrics = {
        "step_time_s": metric(step_s),
        "samples_per_s": metric([global_batch / t for t in step_s]),
        "per_sample_gpu_time_s": metric([t / global_batch * world_size for t in step_s]),
    }
    if tokens_per_sample is not None:
        metrics["tokens_per_s"] = metric([global_batch * tokens_per_sample / t for t in step_s])
    if peak_tflops is not None:
        metrics["mfu_fraction"] = metric([flops_per_sample * global_batch / t / (world_size * peak_tflops * 1e12) for t in step_s])
    return metrics


def run_config(ctx: Context, params: dict, global_batch: int, build: Callable = models.build) -> dict:
    accum = grad_accum_for(global_batch, ctx.world_size, params["micro_batch"])
    work = build(params, accum, ctx.device, ctx.rank)
    precision = autocast_for(ctx, params["precision"])
    ddp = wrap(ctx, work.module, params)
    calls = install_comm_hook(ctx, ddp, work.module, params) if ddp is not None else None
    # Compiling the DDP wrapper (not the inner model) lets dynamo split the graph at bucket
    # boundaries, so gradients are all-reduced while the backward pass goes on.
    step_model = torch.compile(ddp or work.module) if params["compile"] else (ddp or work.module)
    optimizer = make_optimizer(params["optimizer"], work.module, ctx)

    def step() -> None:
        for m, micro_batch in enumerate(work.micro_batches):
            with ddp.no_sync() if ddp is not None and m < accum - 1 else contextlib.nullcontext():
                with precision:
                    loss = step_model(*micro_batch) / accum
                loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    warmup_count = warm_up(ctx, step, params)
    if ctx.is_cuda:
        torch.cuda.reset_peak_memory_stats(ctx.device)
    calls_before = calls[0] if calls else 0
    local = sample_until_steady(ctx, lambda n: time_steps(ctx, step, n), params["steps"], Sampling.of(params))
    _, step_s = reduce_over_ranks(ctx, local)  # a step ends when its slowest rank does

    peak = dense_bf16_peak_tflops(torch.cuda.get_device_name(ctx.device)) if ctx.is_cuda else None
    metrics = throughput_metrics(step_s, global_batch, ctx.world_size, work.tokens_per_sample, work.flops_per_sample, peak)
    memory = torch.tensor([peak_memory_bytes(ctx)], dtype=torch.float64, device=ctx.device)
    if ctx.world_size > 1:
        dist.all_reduce(memory, op=dist.ReduceOp.MAX)
    metrics["peak_memory_bytes"] = metric([memory.item()])
    metrics["warmup_steps_count"] = metric([float(warmup_count)])
    # DDP reduces gradients in the weights' dtype (fp32 under autocast over fp32 weights) unless
    # the bf16 hook compresses them; one rank has no link to cross.
    reduced_element_bytes = 2 if params["grad_reduce_dtype"] == "bf16" else None
    grad_bytes = sum(p.numel() * (reduced_element_bytes or p.element_size()) for p in work.module.parameters() if p.requires_grad)
    metrics["grad_allreduce_bytes"] = metric([float(grad_bytes if ctx.world_size > 1 else 0)])
    if calls is not None:
        metrics["allreduce_calls_per_step_count"] = metric([(calls[0] - calls_before) / len(local)])
    metrics.update(profiled_breakdown(ctx, step, params["profile_steps"]))  # after the counts: its steps are extra
    num_params = sum(p.numel() for p in work.module.parameters())
    return {
        "suite": "ddp",
        "params": {**params, "global_batch": global_batch, "grad_accum": accum, "num_params": num_params,
                   "train_flops_per_sample": work.flops_per_sample},
        "world_size": ctx.world_size,
        "status": "ok",
        "metrics": metrics,
    }


WARMUP_WINDOW = 3  # consecutive warm-up steps that must agree before timing starts


def warm_up(ctx: Context, step: Callable[[], None], params: dict) -> int:
    """Untimed steps until the last WARMUP_WINDOW step times lie within warmup_tolerance of their
    median on every rank: at least warmup_steps, at most warmup_max_steps. The count run.

    The first steps of a fresh process are several times slower (allocator, caches, lazy
    initialisation); a fixed count that is too short leaves them among the timed samples."""
    least, most = params["warmup_steps"], max(params["warmup_steps"], params["warmup_max_steps"])
    times: list[float] = []
    while len(times) < most:
        begin = time.perf_counter()
        step()
        ctx.sync()
        times.append(time.perf_counter() - begin)
        if len(times) >= least and _steady_everywhere(ctx, times[-WARMUP_WINDOW:], params["warmup_tolerance"]):
            break
    return len(times)


def _steady_everywhere(ctx: Context, window: list[float], tolerance: float) -> bool:
    median = sorted(window)[len(window) // 2]
    steady = len(window) == WARMUP_WINDOW and all(abs(t / median - 1) <= tolerance for t in window)
    if ctx.world_size == 1:
        return steady
    agreed = torch.tensor([int(steady)], dtype=torch.int32, device=ctx.device)
    dist.all_reduce(agreed, op=dist.ReduceOp.MIN)  # every rank stops warming up at the same step
    return bool(agreed.item())


def profiled_breakdown(ctx: Context, step: Callable[[], None], steps: int) -> dict:
    """Kernel time by class and exposed communication per profiled step (kernel_time), the
    slowest rank's figure per step; a GPU-only view: on the CPU there are no kernels to class."""
    if not ctx.is_cuda or steps == 0:
        return {}
    per_step = kernel_time.profile_steps(step, steps, ctx.device)
    if len(per_step) != steps:  # the profiler's trace did not carry the step marks: no figures rather than wrong ones
        return {}
    names = list(kernel_time.METRICS.values())
    values = torch.tensor([[figures[name] for name in names] for figures in per_step], dtype=torch.float64, device=ctx.device)
    if ctx.world_size > 1:
        dist.all_reduce(values, op=dist.ReduceOp.MAX)
    return {name: metric(values[:, i].tolist()) for i, name in enumerate(names)}


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


OOM_AGREEMENT_S = 60.0  # a peer that also ran out of memory says so within a micro-batch or two


def every_rank_out_of_memory(ctx: Context, global_batch: int) -> bool:
    """Whether every rank ran out of memory in this configuration; then they can record it and go on.

    Asked through the rendezvous store, not a collective: a peer that did not run out of memory
    is waiting in one, and this rank's collectives would be matched against its pending ones.
    """
    store = dist.distributed_c10d._get_default_store()
    key = f"ddpbench/oom/{global_batch}"
    store.add(key, 1)
    return wait_until(lambda: store.add(key, 0) >= ctx.world_size, OOM_AGREEMENT_S)


def run(ctx: Context, params: dict, emit: Callable[[dict], None], build: Callable = models.build) -> None:
    """Every global batch size of the plan entry; `build` makes the workload (models.build)."""
    if ctx.is_cuda:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    global_batches = params.get("global_batches") or [params["micro_batch"] * params["grad_accum"] * ctx.world_size]
    base = {k: v for k, v in params.items() if k != "grad_accum"}
    for global_batch in global_batches:
        try:
            emit(run_config(ctx, base, global_batch, build))
        except torch.cuda.OutOfMemoryError as err:
            if ctx.world_size > 1 and not every_rank_out_of_memory(ctx, global_batch):
                shared = f" (is another process using GPU {ctx.device.index}?)" if ctx.is_cuda else ""
                rank_errors.end_launch(
                    f"rank {ctx.rank} ran out of memory at micro_batch {params['micro_batch']} (global batch {global_batch}) "
                    f"and its peers did not{shared}; the peers cannot go on without it, so this launch's later "
                    "configurations did not run; lower micro_batch")
            emit({
                "suite": "ddp",
                "params": {**base, "global_batch": global_batch,
                           "grad_accum": grad_accum_for(global_batch, ctx.world_size, params["micro_batch"])},
                "world_size": ctx.world_size,
                "status": "oom",
                "error": f"out of memory at micro_batch {params['micro_batch']} (global batch {global_batch}): "
                         f"{(str(err).splitlines() or ['CUDA out of memory'])[0]}; lower micro_batch",
                "metrics": {},
            })
        finally:
            # DDP, its reducer and the model hold one another in reference cycles: without a
            # collection this configuration's model, gradients and optimizer states would still
            # be there when the next one is built, and at exit after the process group is gone.
            gc.collect()
            if ctx.is_cuda:
                torch.cuda.empty_cache()
