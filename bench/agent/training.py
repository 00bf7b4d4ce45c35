"""The training loop every training suite's ranks run (ddp, fsdp): step time of a model preset on
synthetic data, a global batch reached by micro-batches with the gradients synchronised on the last
only, as gradient accumulation does.

Each configuration (one global batch size) is one record; one that runs out of memory is recorded as
`oom` and the sweep goes on. A launch sets its model up once (wrapped, compiled or captured,
optimizer) and every global batch trains that model on as many micro-batches as it needs: the
micro-batch shape is the same, so nothing is captured or compiled again. One that ran out of memory
is freed, and the next global batch sets up afresh.

What differs between the suites is their Strategy: how the model is wrapped, what keeps the
gradients local on all but the last micro-batch, and what each step's communication is counted as.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import inspect
import json
import resource
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
import torch.distributed as dist

from bench.agent import kernel_time, rank_errors, timeline
from bench.agent.harness import (
    Context, every_rank, max_over_ranks, reduce_over_ranks, run_record, sample_until_steady, time_each_call,
)
from bench.common.gpu_peaks import dense_bf16_peak_tflops
from bench.common.polling import wait_until
from bench.common.stats import metric
from bench.models import workload
from bench.suites.training import PRIMING_STEPS, WARMUP_WINDOW, TrainingParams, grad_accum_for, least_warmup_steps
from bench.suites.training import pacing


class Strategy:
    """How a suite distributes the training of one model: one instance per set-up. Override what differs."""

    # Whether the first steps synchronise with the GPU as DDP's reducer does (least_warmup_steps' rule).
    synced_warmup: bool = False

    def precision(self, ctx: Context, params: TrainingParams) -> contextlib.AbstractContextManager:
        """The context each micro-batch's forward runs in: bf16 autocast over fp32 weights, or none."""
        return autocast_for(ctx, params.precision)

    def wrap(self, ctx: Context, work: workload.Workload, params: TrainingParams,
             precision: contextlib.AbstractContextManager) -> torch.nn.Module:
        """The module each micro-batch steps; by default the plain model."""
        return work.module

    def compiled(self, wrapped: torch.nn.Module) -> Callable:
        """What torch.compile makes of the wrapped model for `compile: true`: the wrapper as a whole (of
        DDP, so that dynamo splits the graph at bucket boundaries and the gradients are all-reduced while
        the backward pass goes on)."""
        return torch.compile(wrapped)

    def local_gradients(self) -> contextlib.AbstractContextManager:
        """The context all but the last micro-batch of a step run in: their gradients stay on the rank."""
        return contextlib.nullcontext()

    def grads_kept(self, params: TrainingParams) -> bool:
        """Whether gradients are zeroed in place between steps instead of freed."""
        return False

    def before_timing(self) -> None:
        """Called right before a configuration's timed steps (to reset what counts per step)."""

    def communication(self, ctx: Context, training: "Training", params: TrainingParams, steps_run: int) -> dict:
        """What a step of the configuration moved, as metrics, after its timed steps: `steps_run` steps since
        before_timing() (the timed ones and those priming them; untimed steps may run in here)."""
        return {}

    def recorder(self, ctx: Context, work: workload.Workload, params: TrainingParams) -> "timeline.StepRecorder | None":
        """What records the timed steps' timeline (bench/agent/timeline.py), or None for no timeline."""
        return None

    def timeline(self, ctx: Context, training: "Training", step_s: list, params: TrainingParams) -> "dict | None":
        """The run's timeline (bundle schema: run.timeline) from its recorder, after its timed steps
        (untimed steps may run)."""
        return None


@dataclass
class Training:
    """One configuration set up to train: the model as stepped (wrapped and compiled where asked),
    its optimizer, and the strategy that wrapped it."""

    work: workload.Workload
    strategy: Strategy
    step_model: Callable
    optimizer: torch.optim.Optimizer
    precision: contextlib.AbstractContextManager
    accum: int
    recorder: "timeline.StepRecorder | None" = None
    grads_kept: bool = False  # zeroed in place between steps, never freed
    steps_taken: int = 0
    step_s: "tuple[int, float] | None" = None  # (global batch, its median step time) of the last configuration timed

    def step(self, communicate: bool = True) -> None:
        """One optimizer step over `accum` micro-batches; gradients cross the link on the last only
        (on none without `communicate`: the timeline's steps without communication)."""
        mark = self.recorder.mark if self.recorder is not None else _unrecorded
        if self.recorder is not None:
            self.recorder.step(self.accum)
        for m, micro_batch in enumerate(self.work.micro_batches[:self.accum]):
            synced = communicate and m == self.accum - 1
            with self.strategy.local_gradients() if not synced else contextlib.nullcontext():
                mark("forward")
                with self.precision:
                    loss = self.step_model(*micro_batch) / self.accum
                mark("backward")
                loss.backward()
        mark("optimizer")
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=not self.grads_kept)
        mark("end")
        self.steps_taken += 1


