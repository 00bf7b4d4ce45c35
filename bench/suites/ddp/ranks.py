"""The ddp suite's ranks: step time of a model preset under DistributedDataParallel on synthetic data.

A global batch is reached by micro-batches; all but the last run under `no_sync()`, so the
gradients cross the link once per step, as in seed 000. Each configuration (one global
batch size) is one record; one that runs out of memory is recorded as `oom` and the sweep
goes on. A launch sets its model up once (DDP, CUDA graphs or compiled code, optimizer) and
every global batch trains that model on as many micro-batches as it needs: the micro-batch
shape is the same, so nothing is captured or compiled again. One that ran out of memory is
freed, and the next global batch sets up afresh.
"""

from __future__ import annotations

import contextlib
import gc
import resource
import time
from dataclasses import dataclass
from typing import Callable

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from bench.agent import copy_engine_allreduce, kernel_time, rank_errors, timeline
from bench.agent.harness import (
    Context, every_rank, max_over_ranks, reduce_over_ranks, run_record, sample_until_steady, time_each_call,
)
from bench.common.gpu_peaks import dense_bf16_peak_tflops
from bench.common.polling import wait_until
from bench.common.stats import metric
from bench.models import workload
from bench.suites.ddp.params import Params
from bench.suites.ddp.warmup import WARMUP_WINDOW, least_warmup_steps


def grad_accum_for(global_batch: int, world_size: int, micro_batch: int) -> int:
    """Micro-batches per rank per step; the planner has already refused a global batch that does not divide."""
    return global_batch // (world_size * micro_batch)


def wrap(ctx: Context, module: torch.nn.Module, params: Params) -> "DDP | None":
    """The model in DDP when there is a peer: one rank trains as a plain single-GPU script
    would, so the baseline carries no communication machinery at all."""
    if ctx.world_size == 1:
        return None
    return DDP(
        module,
        device_ids=[ctx.device.index] if ctx.is_cuda else None,
        bucket_cap_mb=params.bucket_cap_mb,
        gradient_as_bucket_view=params.gradient_as_bucket_view,
        static_graph=params.static_graph,
    )


def gradient_reducer(ctx: Context, module: torch.nn.Module, params: Params) -> Callable:
    """The comm hook that reduces each bucket: NCCL's all-reduce (fp32, or bf16 through DDP's
    compress hook: half the bytes on the link, at bf16's precision) or the copy-engine one."""
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook, bf16_compress_hook

    if params.allreduce != "copy_engine":
        return bf16_compress_hook if params.grad_reduce_dtype == "bf16" else allreduce_hook
    missing = copy_engine_allreduce.peer_access_missing(ctx.device, ctx.world_size)
    if missing:
        rank_errors.end_launch(f"allreduce: copy_engine cannot run here: {missing}; use allreduce: nccl")
    try:
        reducer = copy_engine_allreduce.CopyEngineAllReduce(
            dist.group.WORLD, ctx.device, copy_engine_allreduce.max_bucket_numel(module, params.bucket_cap_mb),
            next(module.parameters()).dtype)
    except RuntimeError as err:
        rank_errors.end_launch(f"allreduce: copy_engine could not map its buffers between the GPUs "
                               f"({(str(err).splitlines() or ['symmetric memory failed'])[0]}); use allreduce: nccl")
    return reducer.hook


def install_comm_hook(ctx: Context, ddp: DDP, module: torch.nn.Module, params: Params) -> "list[int] | None":
    """The gradient reducer as DDP's comm hook, optionally counting bucket all-reduces (it proves
    no_sync() skips communication)."""
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    reduce = gradient_reducer(ctx, module, params)
    if not params.count_allreduce and reduce is allreduce_hook:
        return None  # DDP's built-in C++ all-reduce: no Python on the gradient path
    calls = [0]

    def hook(state, bucket):
        calls[0] += 1
        return reduce(state, bucket)

    ddp.register_comm_hook(None, hook)
    return calls if params.count_allreduce else None


