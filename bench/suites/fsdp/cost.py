"""The fsdp suite's cost model: the training suites' (bench/suites/training/cost.py: set-up, FLOPs
against the GPU's peak) plus what a step's collectives move at the transport's bus bandwidth, fully
exposed as ddp's all-reduce is (FSDP overlaps much of it: an upper bound, which is what a timeout
wants). Per micro-batch, full and hybrid sharding gather every block twice (forward, backward) and
the root once, grad_op everything once; the gradients are reduce-scattered once a step. Under hybrid
the shards' all-reduce across nodes is left out: the launch's nodes are not the cost model's to
know. Fitted as bench/common/cost.py says."""

from __future__ import annotations

from dataclasses import replace

from bench.common.host import Capabilities
from bench.models.shapes import TRANSFORMER_PRESETS, units
from bench.common import cost
from bench.suites.training import cost as training_cost
from bench.suites.fsdp.params import Params
from bench.suites.training import grad_accum_for


def step_bytes(params: Params, world_size: int, accum: int) -> tuple[float, float]:
    """(all-gather, reduce-scatter) bytes of one step, nccl-tests' sizes: gathered outputs, scattered inputs."""
    root, *blocks = units(TRANSFORMER_PRESETS[params.model])
    gathered = 2 if params.precision == "bf16" or params.weights_dtype == "bfloat16" else 4
    reduced = 2 if params.reduce_dtype == "bf16" else 4
    passes = 1 if params.sharding == "grad_op" else 2
    return accum * (root + passes * sum(blocks)) * gathered, (root + sum(blocks)) * reduced


def priced(params: Params, preset: str, world_size: int, host: Capabilities) -> training_cost.Priced:
    work = training_cost.compute("fsdp", params, world_size, host)
    share = (world_size - 1) / world_size  # of each gather's and scatter's size, a rank's bytes on the link
    busbw = cost.busbw_gbps(preset, world_size, host) * 1e9

    def comm_s(batch: int) -> float:
        gather, scatter = step_bytes(params, world_size, grad_accum_for(batch, world_size, params.micro_batch))
        return (gather + scatter) * share / busbw

    # One more step a configuration, untimed: the one whose collectives are counted.
    counted = replace(work, steps=work.steps + 1)
    return training_cost.priced(params, world_size, host, counted, comm_s)


def least_gpu_bound(params: Params, host: Capabilities, world_sizes: "list[int]") -> "int | None":
    return training_cost.least_gpu_bound("fsdp", params, host, world_sizes)
