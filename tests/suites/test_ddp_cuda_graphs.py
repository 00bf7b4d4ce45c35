"""cuda_graphs on a GPU host: the graphed step accumulates and reduces the gradients the eager
step does. CI has no GPU; these run on a GPU host (`python -m pytest tests/suites/test_ddp_cuda_graphs.py`)."""

from __future__ import annotations

import importlib.util
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from bench.models import workload
from bench.agent.harness import Context
from bench.suites.ddp import ranks as ddp
from bench.suites.ddp.params import Params
from bench.controller.plans import with_defaults

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="cuda_graphs needs a GPU")

# fp32 so that eager and graphed agree to rounding; three micro-batches, so that the accumulation
# across replays is what is compared.
SMALL = {
    "tiny": {"model": "tiny", "seq_len": 32, "precision": "fp32"},
    "tiny-unet": {"model": "tiny-unet", "precision": "bf16", "weights_dtype": "bfloat16", "optimizer": "adafactor"},
}
COMMON = {"micro_batch": 2, "grad_accum": 3, "steps": 1, "warmup_steps": 0, "compile": False, "activation_checkpointing": True}
MODELS = [name for name in SMALL if name != "tiny-unet" or importlib.util.find_spec("diffusers")]


def typed(params: dict) -> Params:
    return Params.of(with_defaults({"suites": [{"suite": "ddp", "params": params}]})["suites"][0]["params"])


def gradients_of_two_steps(ctx: Context, model: str, cuda_graphs: bool) -> list[list[torch.Tensor]]:
    """The gradients each optimizer step of two received, on this rank."""
    params = typed({**COMMON, **SMALL[model], "cuda_graphs": cuda_graphs})
    torch.manual_seed(0)
    training = ddp.set_up(ctx, params, params.grad_accum, workload.build)
    seen, step = [], training.optimizer.step

    def recorded_step(*args, **kwargs):
        seen.append([p.grad.detach().float().cpu().clone() for p in training.work.module.parameters()])
        return step(*args, **kwargs)

    training.optimizer.step = recorded_step
    for _ in range(2):
        training.step()
    torch.cuda.synchronize()
    return seen


def assert_same_gradients(graphed: list, eager: list, tolerance: float) -> None:
    assert len(graphed) == len(eager) == 2
    for step_graphed, step_eager in zip(graphed, eager):
        for g, e in zip(step_graphed, step_eager):
            torch.testing.assert_close(g, e, rtol=tolerance, atol=tolerance * e.abs().max().item())


TOLERANCE = {"tiny": 1e-4, "tiny-unet": 2e-2}  # fp32; bf16 weights and gradients


@pytest.mark.parametrize("model", MODELS)
def test_graphed_step_accumulates_the_gradients_of_the_eager_step(model):
    ctx = Context(rank=0, local_rank=0, world_size=1, device=torch.device("cuda", 0), backend="nccl")
    eager = gradients_of_two_steps(ctx, model, cuda_graphs=False)
    graphed = gradients_of_two_steps(ctx, model, cuda_graphs=True)
    assert_same_gradients(graphed, eager, TOLERANCE[model])


def _ddp_rank(rank: int, port: int, model: str, results) -> None:
    torch.cuda.set_device(rank)
    device = torch.device("cuda", rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2, device_id=device)
    try:
        ctx = Context(rank=rank, local_rank=rank, world_size=2, device=device, backend="nccl")
        eager = gradients_of_two_steps(ctx, model, cuda_graphs=False)
        graphed = gradients_of_two_steps(ctx, model, cuda_graphs=True)
        as_arrays = lambda steps: [[g.numpy() for g in step] for step in steps]  # pickled by value, not shared memory
        results.put((rank, as_arrays(graphed), as_arrays(eager)))
    finally:
        dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="DDP across two GPUs")
@pytest.mark.parametrize("model", MODELS)
def test_graphed_step_under_ddp_reduces_the_gradients_of_the_eager_step(model):
    spawn = mp.get_context("spawn")
    results = spawn.SimpleQueue()
    ranks = mp.start_processes(_ddp_rank, args=(free_port(), model, results), nprocs=2, start_method="spawn", join=False)
    as_tensors = lambda steps: [[torch.from_numpy(g) for g in step] for step in steps]
    by_rank = {rank: (as_tensors(graphed), as_tensors(eager)) for rank, graphed, eager in (results.get() for _ in range(2))}
    while not ranks.join():
        pass
    for graphed, eager in by_rank.values():
        assert_same_gradients(graphed, eager, TOLERANCE[model])
    # the all-reduce ran: both ranks hold the same averaged gradients, from different micro-batches
    assert_same_gradients(by_rank[0][0], by_rank[1][0], TOLERANCE[model])
