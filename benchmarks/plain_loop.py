"""Is the suite's step the model's own? Each 1-GPU training run of a bundle beside a plain PyTorch loop of
the same model, micro-batch, accumulation and precision, timed on this GPU right after.

    python3 benchmarks/plain_loop.py BUNDLE [--steps 20] [--warmup 5] [--only "llama3.2-1b micro-batch 2"]

The plain loop is what a practitioner writes: the preset's model (bench/models), autocast, torch's
fused AdamW (or Adafactor where the run used it), `loss / accum` backward per micro-batch, step and
zero_grad; CUDA events between steps run back to back, the median of `steps` after `warmup`, and the
fastest step. For an FSDP run it is FSDP2 as its tutorial writes it, on a process group of this one GPU:
each block then the root `fully_shard`ed (resharded after the forward but for grad_op), bf16 by its
mixed-precision policy, gradients synced on the last micro-batch.

It prints a table: the run's median step, the plain loop's and their ratio, then the same of their
fastest steps. A host-paced step moves with the CPU the host gives it, in spells of seconds (1.0-1.5x
on a shared VM), whatever program runs; the fastest steps compare the programs at the host's full
speed, where the plain loop's steps span as many spells as the run's (--steps). `--only` keeps the
runs whose description (the table's first column) holds the text. Runs with CUDA graphs or compile are listed as not compared: a plain loop of those is a
different program. Standard library, torch and the repository only.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from bench.models import workload  # noqa: E402
from benchmarks._agent import table  # noqa: E402

TRAINING = ("ddp", "fsdp")


def read(path: Path) -> dict:
    opened = gzip.open(path, "rt") if path.suffix == ".gz" else path.open()
    with opened as f:
        return json.load(f)


def fully_sharded(module: torch.nn.Module, params: dict) -> torch.nn.Module:
    """The module under FSDP2 on a mesh of this one GPU, as the run's sharding and precision ask."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mesh = init_device_mesh("cuda", (1,))
    mixed = MixedPrecisionPolicy(param_dtype=torch.bfloat16 if params.get("precision") == "bf16" else None,
                                 reduce_dtype=torch.bfloat16 if params.get("reduce_dtype") == "bf16" else torch.float32)
    for block in module.blocks:
        fully_shard(block, mesh=mesh, reshard_after_forward=params.get("sharding") != "grad_op", mp_policy=mixed)
    fully_shard(module, mesh=mesh, mp_policy=mixed)
    return module


def plain_step_ms(params: dict, steps: int, warmup: int, fsdp: bool = False) -> tuple[float, float]:
    """The median and the fastest step of the plain loop (under FSDP2 where `fsdp`), in ms."""
    device = torch.device("cuda", 0)
    choice = SimpleNamespace(model=params["model"], micro_batch=params["micro_batch"], seq_len=params.get("seq_len"),
                             seed=params.get("seed", 0), weights_dtype=params.get("weights_dtype", "float32"),
                             activation_checkpointing=params.get("activation_checkpointing", False))
    accum = params["grad_accum"]
    work = workload.build(choice, accum, device, 0)
    if fsdp:
        fully_sharded(work.module, params)
    if params.get("optimizer") == "adafactor":
        optimizer = torch.optim.Adafactor(work.module.parameters(), lr=1e-3, foreach=True)
    else:
        optimizer = torch.optim.AdamW(work.module.parameters(), lr=1e-4, fused=True)
    autocast = params.get("precision") == "bf16" and not fsdp  # FSDP's policy casts at each unit instead
    # Back to back, as training runs: no step waits for the GPU, so the host launches the next while
    # the GPU works (a wait after each would add the host's first launches to every step).
    events = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)]
    for step in range(warmup + steps):
        if step == warmup:
            events[0].record()
        for i, micro in enumerate(work.micro_batches):
            if fsdp:
                work.module.set_requires_gradient_sync(i == accum - 1)
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
                loss = work.module(*micro) / accum
            loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step >= warmup:
            events[step - warmup + 1].record()
    events[-1].synchronize()
    times = [begin.elapsed_time(end) for begin, end in zip(events, events[1:])]
    del work, optimizer
    torch.cuda.empty_cache()
    return statistics.median(times), min(times)


def describe(run: dict) -> str:
    p = run["params"]
    name = run["suite"] + (f" {p['sharding']}" if p.get("sharding") else "")
    return f"{name} {p['model']} micro-batch {p['micro_batch']} x{p['grad_accum']}"


def rows(bundle: dict, steps: int, warmup: int, only: str = "") -> list:
    """One row per run; the plain loop timed once per configuration (a run's launch repeats share it)."""
    found, plain_of = [], {}
    for host in bundle["hosts"]:
        for run in host["runs"]:
            if run["suite"] not in TRAINING or run["world_size"] != 1 or run["status"] != "ok" or only not in describe(run):
                continue
            p = run["params"]
            suite_ms = run["metrics"]["step_time_s"]["summary"]["median"] * 1e3
            suite_fastest_ms = min(run["metrics"]["step_time_s"]["samples"]) * 1e3
            if p.get("cuda_graphs") or p.get("compile"):
                found.append([describe(run), f"{suite_ms:.1f}", "-", "not compared: " + ("CUDA graphs" if p.get("cuda_graphs") else "compile"),
                              f"{suite_fastest_ms:.1f}", "-", "-"])
                continue
            key = json.dumps([describe(run), p.get("seq_len"), p.get("precision"), p.get("weights_dtype"),
                              p.get("activation_checkpointing"), p.get("optimizer")])
            if key not in plain_of:
                plain_of[key] = plain_step_ms(p, steps, warmup, fsdp=run["suite"] == "fsdp")
            plain, plain_fastest = plain_of[key]
            found.append([describe(run), f"{suite_ms:.1f}", f"{plain:.1f}", f"{suite_ms / plain:.3f}",
                          f"{suite_fastest_ms:.1f}", f"{plain_fastest:.1f}", f"{suite_fastest_ms / plain_fastest:.3f}"])
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundle", type=Path)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--only", default="", help="the runs whose description holds this text")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("error: plain_loop.py needs a GPU (torch.cuda.is_available() is False); run it on the GPU host of the bundle")
    torch.backends.cuda.matmul.allow_tf32 = True  # as the suite's ranks set them
    torch.backends.cudnn.allow_tf32 = True
    # FSDP's process group: this GPU alone, meeting in memory (no port to find free)
    torch.distributed.init_process_group("nccl", store=torch.distributed.HashStore(), rank=0, world_size=1)
    found = rows(read(args.bundle), args.steps, args.warmup, args.only)
    torch.distributed.destroy_process_group()
    if not found:
        sys.exit(f"error: {args.bundle} has no ok 1-GPU training run" + (f" whose description holds {args.only!r}" if args.only else "")
                 + "; name a bundle of the ddp or fsdp suite" + (", or a text from its table's first column" if args.only else ""))
    print(table(["run (1 GPU)", "suite step ms", "plain loop ms", "suite / plain", "suite fastest ms", "plain fastest ms",
                 "fastest suite / plain"], found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