def _unrecorded(mark: str) -> None:
    """A step's mark where no timeline is recorded."""


def imports(entry: dict) -> "tuple[str, ...]":
    """What a training entry's ranks import only when it asks for them: torch's compiler stack for
    `compile: true` (seconds; torch.compile would import it in the model's set-up)."""
    return ("torch._dynamo",) if entry.get("compile") else ()


def make_optimizer(name: str, module: torch.nn.Module, ctx: Context, compiled: bool = False) -> torch.optim.Optimizer:
    """AdamW (fused on a GPU), or Adafactor: factored second moments, a few bytes per matrix row
    and column instead of AdamW's 8 bytes per weight, for models that fill a 24 GB card. Without
    torch.compile, torch's own class without its compiler guards (eager)."""
    kind = torch.optim.Adafactor if name == "adafactor" else torch.optim.AdamW
    if not compiled:
        kind = eager(kind)
    if name == "adafactor":
        return kind(module.parameters(), lr=1e-3, foreach=True)
    return kind(module.parameters(), lr=1e-4, fused=ctx.is_cuda)


@functools.cache  # one class an optimizer: torch patches each class's step for the profiler once
def eager(optimizer: "type[torch.optim.Optimizer]") -> "type[torch.optim.Optimizer]":
    """The optimizer class with its step, zero_grad and add_param_group as written, without the
    wrappers that keep torch.compile out of them. Those import torch's whole compiler stack
    (torch._dynamo, inductor, sympy: seconds of a launch's start-up) on first call and change
    nothing outside compiled code: the step's wrapper only turns gradients off, as here."""
    base = torch.optim.Optimizer

    class Eager(optimizer):
        def add_param_group(self, param_group: dict) -> None:
            inspect.unwrap(base.add_param_group)(self, param_group)

        def zero_grad(self, set_to_none: bool = True) -> None:
            inspect.unwrap(base.zero_grad)(self, set_to_none)

        @torch.no_grad()
        def step(self, closure=None):
            return inspect.unwrap(optimizer.step)(self, closure)

    Eager.__name__ = Eager.__qualname__ = optimizer.__name__  # the profiler's step and zero_grad labels name it
    return Eager


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

    per_sample_gpu_time_s is the per-sample time x #GPUs: step time / global batch x #GPUs (GPU-seconds
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


def set_up(ctx: Context, params: TrainingParams, accum: int, build: Callable, strategy: Strategy) -> Training:
    work = build(params, accum, ctx.device, ctx.rank)
    precision = strategy.precision(ctx, params)
    wrapped = strategy.wrap(ctx, work, params, precision)
    step_model = strategy.compiled(wrapped) if params.compile else wrapped
    optimizer = make_optimizer(params.optimizer, work.module, ctx, params.compile)
    return Training(work, strategy, step_model, optimizer, precision, accum, strategy.recorder(ctx, work, params),
                    grads_kept=strategy.grads_kept(params))


