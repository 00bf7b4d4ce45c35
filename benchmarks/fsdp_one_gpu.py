"""The fsdp suite on one GPU: its one-GPU checks, as one table.

    python benchmarks/fsdp_one_gpu.py OUT.md [--work DIR]      # a GPU host (about 3 min on one H100)
    python benchmarks/fsdp_one_gpu.py OUT.md --work DIR --again  # the table again from DIR's results, anywhere

- gpt2-large at world size 1, bf16, micro-batch 8: the fsdp suite's step (full sharding over one rank,
  its bf16 MixedPrecisionPolicy) against the ddp suite's (the plain model under bf16 autocast), at global
  batch 8 (one micro-batch a step) and 16 (two, gradients kept local on the first); the aim: within 5%.
- Llama 3.1 8B: refused by the estimate as the suite's default recipe (fp32 weights: about 135 GiB), and
  run as its estimate says it fits (bf16 weights, checkpointing, micro-batch 1) where the GPU holds it.
- The memory estimate (bench/suites/training/memory.py) against the measured peak (max_memory_allocated over the
  timed steps) for every configuration that ran: gpt2-large at micro-batches 4 and 8 (ddp) and 8 (fsdp),
  Llama 3.2 1B in the seed001-sharded plan's recipe (ddp, fsdp); the aim: within 15%.

Two agent runs (the 8B alone, where it fits), six launches of a few timed steps each: 92 s and 103 s on
one H100 (benchmarks/results/fsdp_one_gpu_h100.md).
Standard library and the agent only (bench/suites is the agent's too). The table goes to OUT.md and stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import suites  # noqa: E402
from bench.common.host import Capabilities  # noqa: E402
from bench.errors import PlanError  # noqa: E402
from bench.suites.training import memory  # noqa: E402
from bench.suites.fsdp.suite import memory_setup  # noqa: E402
from bench.suites.training import training_recipe  # noqa: E402
from benchmarks._agent import median, plan_entry, run_plan, table  # noqa: E402

GIB = 1 << 30
SHORT = {"steps": 8, "warmup_steps": 3, "warmup_max_steps": 5, "profile_steps": 0, "compile": False, "precision": "bf16",
         "seq_len": 1024}
GPT2_LARGE = {**SHORT, "model": "gpt2-large"}
LLAMA_1B = {**SHORT, "model": "llama3.2-1b", "micro_batch": 2, "global_batches": [2], "weights_dtype": "bfloat16",
            "activation_checkpointing": True}
LLAMA_8B_LEAN = {**SHORT, "model": "llama3.1-8b", "micro_batch": 1, "global_batches": [1], "weights_dtype": "bfloat16",
                 "activation_checkpointing": True, "sharding": "full"}
LLAMA_8B_DEFAULT = {**SHORT, "model": "llama3.1-8b", "micro_batch": 1, "global_batches": [1], "sharding": "full"}
RUNS = [  # (suite, params): one launch each, world size 1
    ("ddp", {**GPT2_LARGE, "micro_batch": 8, "global_batches": [8, 16]}),
    ("fsdp", {**GPT2_LARGE, "micro_batch": 8, "global_batches": [8, 16], "sharding": "full"}),
    ("ddp", {**GPT2_LARGE, "micro_batch": 4, "global_batches": [4]}),
    ("ddp", LLAMA_1B),
    ("fsdp", {**LLAMA_1B, "sharding": "full"}),
]


def entry(suite: str, params: dict) -> dict:
    return plan_entry(suite, params)


def estimate_of(run: dict) -> memory.Estimate:
    """The estimate of the run's own configuration (its global batch's accumulation, not its sweep's)."""
    params = suites.get(run["suite"]).params(run["params"])
    if run["suite"] == "fsdp":
        return memory.estimate(replace(memory_setup(params, 1, 1), accumulating=run["params"]["grad_accum"] > 1))
    return memory.estimate(memory.Setup(
        model=params.model, strategy="replicated", shards=1, micro_batch=params.micro_batch, seq_len=params.seq_len,
        precision=params.precision, weights_dtype=params.weights_dtype, optimizer=params.optimizer,
        checkpointing=params.activation_checkpointing, accumulating=run["params"]["grad_accum"] > 1))