def make_optimizer(name: str, module: torch.nn.Module, ctx: Context) -> torch.optim.Optimizer:
    """AdamW (fused on a GPU), or Adafactor: factored second moments, a few bytes per matrix row
    and column instead of AdamW's 8 bytes per weight, for models that fill a 24 GB card."""
    if name == "adafactor":
        return torch.optim.Adafactor(module.parameters(), lr=1e-3, foreach=True)
    return torch.optim.AdamW(module.parameters(), lr=1e-4, fused=ctx.is_cuda)


def autocast_for(ctx: Context, precision: str, cache_enabled: bool = True):
    if precision == "bf16":
        return torch.autocast(ctx.device.type, dtype=torch.bfloat16, cache_enabled=cache_enabled)
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


@dataclass
class Training:
    """One configuration set up to train: the model as stepped (in DDP and compiled where asked),
    its optimizer, and the bucket all-reduces counted so far where they are counted."""

    work: workload.Workload
    ddp: "DDP | None"
    step_model: Callable
    optimizer: torch.optim.Optimizer
    precision: contextlib.AbstractContextManager
    accum: int
    allreduce_calls: "list[int] | None"
    recorder: timeline.StepRecorder
    grads_kept: bool = False  # zeroed in place between steps, never freed (graph_module says why)
    steps_taken: int = 0

    def step(self, communicate: bool = True) -> None:
        """One optimizer step over `accum` micro-batches; gradients cross the link on the last only
        (on none without `communicate`: the timeline's steps without all-reduces)."""
        self.recorder.step(self.accum)
        for m, micro_batch in enumerate(self.work.micro_batches[:self.accum]):
            synced = communicate and m == self.accum - 1
            with self.ddp.no_sync() if self.ddp is not None and not synced else contextlib.nullcontext():
                self.recorder.mark("forward")
                with self.precision:
                    loss = self.step_model(*micro_batch) / self.accum
                self.recorder.mark("backward")
                loss.backward()
        self.recorder.mark("optimizer")
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=not self.grads_kept)
        self.recorder.mark("end")
        self.steps_taken += 1


def set_up(ctx: Context, params: Params, accum: int, build: Callable, wrap_model: Callable = wrap) -> Training:
    """The workload built (by `build`), graphed, wrapped (by `wrap_model`: DDP where the launch has
    peers), compiled, with its optimizer and its timeline's recorder."""
    work = build(params, accum, ctx.device, ctx.rank)
    # A captured graph keeps the autocast casts it was captured with, and may not hold
    # autocast's cache of cast weights (make_graphed_callables refuses it).
    precision = autocast_for(ctx, params.precision, cache_enabled=not params.cuda_graphs)
    if params.cuda_graphs:
        graph_module(work, precision)
    ddp = wrap_model(ctx, work.module, params)
    calls = install_comm_hook(ctx, ddp, work.module, params) if ddp is not None else None
    # Compiling the DDP wrapper (not the inner model) lets dynamo split the graph at bucket
    # boundaries, so gradients are all-reduced while the backward pass goes on.
    step_model = torch.compile(ddp or work.module) if params.compile else (ddp or work.module)
    optimizer = make_optimizer(params.optimizer, work.module, ctx)
    recorder = timeline.StepRecorder(ctx.device, list(work.module.parameters()), lambda p: reduced_element_bytes(p, params),
                                     int(params.bucket_cap_mb * 1024 * 1024))
    return Training(work, ddp, step_model, optimizer, precision, accum, calls, recorder, grads_kept=params.cuda_graphs)


def graph_module(work: workload.Workload, precision: contextlib.AbstractContextManager) -> None:
    """The module's forward and backward replayed from CUDA graphs (its forward becomes the graphed one).

    The replayed backward hands autograd the gradients in the graph's own buffers, and a parameter
    without a .grad would take such a buffer as its .grad, which the next micro-batch's replay
    overwrites (accumulation would double the last micro-batch's gradient): so the gradients get
    their own tensors here, before DDP makes them views of its buckets, and are zeroed in place."""
    with precision:
        torch.cuda.make_graphed_callables(work.module, tuple(t.clone() for t in work.micro_batches[0]))
    for param in work.module.parameters():
        if param.requires_grad:
            param.grad = torch.zeros_like(param)


