"""Why one GPU accumulating 8 micro-batches is slower per sample than accumulating 4: the training step of
the ddp suite's 1-GPU run (the plain model, bf16 autocast, fused AdamW), taken apart.

    python3 benchmarks/baseline_profile.py [--model gpt2-large] [--micro-batch 2] [--seq-len 1024]
                                           [--accums 8,4,2] [--steps 6] [--rounds 3]

On one GPU (the first visible), for each accumulation (8, 4 and 2 micro-batches a step, the 1-GPU
runs of the scaling plan's global batch 16 on 1, 2 and 4 GPUs), in turn over `rounds` rounds (A B C A
B C, so that a drift of the clocks is not taken for a difference), `steps` timed steps after two untimed
ones, each timed with CUDA events around every part:
- each micro-batch's forward and backward, by its place in the step (the first backward after
  zero_grad allocates the gradients; the later ones add into them),
- the optimizer's step and zero_grad;
with, over each accumulation's timed steps, the caching allocator's counters (torch.cuda.memory_stats:
segments, cudaMalloc calls, their retries, reserved and peak bytes) and the GPU's SM clock and power
(NVML, through the agent's counter sampler; "-" where NVML is missing).

It prints one table: per accumulation, ms per sample, the step's parts per micro-batch (forward,
backward, the first backward apart), the optimizer and zero_grad per step, the allocator's figures
and the clocks. What each hypothesis predicts:
- the optimizer and zero_grad amortised: per sample they fall with the accumulation (8 fastest);
- gradient accumulation's adds: backward after the first costs the same per micro-batch whatever the
  accumulation; a later backward slower than the first would show the adds;
- the allocator: more segments, cudaMalloc calls or retries at 8 than at 4 (num_alloc_retries > 0:
  the cache was freed and refilled inside the step);
- the clocks: a lower SM clock median or a power at its limit at 8 (a longer busy stretch).
Standard library, torch and the agent only.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from bench.agent import counters  # noqa: E402
from bench.agent.harness import Context  # noqa: E402
from bench.agent.training import autocast_for, make_optimizer  # noqa: E402
from bench.models import workload  # noqa: E402
from benchmarks._agent import table  # noqa: E402

ALLOCATOR = ("segment.all.current", "num_alloc_retries", "num_device_alloc", "num_device_free")


@dataclass(frozen=True)
class Choice:
    """What workload.build reads (bench.models.workload.ModelChoice)."""

    model: str
    micro_batch: int
    seq_len: int
    seed: int = 0
    weights_dtype: str = "float32"
    activation_checkpointing: bool = False


@dataclass
class Timings:
    """One accumulation's timed steps, in ms: each part by the micro-batch's place, and per step."""

    forward: dict = field(default_factory=dict)  # place -> [ms]
    backward: dict = field(default_factory=dict)
    optimizer: list = field(default_factory=list)
    zero_grad: list = field(default_factory=list)
    step: list = field(default_factory=list)
    allocator: dict = field(default_factory=dict)  # ALLOCATOR's names: the change over the timed steps (segments: the last)
    reserved_gib: float = 0.0
    peak_gib: float = 0.0
    windows: list = field(default_factory=list)  # (start, end) CLOCK_MONOTONIC of each round's timed steps


def timed_step(model, optimizer, batches, precision, accum: int, into: "Timings | None") -> None:
    """One step over `accum` micro-batches, every part between CUDA events when `into` is given."""
    events = []

    def mark() -> None:
        if into is not None:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            events.append(event)

    mark()
    for micro in batches[:accum]:
        with precision:
            loss = model(*micro) / accum
        mark()
        loss.backward()
        mark()
    optimizer.step()
    mark()
    optimizer.zero_grad(set_to_none=True)
    mark()
    if into is None:
        return
    events[-1].synchronize()
    ms = [a.elapsed_time(b) for a, b in zip(events, events[1:])]
    for place in range(accum):
        into.forward.setdefault(place, []).append(ms[2 * place])
        into.backward.setdefault(place, []).append(ms[2 * place + 1])
    into.optimizer.append(ms[-2])
    into.zero_grad.append(ms[-1])
    into.step.append(sum(ms))


def measure(model, optimizer, batches, precision, accum: int, steps: int, into: Timings) -> None:
    for _ in range(2):  # untimed: the first steps of a new accumulation settle the allocator's cache
        timed_step(model, optimizer, batches, precision, accum, None)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_stats()
    began = time.monotonic()
    for _ in range(steps):
        timed_step(model, optimizer, batches, precision, accum, into)
    torch.cuda.synchronize()
    into.windows.append((began, time.monotonic()))
    after = torch.cuda.memory_stats()
    for name in ALLOCATOR:
        change = after.get(name, 0) - (0 if name.startswith("segment") else before.get(name, 0))
        into.allocator[name] = change if name.startswith("segment") else into.allocator.get(name, 0) + change
    into.reserved_gib = after.get("reserved_bytes.all.current", 0) / 2**30
    into.peak_gib = max(into.peak_gib, torch.cuda.max_memory_allocated() / 2**30)


def clocks(sampler: counters.Sampler, windows: list) -> "tuple[str, str]":
    """The SM clock and power medians of GPU 0 over the windows (NVML), or "-"."""
    sm, watts = [], []
    for start, end in windows:
        summary = sampler.span_summary(start, end)
        if summary is None:
            return "-", "-"
        gpu = summary["gpus"][0]
        sm += [gpu["sm_clock_mhz_median"]] if gpu["sm_clock_mhz_median"] is not None else []
        watts += [gpu["power_w_median"]] if gpu["power_w_median"] is not None else []
    return (f"{statistics.median(sm):.0f}" if sm else "-"), (f"{statistics.median(watts):.0f}" if watts else "-")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gpt2-large")
    parser.add_argument("--micro-batch", type=int, default=2)
    parser.add_argument("--seq-len", type=int, default=1024)
    parser.add_argument("--accums", default="8,4,2")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("error: baseline_profile.py needs a GPU (torch.cuda.is_available() is False); run it on a GPU host")
    accums = [int(a) for a in args.accums.split(",")]
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    ctx = Context(rank=0, local_rank=0, world_size=1, device=device, backend="nccl")
    work = workload.build(Choice(args.model, args.micro_batch, args.seq_len), max(accums), device, 0)
    optimizer = make_optimizer("adamw", work.module, ctx)
    precision = autocast_for(ctx, "bf16")
    found = {accum: Timings() for accum in accums}
    with counters.Sampler() as sampler:
        for _ in range(args.rounds):
            for accum in accums:
                measure(work.module, optimizer, work.micro_batches, precision, accum, args.steps, found[accum])
    rows = []
    for accum in accums:
        t = found[accum]
        later = [ms for place in range(1, accum) for ms in t.backward[place]]
        sm, watts = clocks(sampler, t.windows)
        rows.append([
            str(accum), f"{statistics.median(t.step) / (accum * args.micro_batch):.2f}", f"{statistics.median(t.step):.1f}",
            f"{statistics.median([ms for f in t.forward.values() for ms in f]):.2f}",
            f"{statistics.median(t.backward[0]):.2f}", f"{statistics.median(later):.2f}" if later else "-",
            f"{statistics.median(t.optimizer):.2f}", f"{statistics.median(t.zero_grad):.3f}",
            str(t.allocator["segment.all.current"]), str(t.allocator["num_device_alloc"]), str(t.allocator["num_alloc_retries"]),
            f"{t.reserved_gib:.1f}", f"{t.peak_gib:.1f}", sm, watts,
        ])
    print(f"{torch.cuda.get_device_name(device)}, {args.model}, micro-batch {args.micro_batch} x {args.seq_len} tokens, bf16 "
          f"autocast, fused AdamW; {args.rounds} rounds of {args.steps} timed steps per accumulation, medians")
    print(table(["accum", "ms/sample", "step ms", "forward ms/mb", "1st backward ms", "later backward ms/mb", "optimizer ms",
                 "zero_grad ms", "segments", "cudaMalloc calls", "alloc retries", "reserved GiB", "peak GiB",
                 "SM MHz", "power W"], rows))


if __name__ == "__main__":
    main()