def run_config(ctx: Context, params: TrainingParams, point: dict, training: Training, setup_s: float) -> dict:
    """One global batch size (`point`: its record's params so far) on the launch's `training`,
    set up in `setup_s` for it (0 when an earlier global batch did): warm up, time the steps,
    then count and profile; its record."""
    global_batch = point["global_batch"]
    training.accum = point["grad_accum"]
    strategy = training.strategy
    least = least_warmup_steps(params.warmup_steps, training.steps_taken, synced_on_gpu=strategy.synced_warmup and ctx.is_cuda)
    first = ("compile", f"compiling the model (torch.compile) in the first step of global batch {global_batch}") if params.compile else (
        "step", f"the first step of global batch {global_batch}")

    def say(last_s: "float | None") -> None:
        known = last_s if last_s is not None else training.step_s and training.step_s[1]  # the last configuration's
        ctx.say(*(first if training.steps_taken == 0 else ("step", f"warming up global batch {global_batch}")), known)

    ctx.mark("warmup")
    (warmup_count, last_s), warmup_s = seconds_of(ctx, lambda: warm_up(ctx, training.step, params, least, say))
    ctx.mark("other")
    steps, cut = steps_that_fit(ctx, params, max_over_ranks(ctx, [last_s])[0])
    if cut:
        if not steps:
            return run_record(ctx, point, {}, status="failed", error=f"not timed: {cut}")
        ctx.notes.append(f"timed {steps} of its {params.steps} steps: {cut}; what was measured is kept")
    # Profiled before the timed steps: whether the host paces the step decides how long they sample.
    profiling = profiled_steps(ctx, params)
    if profiling:
        ctx.say("step", f"profiling global batch {global_batch}", last_s or None)
    ctx.mark("instruments")
    breakdown, profile_s = seconds_of(ctx, lambda: profiled_breakdown(ctx, training.step, profiling))
    ctx.mark("other")
    kernels_s = busy_kernels_s(breakdown) if profiling else first_launch_kernels_s(ctx, point)
    if ctx.is_cuda:
        torch.cuda.reset_peak_memory_stats(ctx.device)
    strategy.before_timing()
    steps_before = training.steps_taken
    if training.recorder is not None:
        training.recorder.recording = True
    ctx.say("step", f"timing {steps} steps of global batch {global_batch}", last_s or None)
    ctx.mark("measured")
    # A multi-rank step is scaled against its 1-rank baseline: both aim at the tighter target.
    local = sample_until_steady(ctx, lambda n: timed_steps(ctx, training, n), steps, params, scaled=True,
                                host_paced=None if kernels_s is None else lambda samples: paced_by_host(ctx, kernels_s, samples))
    ctx.mark("other")
    steps_run = training.steps_taken - steps_before
    if training.recorder is not None:
        training.recorder.recording = False
    _, step_s = reduce_over_ranks(ctx, local)  # a step ends when its slowest rank does
    training.step_s = (global_batch, sorted(step_s)[len(step_s) // 2])
    ctx.mark("instruments")
    recorded = strategy.timeline(ctx, training, step_s, params)

    work = training.work
    peak = dense_bf16_peak_tflops(torch.cuda.get_device_name(ctx.device)) if ctx.is_cuda else None
    metrics = throughput_metrics(step_s, global_batch, ctx.world_size, work.tokens_per_sample, work.flops_per_sample, peak)
    metrics["peak_memory_bytes"] = metric(max_over_ranks(ctx, [float(peak_memory_bytes(ctx))]))
    metrics["warmup_steps_count"] = metric([float(warmup_count)])
    metrics.update(strategy.communication(ctx, training, params, steps_run))
    ctx.mark("other")
    metrics.update(breakdown)
    # Where the configuration's time went beside its timed steps, on the slowest rank.
    for name, seconds in zip(("setup_s", "warmup_s", "profile_s"), max_over_ranks(ctx, [setup_s, warmup_s, profile_s])):
        metrics[name] = metric([seconds])
    record = run_record(ctx, {**point, "num_params": num_params(work.module), "train_flops_per_sample": work.flops_per_sample},
                        metrics)
    if recorded is not None:
        record["timeline"] = recorded
    return record


def num_params(module: torch.nn.Module) -> int:
    """The model's parameters, counted once (tied ones once), whole even where a rank holds a shard."""
    return sum(p.numel() for p in module.parameters())


def seconds_of(ctx: Context, work: Callable):
    """work()'s result and the seconds it took on this rank, its queued GPU work included."""
    begin = time.perf_counter()
    result = work()
    ctx.sync()
    return result, time.perf_counter() - begin


def warm_up(ctx: Context, step: Callable[[], None], params: TrainingParams, least: int,
            say: Callable[["float | None"], None] = lambda last_s: None) -> tuple[int, float]:
    """Untimed steps until the last WARMUP_WINDOW step times lie within warmup_tolerance of their
    median on every rank: at least `least`, at most warmup_max_steps. The count run, and this rank's
    last step time (0 where none ran); say(the last step's seconds) before each step.

    The first steps of a fresh process are several times slower (allocator, caches, lazy
    initialisation); a fixed count that is too short leaves them among the timed samples."""
    most = max(least, params.warmup_max_steps)
    times: list[float] = []
    while len(times) < most:
        say(times[-1] if times else None)
        begin = time.perf_counter()
        step()
        ctx.sync()
        times.append(time.perf_counter() - begin)
        if len(times) >= least and _steady_everywhere(ctx, times[-WARMUP_WINDOW:], params.warmup_tolerance):
            break
        # The timed and profiled steps must still fit before the launch's deadline, with two steps to
        # spare: time them unsettled. Judged from the second step on: a fresh process's first step is
        # several times slower (3.25 s against 30 ms for a tiny model on the CPU) and would cut 10,000
        # steps to 400.
        recent = sorted(times[1:][-WARMUP_WINDOW:])
        if recent and not ctx.time_for(1.5 * (params.steps + extra_steps(ctx, params) + 2) * recent[-1]):
            ctx.notes.append(f"warm-up stopped after {len(times)} steps at the launch's timeout_s before the step times "
                             f"settled within warmup_tolerance {params.warmup_tolerance:g}: the timed steps may include warm-up")
            break
    return len(times), times[-1] if times else 0.0


def timed_steps(ctx: Context, training: Training, count: int) -> list[float]:
    """Seconds of each of `count` steps run back to back, after the steps that prime them on a GPU
    (untimed and unrecorded: PRIMING_STEPS says why)."""
    for _ in range(priming_steps(ctx)):
        with training.recorder.paused() if training.recorder is not None else contextlib.nullcontext():
            training.step()
    return time_each_call(ctx, training.step, count)


def priming_steps(ctx: Context) -> int:
    """The untimed steps before each batch of timed ones: on a GPU, to fill its queue; none on a CPU."""
    return PRIMING_STEPS if ctx.is_cuda else 0


def profiled_steps(ctx: Context, params: TrainingParams) -> int:
    """The steps a configuration runs under the profiler: on a GPU, unless an earlier launch profiled it."""
    return params.profile_steps if ctx.is_cuda and not ctx.profiled_records else 0


def extra_steps(ctx: Context, params: TrainingParams) -> int:
    """The steps a configuration runs past its timed ones: those priming them, profiled, and the timeline's
    without all-reduce (ddp, where a rank has peers)."""
    return priming_steps(ctx) + profiled_steps(ctx, params) + (getattr(params, "timeline_steps", 0) if ctx.world_size > 1 else 0)


def steps_that_fit(ctx: Context, params: TrainingParams, step_s: float) -> tuple[int, str]:
    """(the timed steps that fit before the launch's deadline with the steps after them, at most
    params.steps; why fewer, in words, or ""). A step of step_s is counted a quarter longer: steps
    vary, and the ranks cannot stop one halfway."""
    left = ctx.seconds_left()
    if left is None:
        return params.steps, ""
    fit = int(left / (1.25 * step_s)) - extra_steps(ctx, params) if step_s > 0 else params.steps
    if fit >= params.steps:
        return params.steps, ""
    return max(fit, 0), (f"one step takes about {step_s:.3g} s and {max(left, 0):.0f} s were left of the launch's timeout_s; "
                         "raise timeout_s, or trim the entry (fewer steps, smaller batches)")


def time_for_config(ctx: Context, params: TrainingParams, training: "Training", global_batch: int) -> str:
    """"" where a configuration's least steps (a warm-up step, its timed ones and those after) fit
    before the launch's deadline at the step time the last configuration measured, scaled to its
    global batch; else why not, in words. Nothing is known before the first configuration is timed."""
    if training.step_s is None:
        return ""
    left = ctx.seconds_left()
    measured_batch, measured_s = training.step_s
    step_s = measured_s * global_batch / measured_batch
    steps = 1 + params.steps + extra_steps(ctx, params)
    if left is None or steps * step_s <= left:
        return ""
    return (f"not run: a step of global batch {global_batch} would take about {step_s:.3g} s ({measured_s:.3g} s at global "
            f"batch {measured_batch}), and its {steps} steps do not fit in the {max(left, 0):.0f} s the launch's timeout_s "
            "left; raise timeout_s, or trim the entry (fewer steps, smaller batches)")


def _steady_everywhere(ctx: Context, window: list[float], tolerance: float) -> bool:
    median = sorted(window)[len(window) // 2]
    steady = len(window) == WARMUP_WINDOW and all(abs(t / median - 1) <= tolerance for t in window)
    return every_rank(ctx, steady)  # every rank stops warming up at the same step


def busy_kernels_s(breakdown: dict) -> "float | None":
    """A profiled step's GPU work, the median step's, as bench/suites/training/pacing.py judges it; None
    where nothing was profiled."""
    if not all(name in breakdown for name in pacing.GPU_WORK_METRICS):
        return None
    return sum(statistics.median(breakdown[name]["samples"]) for name in pacing.GPU_WORK_METRICS)


def first_launch_kernels_s(ctx: Context, point: dict) -> "float | None":
    """A repeat's configuration's GPU work a step, as the launch that profiled it recorded it (its run
    records beside this launch's, which rank 0 of the first node writes), the same on every rank; None
    where that launch profiled none (not a repeat, no GPU, or no record of this configuration)."""
    if not (ctx.profiled_records and ctx.is_cuda):
        return None
    found = -1.0
    if ctx.rank == 0:
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            for line in Path(ctx.profiled_records).read_text().splitlines():
                record = json.loads(line)
                if record["status"] == "ok" and all(record["params"].get(key) == point.get(key) for key in ("global_batch", "baseline_for")):
                    found = busy_kernels_s(record["metrics"]) or -1.0
    shared = max_over_ranks(ctx, [found])[0]
    return shared if shared >= 0 else None


def paced_by_host(ctx: Context, kernels_s: float, samples: "list[float]") -> bool:
    """Whether the host paces these steps (bench/suites/training/pacing.py), by their median on the
    slowest rank: every rank gets the same answer."""
    return pacing.paced_by_host(kernels_s, max_over_ranks(ctx, [statistics.median(samples)])[0])


def profiled_breakdown(ctx: Context, step: Callable[[], None], steps: int) -> dict:
    """Kernel time by class and exposed communication per profiled step (kernel_time), the
    slowest rank's figure per step; a GPU-only view: on the CPU there are no kernels to class."""
    if not ctx.is_cuda or steps == 0:
        return {}
    per_step = kernel_time.profile_steps(step, steps, ctx.device)
    if len(per_step) != steps:  # the trace did not carry the step marks or their kernels: no figures rather than wrong ones
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


def run(ctx: Context, params: TrainingParams, entry: dict, emit: Callable[[dict], None],
        strategy: "type[Strategy]", build: Callable = workload.build) -> None:
    """Every global batch size of the plan entry (`params`, typed), then, on a 1-rank launch, those that
    stand for an N-rank run's work per rank (TrainingParams.baseline_batches); `build` makes the workload
    (workload.build), with the micro-batches of the largest global batch; a fresh `strategy()` wraps
    each set-up."""
    if ctx.is_cuda:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    echoed = {k: v for k, v in entry.items() if k not in ("grad_accum", "baselines_for")}  # a record's grad_accum is its global batch's
    points = [(global_batch, {}) for global_batch in params.batches(ctx.world_size)] + [
        (global_batch, {"baseline_for": ranks}) for global_batch, ranks in params.baseline_batches()]
    most_accum = max(grad_accum_for(global_batch, ctx.world_size, params.micro_batch) for global_batch, _ in points)
    training: "Training | None" = None
    for global_batch, stands_for in points:
        point = {**echoed, "global_batch": global_batch, "grad_accum": grad_accum_for(global_batch, ctx.world_size, params.micro_batch),
                 **stands_for}
        try:
            setup_s = 0.0
            if training is None:
                ctx.say("setup", f"setting the model up for global batch {global_batch}")
                ctx.mark("build")
                training, setup_s = seconds_of(ctx, lambda: set_up(ctx, params, most_accum, build, strategy()))
                ctx.mark("other")
            refused = time_for_config(ctx, params, training, global_batch)
            emit(run_record(ctx, point, {}, status="failed", error=refused) if refused
                 else run_config(ctx, params, point, training, setup_s))
        except torch.cuda.OutOfMemoryError as err:
            training = None
            if ctx.world_size > 1 and not every_rank_out_of_memory(ctx, global_batch):
                shared = f" (is another process using GPU {ctx.device.index}?)" if ctx.is_cuda else ""
                rank_errors.end_launch(
                    f"rank {ctx.rank} ran out of memory at micro_batch {params.micro_batch} (global batch {global_batch}) "
                    f"and its peers did not{shared}; the peers cannot go on without it, so this launch's later "
                    "configurations did not run; lower micro_batch")
            emit(run_record(ctx, point, {}, status="oom",
                            error=f"out of memory at micro_batch {params.micro_batch} (global batch {global_batch}): "
                                  f"{(str(err).splitlines() or ['CUDA out of memory'])[0]}; lower micro_batch"))
        if training is None:
            free(ctx)  # what ran out of memory, before the next global batch sets up
    training = None
    free(ctx)


def free(ctx: Context) -> None:
    """Wrappers, their hooks and the model hold one another in reference cycles (DDP's reducer, FSDP's
    states): without a collection a model that ran out of memory, its gradients and optimizer states
    would still be there when the next one is built, and at exit after the process group is gone."""
    gc.collect()
    if ctx.is_cuda:
        torch.cuda.empty_cache()
