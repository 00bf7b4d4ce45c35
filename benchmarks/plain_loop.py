"""Is the suite's step the model's own? Each 1-GPU training run of a bundle, set up again as the suite's
ranks set it up, beside a plain PyTorch loop of the same model, micro-batch, accumulation and
precision, their steps taken in turn in one process.

    python3 benchmarks/plain_loop.py BUNDLE [--rounds 10] [--block 3] [--warmup 5] [--only "llama3.2-1b micro-batch 2" ...]

A host-paced step moves with the CPU the host gives it, in spells of seconds (1.0-1.5x on a shared
VM), whatever program runs: two programs timed one after the other compare two spells. So the arms
take turns: each round times `block` steps of each arm back to back (after one untimed step that
fills the GPU's queue, as the suite's timed steps do), the arms' order rotating round by round. A
round's ratio is the median of its suite steps over the median of its plain-loop steps, within a
second or two of each other; the table gives the median of the rounds' ratios and its 95%
distribution-free interval (order statistics).

The arms: the suite's own set-up (bench/agent/training.py's set_up with the suite's strategy; a
ddp run's step timeline recording, as in its timed steps), the same with the timeline off
(DDPBENCH_TIMELINE=0, ddp runs), and the plain loop. The plain loop is what a practitioner writes:
the preset's model (bench/models), autocast, torch's fused AdamW (or Adafactor where the run used
it), `loss / accum` backward per micro-batch, step and zero_grad. For an FSDP run it is FSDP2 as
its tutorial writes it, on a process group of this one GPU: each block then the root
`fully_shard`ed (resharded after the forward but for grad_op), bf16 by its mixed-precision policy,
gradients synced on the last micro-batch.

Before the rounds, one step of the suite and one of the plain loop run under torch's profiler: the
calls each makes on the host (operators, CUDA runtime calls) and the kernels it launches, counted by
name, and those the suite makes beyond the plain loop's. A host-paced step's time is the host's work,
and its steps spread 10-20% from one to the next, which rounds of timing cannot shrink to a few
percent: the same calls and kernels, less what the suite adds, is what says the programs match there.
What a ddp run adds is its step timeline's points: the recorder's own host time in the suite's timed
steps, as a share of its median step, is the most they can add to a host-paced step.

`--only` keeps the runs whose description (the table's first column) holds the text (repeated: any
of the texts). Runs with CUDA graphs or compile are listed as not compared: a plain loop of those is
a different program; so is a run whose arms do not fit the GPU's memory together. On a host without a GPU it compares the CPU runs of a CPU bundle (gloo,
perf_counter). Standard library, torch and the repository only.
"""

from __future__ import annotations

import argparse
import functools
import gzip
import json
import math
import os
import statistics
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from bench.agent import kernel_time, switches  # noqa: E402
from bench.agent.harness import Context, time_each_call  # noqa: E402
from bench.agent.training import Training, free, priming_steps, set_up  # noqa: E402
from bench.models import workload  # noqa: E402
from bench.suites.ddp.params import Params as DDPParams  # noqa: E402
from bench.suites.ddp.ranks import DDPStrategy  # noqa: E402
from bench.suites.fsdp.params import Params as FSDPParams  # noqa: E402
from bench.suites.fsdp.ranks import FSDPStrategy  # noqa: E402
from benchmarks._agent import table  # noqa: E402

SUITES = {"ddp": (DDPParams, DDPStrategy), "fsdp": (FSDPParams, FSDPStrategy)}
LEVEL = 0.95


def read(path: Path) -> dict:
    """The bundle at `path` (.json or .json.gz); one error line and exit 1 where it cannot be read."""
    try:
        with gzip.open(path, "rt") if path.suffix == ".gz" else path.open() as f:
            found = json.load(f)
    except (OSError, EOFError, ValueError) as err:
        found, why = None, str(err)
    else:
        why = "it holds no hosts' runs"
    if not isinstance(found, dict) or not isinstance(found.get("hosts"), list):
        sys.exit(f"error: cannot read bundle {path}: {why}; name a bundle.json (or .json.gz) that ddpbench wrote")
    return found


