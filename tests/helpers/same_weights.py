"""Test helper, run by torchrun on 2 ranks (gloo): the same tiny model trained 3 steps from the same seed
and data under DDP and under FSDP (full, grad_op), two micro-batches a step; rank 0 writes each one's
final weights to OUT_DIR/<strategy>.pt, and the weights they all started from to OUT_DIR/initial.pt.

    python -m torch.distributed.run --standalone --nproc-per-node 2 tests/helpers/same_weights.py OUT_DIR
"""

import os
import sys

import torch
import torch.distributed as dist

from bench.agent.harness import Context
from bench.agent.training import set_up
from bench.agent.worker import exit_rank
from bench.controller.plans import with_defaults
from bench.models import workload
from bench.suites.ddp.params import Params as DDPParams
from bench.suites.ddp.ranks import DDPStrategy
from bench.suites.fsdp.params import Params as FSDPParams
from bench.suites.fsdp.ranks import FSDPStrategy

TINY = {"model": "tiny", "micro_batch": 2, "seq_len": 32, "grad_accum": 2, "steps": 3, "warmup_steps": 0,
        "precision": "fp32", "compile": False}


def typed(suite: str, params: dict, kind):
    return kind.of(with_defaults({"suites": [{"suite": suite, "params": params}]})["suites"][0]["params"])


def trained(ctx: Context, params, strategy) -> dict:
    training = set_up(ctx, params, params.grad_accum, workload.build, strategy)
    for _ in range(3):
        training.step()
    weights = {}
    for name, p in training.work.module.named_parameters():
        full = p.full_tensor() if hasattr(p, "full_tensor") else p  # FSDP's DTensor shards, gathered
        weights[name] = full.detach().clone()
    return weights


def main(out_dir: str) -> None:
    dist.init_process_group("gloo")
    ctx = Context(dist.get_rank(), int(os.environ["LOCAL_RANK"]), dist.get_world_size(), torch.device("cpu"), "gloo")
    runs = {"ddp": (typed("ddp", TINY, DDPParams), DDPStrategy)}
    for sharding in ("full", "grad_op"):
        runs[sharding] = (typed("fsdp", {**TINY, "sharding": sharding}, FSDPParams), FSDPStrategy)
    if ctx.rank == 0:
        start = workload.build(runs["ddp"][0], 1, ctx.device, ctx.rank).module
        torch.save({name: p.detach().clone() for name, p in start.named_parameters()}, os.path.join(out_dir, "initial.pt"))
    for name, (params, strategy) in runs.items():
        weights = trained(ctx, params, strategy())
        if ctx.rank == 0:
            torch.save(weights, os.path.join(out_dir, f"{name}.pt"))
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
    exit_rank(0)  # as the agent's ranks end (bench/agent/worker.py says why)
