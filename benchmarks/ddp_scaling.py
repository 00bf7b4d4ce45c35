"""DDP suite on this host's GPUs: 1-GPU MFU, 2-GPU scaling efficiency per transport, and what
the overlap knobs change.

    python benchmarks/ddp_scaling.py [--model gpt2-large] [--micro-batch 8] [--seq-len 1024] [--knobs]

Rows: 1 GPU, then all GPUs under default, p2p_off and socket with the suite's default DDP
settings; with --knobs, default transport again with each knob flipped. The last columns say
where the GPU time goes, from the suite's profiled steps: compute that grows with a second GPU
while the communication is hidden is the all-reduce slowing the kernels it shares the GPU with.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import suites  # noqa: E402
from bench.common.run import Run  # noqa: E402
from benchmarks._agent import median, plan_entry, run_plan, table  # noqa: E402

# The naive loop's figures on the same machine kind (DESIGN.md), for the table's last column.
NAIVE_MS = {("gpt2-large", 1, "default"): 99.3, ("gpt2-large", 2, "default"): 117.3,
            ("gpt2-large", 2, "p2p_off"): 161.2, ("gpt2-large", 2, "socket"): 890.9,
            ("gpt2", 1, "default"): 22.1, ("gpt2", 2, "default"): 32.0,
            ("gpt2", 2, "p2p_off"): 36.3, ("gpt2", 2, "socket"): 177.8}
# Where the step's GPU time goes (the suite's profiled steps): kernel time, the union of compute
# kernels, NCCL kernel time, and the NCCL time no compute kernel overlapped.
BREAKDOWN = ("gpu_matmul_s", "gpu_compute_busy_s", "gpu_comm_s", "gpu_comm_exposed_s")
# Each variant flips DDP knobs (plan parameters; "+" joins two) or sets NCCL environment for the ranks.
KNOBS = {
    "bucket_cap_mb=100": {"bucket_cap_mb": 100},
    "bucket_cap_mb=10": {"bucket_cap_mb": 10},
    "bucket_cap_mb=400": {"bucket_cap_mb": 400},
    "grad_reduce_dtype=bf16": {"grad_reduce_dtype": "bf16"},
    "gradient_as_bucket_view=false": {"gradient_as_bucket_view": False},
    "static_graph=true": {"static_graph": True},
    "compile=false": {"compile": False},
    "NCCL_MAX_NCHANNELS=8": {"env": {"NCCL_MAX_NCHANNELS": "8"}},
    "NCCL_MAX_NCHANNELS=4": {"env": {"NCCL_MAX_NCHANNELS": "4"}},
    "NCCL_CTA_POLICY=1": {"env": {"NCCL_CTA_POLICY": "1"}},  # NCCL 2.27+: as few CTAs as keep its bandwidth
    "NCCL_P2P_USE_CUDA_MEMCPY=1": {"env": {"NCCL_P2P_USE_CUDA_MEMCPY": "1"}},  # NCCL's P2P transfers on copy engines
    "allreduce=copy_engine": {"allreduce": "copy_engine"},
    "allreduce=copy_engine+bucket_cap_mb=25": {"allreduce": "copy_engine", "bucket_cap_mb": 25},
    "allreduce=copy_engine+bucket_cap_mb=400": {"allreduce": "copy_engine", "bucket_cap_mb": 400},
}


def entry(params: dict, transports: list[str], world_sizes: list, env: "dict | None" = None) -> dict:
    return plan_entry("ddp", params, transports, world_sizes, env)


def variant(base: dict, change: dict) -> dict:
    params = {**base, **{k: v for k, v in change.items() if k != "env"}}
    return entry(params, ["default"], [2], change.get("env"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="gpt2-large")
    parser.add_argument("--micro-batch", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--knobs", default="", help="comma-separated variants to add on the default transport: " + ", ".join(KNOBS))
    parser.add_argument("--transports", default="default,p2p_off,socket", help="transports of the 2-GPU rows")
    parser.add_argument("--out", type=Path, default=Path("/tmp/ddpbench-ddp"))
    parser.add_argument("--defaults", default="", help="key=value,... overriding the suite's DDP defaults")
    args = parser.parse_args()

    defaults = {"bucket_cap_mb": 100, "gradient_as_bucket_view": True, "static_graph": False, "compile": True}
    for item in filter(None, args.defaults.split(",")):
        key, value = item.split("=")
        defaults[key] = value == "true" if value in ("true", "false") else float(value)
    base = {"model": args.model, "micro_batch": args.micro_batch, "seq_len": args.seq_len, "grad_accum": 1,
            "steps": args.steps, "warmup_steps": 10, "warmup_max_steps": 10, "warmup_tolerance": 0.1,
            "cv_target": None, "sampling_cap_s": 30, "precision": "bf16", "count_allreduce": False, "profile_steps": 3, "optimizer": "adamw", "grad_reduce_dtype": "fp32", "allreduce": "nccl",
            "weights_dtype": "float32", "activation_checkpointing": False, "seed": 0, **defaults}
    entries = [entry(base, ["default"], [1]), entry(base, args.transports.split(","), [2])]
    variants = list(filter(None, args.knobs.split(",")))
    entries += [variant(base, KNOBS[name]) for name in variants]
    raw = run_plan({"name": "ddp-scaling", "timeout_s": 1200, "suites": entries}, args.out)

    one_gpu = next((median(r, "step_time_s") for r in raw["runs"] if r["world_size"] == 1 and r["status"] == "ok"), None)
    launch_variant = {f"{i + 2:02d}": name for i, name in enumerate(variants)}  # launch ids start with the entry index
    rows = []
    for run in raw["runs"]:
        p = run["params"]
        knob = launch_variant.get(run["launch_id"][:2], "")
        if run["status"] != "ok":
            rows.append([p["model"], str(run["world_size"]), run["transport"]["preset"], knob, run["status"]] + [""] * 8)
            continue
        step = median(run, "step_time_s")
        mfu = median(run, "mfu_fraction")
        efficiency = one_gpu / step if one_gpu else None
        naive = NAIVE_MS.get((p["model"], run["world_size"], run["transport"]["preset"])) if not knob else None
        rows.append([
            p["model"], str(run["world_size"]), suites.get("ddp").link_name(Run(run)),
            knob or "suite defaults", f"{step * 1e3:.1f}", f"{run['metrics']['step_time_s']['summary']['cv']:.1%}",
            f"{mfu:.1%}" if mfu else "-", f"{efficiency:.1%}" if efficiency else "-", f"{naive:.1f}" if naive else "-",
            *(f"{median(run, name) * 1e3:.1f}" if median(run, name) is not None else "-" for name in BREAKDOWN),
        ])
    print(table(["model", "GPUs", "transport", "DDP settings", "step ms", "CV", "MFU", "scaling", "naive loop ms",
                 "matmul ms", "compute busy ms", "comm ms", "comm exposed ms"], rows))
    for launch in raw["launches"]:
        if launch["status"] != "ok":
            print(f"launch {launch['id']} {launch['status']}: {launch['error']}")
            print("\n".join(launch["log_tail"][-8:]))


if __name__ == "__main__":
    main()