@dataclass
class Arm:
    """One program of a comparison: its name, a step, and what its timed steps record around them."""

    name: str
    step: Callable[[], None]
    recording: Callable[[bool], float] = lambda on: 0.0  # a timed step's recording on, or off: its own seconds
    steps_s: "list[float]" = field(default_factory=list)  # every step it timed
    recording_s: float = 0.0  # the recording's own seconds in those steps

    def timed(self, ctx: Context, count: int) -> "list[float]":
        """Seconds of each of `count` steps back to back, after those that prime them (unrecorded), as the
        suite's timed steps run."""
        for _ in range(priming_steps(ctx)):
            self.step()
        self.recording(True)
        times = time_each_call(ctx, self.step, count)
        self.recording_s += self.recording(False)
        return times


def suite_training(ctx: Context, suite: str, params: dict, timeline: bool) -> Training:
    """The run set up as the suite's ranks set it up, its step timeline on or off."""
    params_type, strategy = SUITES[suite]
    before = os.environ.get(switches.TIMELINE)
    os.environ[switches.TIMELINE] = "1" if timeline else "0"
    try:
        training = set_up(ctx, params_type.of(params), params["grad_accum"], workload.build, strategy())
    finally:
        if before is None:
            del os.environ[switches.TIMELINE]
        else:
            os.environ[switches.TIMELINE] = before
    training.accum = params["grad_accum"]
    return training


def suite_arm(ctx: Context, name: str, suite: str, params: dict, timeline: bool) -> Arm:
    """The suite's own step, its timeline recording the timed steps as in a run."""
    training = suite_training(ctx, suite, params, timeline)
    return Arm(name, training.step, functools.partial(timeline_recording, training))


def timeline_recording(training: Training, on: bool) -> float:
    """The suite's timeline recording the steps, as in its timed ones, or stopped and cleared: the
    recorder's own seconds in the steps it recorded."""
    if training.recorder is None:
        return 0.0
    training.recorder.recording = on
    return 0.0 if on else training.recorder.take()[1]


def work_of(ctx: Context, arm: Arm) -> "tuple[Counter, Counter]":
    """What one timed step of the arm asks of the host and of the GPU: the operators, runtime calls and
    hooks the profiler sees on the CPU, and the kernels, each by name."""
    from torch.autograd import DeviceType
    from torch.autograd.profiler import profile, record_function

    arm.recording(True)
    with profile(use_kineto=True, use_cpu=True, use_device="cuda" if ctx.is_cuda else None) as prof:
        with record_function(kernel_time.STEP_MARK):
            arm.step()
            ctx.sync()
    arm.recording(False)
    events = prof.kineto_results.events()
    ((begin, end),) = [(e.start_ns(), e.end_ns()) for e in events if e.is_user_annotation() and e.name() == kernel_time.STEP_MARK
                       and e.device_type() == DeviceType.CPU]
    host = Counter(e.name() for e in events if e.device_type() == DeviceType.CPU and not e.is_user_annotation()
                   and begin <= e.start_ns() <= end)
    kernels = Counter(name for name, _, _ in (kernel_time.kernels_by_step(events) or [[]])[0])
    return host, kernels


