"""The ddp suite's cost model: the training suites' (bench/suites/training/cost.py: set-up, compilation,
FLOPs against the GPU's peak) plus the gradient all-reduce of each step. Fitted as bench/common/cost.py says."""

from __future__ import annotations

from dataclasses import replace

from bench.common.host import Capabilities
from bench.common import cost
from bench.suites.training import cost as training_cost
from bench.suites.ddp.params import Params


def priced(params: Params, preset: str, world_size: int, host: Capabilities) -> training_cost.Priced:
    work = training_cost.compute("ddp", params, world_size, host)
    if world_size > 1:  # the timeline's steps without all-reduce (ranks.py), after the timed ones
        work = replace(work, steps=work.steps + params.timeline_steps)
    half = params.weights_dtype == "bfloat16" or params.grad_reduce_dtype == "bf16"
    grad_bytes = work.n_params * (2 if half else 4)
    allreduce_s = 0.0 if world_size == 1 else grad_bytes * 2 * (world_size - 1) / world_size / (cost.busbw_gbps(preset, world_size, host) * 1e9)
    return training_cost.priced(params, world_size, host, work, lambda batch: allreduce_s,
                                        synced_on_gpu=host.kind == "gpu" and world_size > 1)


def least_gpu_bound(params: Params, host: Capabilities, world_sizes: "list[int]") -> "int | None":
    return training_cost.least_gpu_bound("ddp", params, host, world_sizes)