def refusal(host: Capabilities, params: dict) -> str:
    """The fsdp suite's plan check on this host: its refusal, or that it would run."""
    fsdp = suites.get("fsdp")
    try:
        fsdp.check_plan(fsdp.params(entry("fsdp", params)["params"]), host, world_size=1, transport="default", nodes=1)
    except PlanError as err:
        return f"refused: {err}"
    return "not refused: the estimate says it fits"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, help="where the table goes (markdown)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/ddpbench-fsdp-one-gpu"), help="the agent's results folder")
    parser.add_argument("--again", action="store_true", help="no launch: the table again from --work's results (anywhere)")
    args = parser.parse_args()
    if args.again and not (args.work / "main" / "raw.json").exists():
        parser.error(f"--again: no results in {args.work / 'main'}: run it once on a GPU host with --work {args.work}")
    if args.again:
        raw = json.loads((args.work / "main" / "raw.json").read_text())
    else:
        raw = run_plan({"name": "fsdp-one-gpu", "timeout_s": 300, "suites": [entry(s, p) for s, p in RUNS]}, args.work / "main")
    host = Capabilities.of(raw["fingerprint"])
    eight_b = refusal(host, LLAMA_8B_LEAN)
    if eight_b.startswith("not refused"):  # a plan with a refused entry would not run at all: the 8B alone, after
        if not args.again:
            run_plan({"name": "fsdp-one-gpu-8b", "timeout_s": 300, "suites": [entry("fsdp", LLAMA_8B_LEAN)]}, args.work / "8b")
        if (args.work / "8b" / "raw.json").exists():
            more = json.loads((args.work / "8b" / "raw.json").read_text())
            raw["runs"] += more["runs"]
            raw["launches"] += more["launches"]

    rows, steps = [], {}
    for run in raw["runs"]:
        p = run["params"]
        what = f"fsdp {p['sharding']}" if run["suite"] == "fsdp" else "ddp (plain model)"
        recipe = training_recipe(p)
        if run["status"] != "ok":
            rows.append([p["model"], what, recipe, str(p["micro_batch"]), str(p["global_batch"]), run["status"], "-", "-", "-", run.get("error") or ""])
            continue
        step, peak, need = median(run, "step_time_s"), median(run, "peak_memory_bytes"), estimate_of(run)
        steps[(p["model"], p["micro_batch"], p["global_batch"], run["suite"])] = step
        rows.append([p["model"], what, recipe, str(p["micro_batch"]), str(p["global_batch"]), f"{step * 1e3:.1f}",
                     f"{peak / GIB:.2f}", f"{need.total_bytes / GIB:.2f}", f"{need.total_bytes / peak - 1:+.1%}", need.parts()])
    lines = [f"# fsdp suite on one GPU: {host.gpu_name or 'no GPU'} ({host.gpu_memory_bytes / GIB:.1f} GiB)", "",
             table(["model", "strategy", "recipe", "micro-batch", "global batch", "step ms", "peak GiB (measured)",
                    "estimate GiB", "estimate vs measured", "estimate's parts"], rows), ""]
    for batch in (8, 16):
        ddp, fsdp = steps.get(("gpt2-large", 8, batch, "ddp")), steps.get(("gpt2-large", 8, batch, "fsdp"))
        if ddp and fsdp:
            lines.append(f"- gpt2-large, global batch {batch}: fsdp full {fsdp * 1e3:.1f} ms against ddp's plain model "
                         f"{ddp * 1e3:.1f} ms a step: {fsdp / ddp - 1:+.1%} (aim: within 5%)")
    lines.append(f"- llama3.1-8b in the suite's default recipe (fp32 weights, AdamW), micro-batch 1: {refusal(host, LLAMA_8B_DEFAULT)}")
    lines.append(f"- llama3.1-8b in bf16 weights with checkpointing, micro-batch 1: {eight_b}")
    for launch in raw["launches"]:
        if launch["status"] != "ok":
            lines.append(f"- launch {launch['id']} {launch['status']}: {launch.get('error')}")
    text = "\n".join(lines) + "\n"
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