def run_config(ctx: Context, params: Params, point: dict, training: Training, setup_s: float) -> dict:
    """One global batch size (`point`: its record's params so far) on the launch's `training`,
    set up in `setup_s` for it (0 when an earlier global batch did): warm up, time the steps,
    then count and profile; its record."""
    global_batch = point["global_batch"]
    training.accum = point["grad_accum"]
    least = least_warmup_steps(params.warmup_steps, training.steps_taken, ddp_on_gpu=training.ddp is not None and ctx.is_cuda)
    warmup_count, warmup_s = seconds_of(ctx, lambda: warm_up(ctx, training.step, params, least))
    if ctx.is_cuda:
        torch.cuda.reset_peak_memory_stats(ctx.device)
    calls_before = training.allreduce_calls[0] if training.allreduce_calls else 0
    training.recorder.recording = True
    local = sample_until_steady(ctx, lambda n: time_each_call(ctx, training.step, n), params.steps, params)
    training.recorder.recording = False
    _, step_s = reduce_over_ranks(ctx, local)  # a step ends when its slowest rank does
    without_allreduce = (lambda: training.step(communicate=False)) if training.ddp is not None else None
    recorded = timeline.record(ctx, training.recorder, step_s, without_allreduce, params.timeline_steps)

    work = training.work
    peak = dense_bf16_peak_tflops(torch.cuda.get_device_name(ctx.device)) if ctx.is_cuda else None
    metrics = throughput_metrics(step_s, global_batch, ctx.world_size, work.tokens_per_sample, work.flops_per_sample, peak)
    metrics["peak_memory_bytes"] = metric(max_over_ranks(ctx, [float(peak_memory_bytes(ctx))]))
    metrics["warmup_steps_count"] = metric([float(warmup_count)])
    one_rank = ctx.world_size == 1  # no link to cross
    metrics["grad_allreduce_bytes"] = metric([float(0 if one_rank else grad_allreduce_bytes(work.module, params))])
    if training.allreduce_calls is not None:
        metrics["allreduce_calls_per_step_count"] = metric([(training.allreduce_calls[0] - calls_before) / len(local)])
    breakdown, profile_s = seconds_of(ctx, lambda: profiled_breakdown(ctx, training.step, params.profile_steps))
    metrics.update(breakdown)  # after the counts: its steps are extra
    # Where the configuration's time went beside its timed steps, on the slowest rank.
    for name, seconds in zip(("setup_s", "warmup_s", "profile_s"), max_over_ranks(ctx, [setup_s, warmup_s, profile_s])):
        metrics[name] = metric([seconds])
    num_params = sum(p.numel() for p in work.module.parameters())
    record = run_record(ctx, "ddp", {**point, "num_params": num_params, "train_flops_per_sample": work.flops_per_sample},
                        metrics)
    record["timeline"] = recorded
    return record


def seconds_of(ctx: Context, work: Callable):
    """work()'s result and the seconds it took on this rank, its queued GPU work included."""
    begin = time.perf_counter()
    result = work()
    ctx.sync()
    return result, time.perf_counter() - begin


def reduced_element_bytes(param: torch.Tensor, params: Params) -> int:
    """Bytes per gradient element on the link: DDP reduces gradients in the weights' dtype (fp32
    under autocast over fp32 weights) unless the bf16 hook compresses them."""
    return 2 if params.grad_reduce_dtype == "bf16" else param.element_size()


def grad_allreduce_bytes(module: torch.nn.Module, params: Params) -> int:
    """Bytes of one step's gradient all-reduce."""
    return sum(p.numel() * reduced_element_bytes(p, params) for p in module.parameters() if p.requires_grad)