def fully_sharded(module: torch.nn.Module, params: dict, device: torch.device) -> torch.nn.Module:
    """The module under FSDP2 on a mesh of this one device, as the run's sharding and precision ask."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mesh = init_device_mesh(device.type, (1,))
    mixed = MixedPrecisionPolicy(param_dtype=torch.bfloat16 if params.get("precision") == "bf16" else None,
                                 reduce_dtype=torch.bfloat16 if params.get("reduce_dtype") == "bf16" else torch.float32)
    for block in module.blocks:
        fully_shard(block, mesh=mesh, reshard_after_forward=params.get("sharding") != "grad_op", mp_policy=mixed)
    fully_shard(module, mesh=mesh, mp_policy=mixed)
    return module


def plain_arm(ctx: Context, params: dict, fsdp: bool) -> Arm:
    """The plain loop of the run's model, as a practitioner writes it."""
    choice = SimpleNamespace(model=params["model"], micro_batch=params["micro_batch"], seq_len=params.get("seq_len"),
                             seed=params.get("seed", 0), weights_dtype=params.get("weights_dtype", "float32"),
                             activation_checkpointing=params.get("activation_checkpointing", False))
    accum = params["grad_accum"]
    work = workload.build(choice, accum, ctx.device, 0)
    if fsdp:
        fully_sharded(work.module, params, ctx.device)
    if params.get("optimizer") == "adafactor":
        optimizer = torch.optim.Adafactor(work.module.parameters(), lr=1e-3, foreach=True)
    else:
        optimizer = torch.optim.AdamW(work.module.parameters(), lr=1e-4, fused=ctx.is_cuda)
    autocast = params.get("precision") == "bf16" and not fsdp  # FSDP's policy casts at each unit instead

    def step() -> None:
        for i, micro in enumerate(work.micro_batches[:accum]):
            if fsdp:
                work.module.set_requires_gradient_sync(i == accum - 1)
            with torch.autocast(ctx.device.type, dtype=torch.bfloat16, enabled=autocast):
                loss = work.module(*micro) / accum
            loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return Arm("plain loop", step)


def median_interval(values: "list[float]", level: float = LEVEL) -> "tuple[float, float]":
    """The median's distribution-free interval: order statistics k and n+1-k, k the largest whose
    binomial tail stays within (1 - level) / 2 (the whole range where n is too small for that)."""
    ordered, n = sorted(values), len(values)
    tail, k = 0.0, 0
    while k < n // 2 and tail + math.comb(n, k) / 2 ** n <= (1 - level) / 2:
        tail += math.comb(n, k) / 2 ** n
        k += 1
    k = max(k, 1)
    return ordered[k - 1], ordered[n - k]


def interleaved(ctx: Context, arms: "list[Arm]", rounds: int, block: int) -> "dict[str, list[float]]":
    """Each arm's per-round median step, the arms taking turns (order rotating each round); every
    step it timed lands in its steps_s."""
    medians: dict = {arm.name: [] for arm in arms}
    for r in range(rounds):
        for arm in arms[r % len(arms):] + arms[:r % len(arms)]:
            times = arm.timed(ctx, block)
            arm.steps_s.extend(times)
            medians[arm.name].append(statistics.median(times))
    return medians


def describe(run: dict) -> str:
    p = run["params"]
    name = run["suite"] + (f" {p['sharding']}" if p.get("sharding") else "")
    return f"{name} {p['model']} micro-batch {p['micro_batch']} x{p['grad_accum']}"


def ratio_text(numerator: "list[float]", denominator: "list[float]") -> str:
    ratios = [a / b for a, b in zip(numerator, denominator)]
    low, high = median_interval(ratios)
    return f"{statistics.median(ratios):.3f} [{low:.3f}, {high:.3f}]"


def compared(ctx: Context, run: dict, rounds: int, block: int, warmup: int) -> list:
    """The run's row: its arms set up, then taking turns."""
    p, suite = run["params"], run["suite"]
    arms = [suite_arm(ctx, "suite", suite, p, timeline=True)]
    if run.get("timeline"):
        arms.append(suite_arm(ctx, "suite, timeline off", suite, p, timeline=False))
    arms.append(plain_arm(ctx, p, fsdp=suite == "fsdp"))
    for arm in arms:
        for _ in range(warmup):
            arm.step()
        ctx.sync()
    (suite_host, suite_kernels), (plain_host, plain_kernels) = work_of(ctx, arms[0]), work_of(ctx, arms[-1])
    medians = interleaved(ctx, arms, rounds, block)
    suite_s, plain_s = statistics.median(arms[0].steps_s), statistics.median(arms[-1].steps_s)
    recorded = f"{arms[0].recording_s / len(arms[0].steps_s) / suite_s:.2%}" if len(arms) == 3 else "-"
    return [describe(run), f"{run['metrics']['step_time_s']['summary']['median'] * 1e3:.1f}", f"{suite_s * 1e3:.1f}",
            f"{plain_s * 1e3:.1f}", ratio_text(medians["suite"], medians["plain loop"]),
            ratio_text(medians["suite, timeline off"], medians["plain loop"]) if len(arms) == 3 else "-", recorded,
            f"{suite_host.total():,} / {plain_host.total():,}", f"{suite_kernels.total():,} / {plain_kernels.total():,}",
            beyond(suite_host, plain_host), beyond(suite_kernels, plain_kernels), f"{rounds} x {block}"]


