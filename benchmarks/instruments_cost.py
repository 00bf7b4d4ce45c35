"""What the instruments cost on two GPUs: the step timeline and the NVML counter sampler, on and off in turn.

    python3 benchmarks/instruments_cost.py OUT.md [--rounds 2]   # a host with 2 GPUs (about 4 min on 2x H100)
    python3 benchmarks/instruments_cost.py OUT.md --cpu           # the same code on a CPU: a tiny GPT over gloo (a minute)

Every round launches one ddp entry three times, in this order: both instruments on (as every run is measured),
the timeline off (DDPBENCH_TIMELINE=0: the recorder's hooks not installed), the sampler off
(DDPBENCH_GPU_COUNTERS=0). The entry: gpt2-large on 2 GPUs over NCCL's default link, micro-batch 2 x 1024 tokens,
global batches 4 and 16 (seed001-sharded's shortest step, where the recorder's share was largest, 3.0%, and one of
4 micro-batches a GPU). An instrument's cost = the step's median with both on / the same with it off - 1, per round
and global batch; its noise is the spread of that ratio over the rounds and the arms' own p5-p95.

Standard library and the agent only. The table goes to OUT.md and stdout.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common.host import Capabilities  # noqa: E402
from benchmarks._agent import median, plan_entry, run_plan, table  # noqa: E402

ARMS = [("both on", {}), ("timeline off", {"DDPBENCH_TIMELINE": "0"}), ("sampler off", {"DDPBENCH_GPU_COUNTERS": "0"})]
GPU_PARAMS = {"model": "gpt2-large", "micro_batch": 2, "global_batches": [4, 16], "seq_len": 1024, "steps": 20,
              "warmup_steps": 5, "precision": "bf16", "compile": False, "profile_steps": 0}
CPU_PARAMS = {"model": "tiny", "micro_batch": 2, "global_batches": [4, 8], "seq_len": 64, "steps": 6, "warmup_steps": 1,
              "precision": "fp32", "compile": False, "profile_steps": 0}


def plan(params: dict) -> dict:
    return {"name": "instruments-cost", "timeout_s": 600,
            "suites": [plan_entry("ddp", params, world_sizes=[2])]}


def spread(run: dict) -> str:
    summary = run["metrics"]["step_time_s"]["summary"]
    return f"{summary['median'] * 1e3:.2f} [{summary['p5'] * 1e3:.2f}, {summary['p95'] * 1e3:.2f}] n={summary['n']}"


def instruments(run: dict, launch_record: dict) -> str:
    said = []
    if run.get("timeline"):
        said.append(f"timeline: recorder CPU {run['timeline']['recorder_cpu_fraction']:.2%} of the step")
    sampler = launch_record.get("gpu_counters")
    if sampler:
        said.append(f"sampler: {sampler['sweeps_count']} sweeps, {sampler['sampler_cpu_s']:.2f} CPU s in the launch's "
                    f"{sampler['sampler_duration_s']:.0f} s")
    return "; ".join(said) or "none"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, help="where the table goes (markdown)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--cpu", action="store_true", help="a tiny GPT over gloo: the script's code paths, no GPU")
    parser.add_argument("--work", type=Path, default=Path("/tmp/ddpbench-instruments"), help="the agent's results folders")
    args = parser.parse_args()
    params = CPU_PARAMS if args.cpu else GPU_PARAMS

    rows, steps, problems, device = [], {}, [], None  # steps[(round, arm, global batch)] = median step s
    for round_ in range(1, args.rounds + 1):
        for arm, arm_env in ARMS:
            raw = run_plan(plan(params), args.work / f"r{round_}-{arm.replace(' ', '-')}", env=arm_env)
            launches = {record["id"]: record for record in raw["launches"]}
            device = device or Capabilities.of(raw["fingerprint"]).gpu_name
            problems += [f"round {round_}, {arm}: launch {record['id']} {record['status']}: {record.get('error')}"
                         for record in raw["launches"] if record["status"] != "ok"]
            for run in raw["runs"]:
                if run["status"] != "ok" or run["world_size"] != 2:
                    continue
                batch = run["params"]["global_batch"]
                steps[(round_, arm, batch)] = median(run, "step_time_s")
                rows.append([str(round_), arm, str(batch), spread(run), instruments(run, launches.get(run["launch_id"], {}))])

    costs = []
    for batch in params["global_batches"]:
        for instrument, off_arm in (("timeline", "timeline off"), ("sampler", "sampler off")):
            ratios = [steps[(r, "both on", batch)] / steps[(r, off_arm, batch)] - 1 for r in range(1, args.rounds + 1)
                      if (r, "both on", batch) in steps and (r, off_arm, batch) in steps]
            if ratios:
                costs.append([str(batch), instrument, ", ".join(f"{x:+.2%}" for x in ratios), f"{statistics.mean(ratios):+.2%}"])
    lines = [f"# The instruments' cost: {params['model']} DDP on 2 {'GPUs' if not args.cpu else 'gloo ranks'}"
             f"{f' ({device})' if device else ''}", "",
             table(["round", "arm", "global batch", "step ms median [p5, p95]", "instruments in the run"], rows), "",
             table(["global batch", "instrument", "cost per round (both on / it off - 1)", "mean"], costs), ""]
    lines += [f"- {problem}" for problem in problems]
    text = "\n".join(lines) + "\n"
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
