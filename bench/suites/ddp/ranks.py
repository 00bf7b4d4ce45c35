"""The ddp suite's ranks: step time of a model preset under DistributedDataParallel on synthetic data.

The training loop is the training suites' (bench/agent/training.py): a global batch reached by
micro-batches, all but the last under `no_sync()`, so the gradients cross the link once per step,
as gradient accumulation does. What is DDP's is here: the wrapper and its comm hook (NCCL's all-reduce, its bf16
compression, or the copy engines), CUDA graphs of the model, the compiled wrapper, and the gradient
bytes a step all-reduces.
"""

from __future__ import annotations

import contextlib
from typing import Callable

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from bench.agent import copy_engine_allreduce, rank_errors, switches, timeline
from bench.agent.harness import Context
from bench.agent.training import Strategy, Training, autocast_for, imports, run as run_training, set_up as set_up_training
from bench.common.stats import metric
from bench.models import workload
from bench.suites.ddp.params import Params


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


def reduced_element_bytes(param: torch.Tensor, params: Params) -> int:
    """Bytes per gradient element on the link: DDP reduces gradients in the weights' dtype (fp32
    under autocast over fp32 weights) unless the bf16 hook compresses them."""
    return 2 if params.grad_reduce_dtype == "bf16" else param.element_size()


def grad_allreduce_bytes(module: torch.nn.Module, params: Params) -> int:
    """Bytes of one step's gradient all-reduce."""
    return sum(p.numel() * reduced_element_bytes(p, params) for p in module.parameters() if p.requires_grad)


class DDPStrategy(Strategy):
    """The model in DistributedDataParallel (one rank: the plain model), its gradients all-reduced
    by the comm hook, optionally counted."""

    def __init__(self, wrap_model: Callable = wrap) -> None:
        self.wrap_model = wrap_model  # benchmarks/timeline_replay.py wraps one rank in DDP too
        self.ddp: "DDP | None" = None
        self.allreduce_calls: "list[int] | None" = None
        self.calls_before = 0

    def precision(self, ctx: Context, params: Params) -> contextlib.AbstractContextManager:
        # A captured graph keeps the autocast casts it was captured with, and may not hold
        # autocast's cache of cast weights (make_graphed_callables refuses it).
        return autocast_for(ctx, params.precision, cache_enabled=not params.cuda_graphs)

    def wrap(self, ctx: Context, work: workload.Workload, params: Params,
             precision: contextlib.AbstractContextManager) -> torch.nn.Module:
        if params.cuda_graphs:
            graph_module(work, precision)
        self.ddp = self.wrap_model(ctx, work.module, params)
        if self.ddp is None:
            return work.module
        self.synced_warmup = True
        self.allreduce_calls = install_comm_hook(ctx, self.ddp, work.module, params)
        return self.ddp

    def local_gradients(self) -> contextlib.AbstractContextManager:
        return self.ddp.no_sync() if self.ddp is not None else contextlib.nullcontext()

    def grads_kept(self, params: Params) -> bool:
        return params.cuda_graphs  # graph_module says why

    def before_timing(self) -> None:
        self.calls_before = self.allreduce_calls[0] if self.allreduce_calls else 0

    def communication(self, ctx: Context, training: Training, params: Params, steps_run: int) -> dict:
        one_rank = ctx.world_size == 1  # no link to cross
        found = {"grad_allreduce_bytes": metric([float(0 if one_rank else grad_allreduce_bytes(training.work.module, params))])}
        if self.allreduce_calls is not None:
            found["allreduce_calls_per_step_count"] = metric([(self.allreduce_calls[0] - self.calls_before) / steps_run])
        return found

    def recorder(self, ctx: Context, work: workload.Workload, params: Params) -> "timeline.StepRecorder | None":
        """Every run records its timeline (unless switched off: its runs then hold none, and the predictor
        falls back to the compute + exposed communication model); without DDP (one rank) in the buckets DDP
        would have made."""
        if not switches.on(switches.TIMELINE):
            return None
        return timeline.StepRecorder(ctx.device, list(work.module.parameters()), lambda p: reduced_element_bytes(p, params),
                                     int(params.bucket_cap_mb * 1024 * 1024))

    def timeline(self, ctx: Context, training: Training, step_s: list, params: Params) -> "dict | None":
        """The timed steps' timeline; with peers, then timeline_steps more with no all-reduce at all."""
        if training.recorder is None:
            return None
        without_allreduce = (lambda: training.step(communicate=False)) if self.ddp is not None else None
        return timeline.record(ctx, training.recorder, step_s, without_allreduce, params.timeline_steps)


def set_up(ctx: Context, params: Params, accum: int, build: Callable, wrap_model: Callable = wrap) -> Training:
    """One DDP configuration set up to train (the training suites' set_up with DDP's strategy)."""
    return set_up_training(ctx, params, accum, build, DDPStrategy(wrap_model))


def run(ctx: Context, entry: dict, emit: Callable[[dict], None], build: Callable = workload.build) -> None:
    """Every global batch size of the plan entry; `build` makes the workload (workload.build),
    with the micro-batches of the largest global batch."""
    run_training(ctx, Params.of(entry), entry, emit, DDPStrategy, build)