def beyond(suite: Counter, plain: Counter, most: int = 3) -> str:
    """What the suite's step calls that the plain loop's does not (+), and the reverse (-), by name."""
    more, fewer = suite - plain, plain - suite
    if not more and not fewer:
        return "none"
    return ", ".join([f"+{n} {name[:40]}" for name, n in more.most_common(most)] + [f"-{n} {name[:40]}" for name, n in fewer.most_common(most)])


def rows(ctx: Context, bundle: dict, rounds: int, block: int, warmup: int, only: "list[str]") -> list:
    """One row per configuration (a run's launch repeats share it)."""
    found, seen = [], set()
    for host in bundle["hosts"]:
        for run in host["runs"]:
            if run["suite"] not in SUITES or run["world_size"] != 1 or run["status"] != "ok" \
                    or not any(text in describe(run) for text in only):
                continue
            p = run["params"]
            if p.get("cuda_graphs") or p.get("compile"):
                found.append([describe(run), f"{run['metrics']['step_time_s']['summary']['median'] * 1e3:.1f}", "-", "-",
                              "not compared: " + ("CUDA graphs" if p.get("cuda_graphs") else "compile")] + ["-"] * 7)
                continue
            key = json.dumps({k: v for k, v in sorted(p.items()) if k not in ("seed", "baseline_for")} | {"suite": run["suite"]})
            if key not in seen:
                seen.add(key)
                try:
                    found.append(compared(ctx, run, rounds, block, warmup))
                except torch.cuda.OutOfMemoryError:  # its arms side by side need two or three models' memory
                    found.append([describe(run), f"{run['metrics']['step_time_s']['summary']['median'] * 1e3:.1f}", "-", "-",
                                  "not compared: its arms did not fit this GPU's memory together"] + ["-"] * 7)
                free(ctx)  # the row's models, before the next row's
                print(" | ".join(found[-1]), file=sys.stderr, flush=True)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundle", type=Path)
    parser.add_argument("--rounds", type=int, default=10, help="turns each arm takes (default 10)")
    parser.add_argument("--block", type=int, default=3, help="steps an arm times in a turn (default 3)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps of each arm before the first round")
    parser.add_argument("--only", action="append", help="the runs whose description holds this text (repeat for any of several)")
    args = parser.parse_args()
    if args.rounds < 1 or args.block < 1:
        sys.exit("error: --rounds and --block must be at least 1")
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
        torch.backends.cuda.matmul.allow_tf32 = True  # as the suite's ranks set them
        torch.backends.cudnn.allow_tf32 = True
    # This process alone, meeting in memory (no port to find free): FSDP's mesh needs a process group.
    backend = "nccl" if cuda else "gloo"
    torch.distributed.init_process_group(backend, store=torch.distributed.HashStore(), rank=0, world_size=1)
    ctx = Context(rank=0, local_rank=0, world_size=1, device=device, backend=backend)
    found = rows(ctx, read(args.bundle), args.rounds, args.block, args.warmup, args.only or [""])
    torch.distributed.destroy_process_group()
    if not found:
        sys.exit(f"error: {args.bundle} has no ok 1-GPU training run" + (f" whose description holds any of {args.only}" if args.only else "")
                 + "; name a bundle of the ddp or fsdp suite" + (", or a text from its table's first column" if args.only else ""))
    print(table(["run (1 GPU)", "bundle's step ms", "suite ms", "plain loop ms", "suite / plain [95%]",
                 "timeline off / plain [95%]", "timeline's host time, of the suite's step", "host calls a step, suite / plain", "kernels a step, suite / plain",
                 "host calls beyond the plain loop's", "kernels beyond the plain loop's", "rounds x steps"], found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
