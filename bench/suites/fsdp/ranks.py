"""The fsdp suite's ranks: step time of a model preset under FSDP2 (torch.distributed.fsdp.fully_shard)
on synthetic data.

The training loop is the training suites' (bench/agent/training.py). What is FSDP's is here: each
block (GPT block, Llama decoder layer) is an FSDP unit, then the root; its parameters gathered in
bf16 and its gradients reduce-scattered in the reduce dtype (MixedPrecisionPolicy); all but the last
micro-batch of a step run with gradient sync off (set_requires_gradient_sync(False), FSDP2's no_sync,
which keeps each unit's unsharded gradient until the last);
and the bytes a step moves, counted from the collectives it calls in one extra untimed step.
"""

from __future__ import annotations

import contextlib
import os
from typing import Callable

import torch
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

from bench.agent import collective_counter
from bench.agent.harness import Context, max_over_ranks
from bench.agent.training import Strategy, Training, imports, run as run_training
from bench.common.stats import metric
from bench.models import workload
from bench.suites.fsdp.params import Params

REDUCE_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def device_mesh(ctx: Context, sharding: str) -> DeviceMesh:
    """Every rank on one axis; for hybrid, nodes x ranks per node: shard within a node, replicate across."""
    device_type = ctx.device.type
    if sharding != "hybrid":
        return init_device_mesh(device_type, (ctx.world_size,))
    per_node = ctx.ranks_per_node or int(os.environ.get("LOCAL_WORLD_SIZE", ctx.world_size))
    return init_device_mesh(device_type, (ctx.world_size // per_node, per_node), mesh_dim_names=("replicate", "shard"))


def policy(params: Params) -> MixedPrecisionPolicy:
    """bf16: gathered and computed in bf16, the fp32 (or bf16) shards stepped by the optimizer; the
    gradients reduce-scattered in the reduce dtype either way."""
    return MixedPrecisionPolicy(param_dtype=torch.bfloat16 if params.precision == "bf16" else None,
                                reduce_dtype=REDUCE_DTYPES[params.reduce_dtype])


class FSDPStrategy(Strategy):
    """Each block an FSDP unit, then the root, over the suite's mesh."""

    def __init__(self) -> None:
        self.model: "torch.nn.Module | None" = None

    def precision(self, ctx: Context, params: Params) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()  # FSDP's MixedPrecisionPolicy casts at each unit, not autocast

    def wrap(self, ctx: Context, work: workload.Workload, params: Params,
             precision: contextlib.AbstractContextManager) -> torch.nn.Module:
        mesh, mixed = device_mesh(ctx, params.sharding), policy(params)
        reshard = params.sharding != "grad_op"
        for block in work.module.blocks:
            if params.compile:
                block.compile()  # in place, before sharding: FSDP's hooks stay outside the compiled code
            fully_shard(block, mesh=mesh, reshard_after_forward=reshard, mp_policy=mixed)
        # The root (embeddings, final norm, head) at FSDP2's default: kept gathered from the forward to the
        # backward, which begins with the head; as ZeRO-3 implementations keep what is used at both ends.
        fully_shard(work.module, mesh=mesh, mp_policy=mixed)
        self.model = work.module
        return work.module

    def compiled(self, wrapped: torch.nn.Module) -> Callable:
        return wrapped  # its blocks are, since wrap()

    @contextlib.contextmanager
    def local_gradients(self):
        """Gradients accumulate unsharded on each rank; the last micro-batch reduce-scatters them."""
        self.model.set_requires_gradient_sync(False)
        try:
            yield
        finally:
            self.model.set_requires_gradient_sync(True)

    def communication(self, ctx: Context, training: Training, params: Params, steps_run: int) -> dict:
        """One more step, untimed, its collectives counted: what each step of this configuration moves."""
        with collective_counter.counting() as counted:
            training.step()
        ctx.sync()
        kinds = ["all_gather", "reduce_scatter"] + (["all_reduce"] if params.sharding == "hybrid" else [])
        figures = max_over_ranks(ctx, [float(counted.bytes[k]) for k in kinds] + [float(counted.calls[k]) for k in kinds])
        found = {f"{kind}_bytes": metric([figures[i]]) for i, kind in enumerate(kinds)}
        found.update({f"{kind}_calls_per_step_count": metric([figures[len(kinds) + i]]) for i, kind in enumerate(kinds)})
        return found


def run(ctx: Context, entry: dict, emit: Callable[[dict], None], build: Callable = workload.build) -> None:
    """Every global batch size of the plan entry; `build` makes the workload (workload.build)."""
    run_training(ctx, Params.of(entry), entry, emit, FSDPStrategy, build)