def warm_up(ctx: Context, step: Callable[[], None], params: Params, least: int) -> int:
    """Untimed steps until the last WARMUP_WINDOW step times lie within warmup_tolerance of their
    median on every rank: at least `least`, at most warmup_max_steps. The count run.

    The first steps of a fresh process are several times slower (allocator, caches, lazy
    initialisation); a fixed count that is too short leaves them among the timed samples."""
    most = max(least, params.warmup_max_steps)
    times: list[float] = []
    while len(times) < most:
        begin = time.perf_counter()
        step()
        ctx.sync()
        times.append(time.perf_counter() - begin)
        if len(times) >= least and _steady_everywhere(ctx, times[-WARMUP_WINDOW:], params.warmup_tolerance):
            break
    return len(times)


def _steady_everywhere(ctx: Context, window: list[float], tolerance: float) -> bool:
    median = sorted(window)[len(window) // 2]
    steady = len(window) == WARMUP_WINDOW and all(abs(t / median - 1) <= tolerance for t in window)
    return every_rank(ctx, steady)  # every rank stops warming up at the same step


def profiled_breakdown(ctx: Context, step: Callable[[], None], steps: int) -> dict:
    """Kernel time by class and exposed communication per profiled step (kernel_time), the
    slowest rank's figure per step; a GPU-only view: on the CPU there are no kernels to class."""
    if not ctx.is_cuda or steps == 0:
        return {}
    per_step = kernel_time.profile_steps(step, steps, ctx.device)
    if len(per_step) != steps:  # the profiler's trace did not carry the step marks: no figures rather than wrong ones
        return {}
    names = list(kernel_time.METRICS.values())
    slowest = max_over_ranks(ctx, [float(figures[name]) for figures in per_step for name in names])  # step by step
    return {name: metric(slowest[i::len(names)]) for i, name in enumerate(names)}


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


def run(ctx: Context, entry: dict, emit: Callable[[dict], None], build: Callable = workload.build) -> None:
    """Every global batch size of the plan entry; `build` makes the workload (workload.build),
    with the micro-batches of the largest global batch."""
    params = Params.of(entry)
    if ctx.is_cuda:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    echoed = {k: v for k, v in entry.items() if k != "grad_accum"}  # a record's grad_accum is its global batch's
    global_batches = params.global_batches or [params.micro_batch * params.grad_accum * ctx.world_size]
    most_accum = max(grad_accum_for(global_batch, ctx.world_size, params.micro_batch) for global_batch in global_batches)
    training: "Training | None" = None
    for global_batch in global_batches:
        point = {**echoed, "global_batch": global_batch, "grad_accum": grad_accum_for(global_batch, ctx.world_size, params.micro_batch)}
        try:
            setup_s = 0.0
            if training is None:
                training, setup_s = seconds_of(ctx, lambda: set_up(ctx, params, most_accum, build))
            emit(run_config(ctx, params, point, training, setup_s))
        except torch.cuda.OutOfMemoryError as err:
            training = None
            if ctx.world_size > 1 and not every_rank_out_of_memory(ctx, global_batch):
                shared = f" (is another process using GPU {ctx.device.index}?)" if ctx.is_cuda else ""
                rank_errors.end_launch(
                    f"rank {ctx.rank} ran out of memory at micro_batch {params.micro_batch} (global batch {global_batch}) "
                    f"and its peers did not{shared}; the peers cannot go on without it, so this launch's later "
                    "configurations did not run; lower micro_batch")
            emit(run_record(ctx, "ddp", point, {}, status="oom",
                            error=f"out of memory at micro_batch {params.micro_batch} (global batch {global_batch}): "
                                  f"{(str(err).splitlines() or ['CUDA out of memory'])[0]}; lower micro_batch"))
        if training is None:
            free(ctx)  # what ran out of memory, before the next global batch sets up
    training = None
    free(ctx)


def free(ctx: Context) -> None:
    """DDP, its reducer and the model hold one another in reference cycles: without a collection
    a model that ran out of memory, its gradients and optimizer states would still be there when
    the next one is built, and at exit after the process group is gone."""
    gc.collect()
    if ctx.is_cuda:
        torch.cuda.empty_cache()
