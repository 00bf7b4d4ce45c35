"""Step timelines on one GPU, what recording them costs, and the 2x H200 steps predicted from them.

    python3 benchmarks/timeline_replay.py --out DIR           # a GPU host: record, then predict (about 3.5 min on one H100)
    python3 benchmarks/timeline_replay.py --predict DIR/timelines.json --out DIR   # the prediction again, anywhere
    python3 benchmarks/timeline_replay.py --smoke --out DIR    # the recording's code on a CPU, tiny models (seconds)

On the GPU, per workload, the suite's own step (bench/suites/ddp/ranks.py, its recorder bench/agent/timeline.py):
- gpt2-large, micro-batch 8 x 1024 tokens, compiled (benchmarks/results/ddp_h200x2.md's settings: bf16 autocast,
  fp32 gradients, buckets of 100 MB, gradient_as_bucket_view); gpt2-large at micro-batch 16, eager (seed002's);
  SDXL's UNet as seed000 runs it (graphed, bf16 weights, checkpointing, Adafactor), global batch 8;
- each twice: the plain model (the suite's 1-GPU baseline) and in DDP at one rank (a process group of one: DDP's
  reducer, buckets and compiled graph splits with no link), timed with the timeline recorded;
- the recorder's cost: blocks of steps with the recording on and off, in turn (ABAB), on the plain model.
Then, without a GPU, the 2x H200 steps of ddp_h200x2.md (NV18 and p2p_off) replayed from the 1-GPU timeline on
the all_reduce curves this project measured on 2x H200 (the link table's nvlink4 and pcie5-x16-host rows), the
timeline scaled to each session's own 1-GPU step (the lent GPU may be an H100), against what each session measured.

Writes DIR/timelines.json and DIR/timeline_replay.md. Standard library and the agent only.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import suites  # noqa: E402
from bench.common.run import Run  # noqa: E402
from bench.common.allreduce import TABLE, Topology  # noqa: E402
from bench.common.replay import Bucket, Timeline, exposed_only, replay  # noqa: E402
from bench.suites.ddp.predict.timelines import profile_of  # noqa: E402
from benchmarks._agent import table  # noqa: E402

BUDGET_S = 210.0  # a workload that would end past this is skipped (said in the output): the command ends within 4 min
GPT_LARGE = {"model": "gpt2-large", "seq_len": 1024, "precision": "bf16", "bucket_cap_mb": 100, "gradient_as_bucket_view": True}
# name, params, micro-batches per step on one GPU, timed steps, cost pairs, steps per cost block, seconds it takes
# on an H200 (two compiles of 40-50 s; diffusers' import, two UNets built and graphed)
WORKLOADS = [
    ("gpt2-large mb8 compiled", {**GPT_LARGE, "micro_batch": 8, "compile": True}, 1, 20, 4, 5, 105),
    ("sdxl-unet gb8 graphed", {"model": "sdxl-unet", "micro_batch": 2, "precision": "bf16", "compile": False, "cuda_graphs": True,
                               "weights_dtype": "bfloat16", "activation_checkpointing": True, "optimizer": "adafactor"}, 4, 5, 2, 2, 75),
    ("gpt2-large mb16 eager", {**GPT_LARGE, "micro_batch": 16, "compile": False}, 1, 10, 3, 3, 25),
]
# --smoke: the same code paths on a CPU in seconds (no graphs, no compile), before GPU time is spent.
SMOKE = [
    ("gpt2-large mb8 compiled", {"model": "tiny", "seq_len": 64, "precision": "fp32", "micro_batch": 2, "compile": False,
                                 "bucket_cap_mb": 1}, 1, 4, 2, 2, 0),
    ("sdxl-unet gb8 graphed", {"model": "tiny-unet", "micro_batch": 1, "precision": "fp32", "compile": False,
                               "activation_checkpointing": True, "optimizer": "adafactor"}, 2, 2, 1, 1, 0),
]
# benchmarks/results/ddp_h200x2.md: gpt2-large, micro-batch 8, compiled, the suite's defaults; 2-GPU steps in ms
# with the same session's 1-GPU step (the third session's run A measured no p2p_off).
SESSIONS = [
    ("first session", 93.9, {"nvlink4": 105.6, "pcie5-x16-host": 153.9}),
    ("second session", 96.1, {"nvlink4": 106.8, "pcie5-x16-host": 154.9}),
    ("third session, run A", 95.9, {"nvlink4": 107.5}),
    ("third session, run B", 94.8, {"nvlink4": 105.6, "pcie5-x16-host": 158.0}),
]
# benchmarks/results/sdxl_unet_step_h200x1.md, seed000 in full on 2x H200 (2026-11-24), global batch 8, seconds.
UNET_SESSION = ("seed000 on 2x H200", 1.050, {"nvlink4": 0.704, "pcie5-x16-host": 0.835})
TRANSPORT = {"nvlink4": "default via P2P (NV18)", "pcie5-x16-host": "p2p_off via SHM"}


def defaults() -> dict:
    """The ddp suite's parameter defaults, from its schema (no jsonschema on a bare GPU host)."""
    spec = suites.get("ddp").schema["$defs"]["params"]["properties"]
    return {key: value["default"] for key, value in spec.items() if "default" in value}


# --- on the GPU ---------------------------------------------------------------------------------

def record(out: Path, smoke: bool) -> dict:
    """Each workload's timelines and the recorder's cost; smoke: the same code on the CPU with tiny models."""
    import datetime
    import gc
    import os

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from bench.agent import timeline
    from bench.agent.harness import Context, time_each_call
    from bench.agent.training import warm_up
    from bench.models import workload
    from bench.suites.ddp import ranks
    from bench.suites.ddp.params import Params
    from bench.suites.training import least_warmup_steps

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ.get("MASTER_PORT", "29533"), RANK="0", WORLD_SIZE="1")
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    if smoke:
        device, backend = torch.device("cpu"), "gloo"
    else:
        torch.cuda.set_device(0)
        device, backend = torch.device("cuda", 0), "nccl"
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=300), device_id=device if not smoke else None)
    ctx = Context(rank=0, local_rank=0, world_size=1, device=device, backend=backend)
    began = time.monotonic()

    def one_rank_ddp(ctx, module, params):
        return DDP(module, device_ids=[0] if ctx.is_cuda else None, bucket_cap_mb=params.bucket_cap_mb,
                   gradient_as_bucket_view=params.gradient_as_bucket_view, static_graph=params.static_graph)

    def timed(training, params, steps: int, ddp: bool) -> dict:
        least = least_warmup_steps(params.warmup_steps, training.steps_taken, synced_on_gpu=ddp)
        warm_up(ctx, training.step, params, least)
        training.recorder.recording = True
        step_s = time_each_call(ctx, training.step, steps)
        training.recorder.recording = False
        found = timeline.record(ctx, training.recorder, step_s, None, 0)
        return {"step_s": step_s, "timeline": found}

    def cost(training, pairs: int, per_block: int) -> dict:
        """Blocks of steps with the recording on and off in turn; hooks stay installed (off, each returns at once)."""
        blocks = {"on": [], "off": []}
        for _ in range(pairs):
            for arm in ("on", "off"):
                training.recorder.recording = arm == "on"
                blocks[arm].append(statistics.median(time_each_call(ctx, training.step, per_block)))
                training.recorder.recording = False
                training.recorder.take()
        ratios = [on / off for on, off in zip(blocks["on"], blocks["off"])]
        return {"block_median_s": blocks, "ratio_median": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios)}

    results = {"device": "CPU (smoke)" if smoke else torch.cuda.get_device_name(0), "torch": torch.__version__,
               "workloads": [], "skipped": []}
    for name, changes, accum, steps, pairs, per_block, takes_s in SMOKE if smoke else WORKLOADS:
        if time.monotonic() - began + takes_s > BUDGET_S:
            results["skipped"].append(f"{name}: it would end past the {BUDGET_S:.0f} s budget")
            continue
        params = Params.of({**defaults(), **changes, "grad_accum": accum, "steps": steps, "warmup_steps": 3})
        if params.model.endswith("unet"):
            import importlib.util
            if importlib.util.find_spec("diffusers") is None:
                results["skipped"].append(f"{name}: diffusers is not installed here")
                continue
        entry = {"name": name, "params": {**changes, "grad_accum": accum, "global_batch": accum * params.micro_batch}}
        try:
            for arm, wrap_model in (("plain", ranks.wrap), ("ddp_one_rank", one_rank_ddp)):
                setup_began = time.monotonic()
                training = ranks.set_up(ctx, params, accum, workload.build, wrap_model)
                entry[arm] = timed(training, params, steps, arm != "plain")
                entry[arm]["setup_and_timing_s"] = time.monotonic() - setup_began
                if arm == "plain":
                    entry["cost"] = cost(training, pairs, per_block)
                training.recorder.remove()
                del training
                gc.collect()
                torch.cuda.empty_cache()
        except torch.cuda.OutOfMemoryError as err:
            entry["error"] = (str(err).splitlines() or ["out of memory"])[0]
            gc.collect()
            torch.cuda.empty_cache()
        entry["elapsed_s"] = time.monotonic() - began
        results["workloads"].append(entry)
        print(f"{name}: done at {entry['elapsed_s']:.0f} s", file=sys.stderr)
    dist.destroy_process_group()
    (out / "timelines.json").write_text(json.dumps(results, indent=1))
    return results


# --- anywhere -------------------------------------------------------------------------------------

def as_run(entry: dict, arm: str) -> dict:
    """A timeline arm as the predictor reads a run (bench/suites/ddp/predict/timelines.py profile_of)."""
    step_s = entry[arm]["step_s"]
    return {"params": entry["params"], "timeline": entry[arm]["timeline"],
            "metrics": {"step_time_s": {"summary": {"median": statistics.median(step_s)}}}}


def scaled(timeline: Timeline, factor: float) -> Timeline:
    return Timeline(timeline.before_s * factor, timeline.backward_s * factor,
                    tuple(Bucket(b.ready_s * factor, b.nbytes) for b in timeline.buckets), timeline.after_s * factor)


def two_gpu_timeline(entry: dict, arm: str) -> Timeline:
    """The 2-GPU step's compute at the 1-GPU run's global batch per GPU (accumulation halved where it
    is more than one micro-batch: seed000's strong scaling; gpt2-large keeps a micro-batch per GPU)."""
    run = Run(as_run(entry, arm))
    accum = entry["params"]["grad_accum"]
    profile = profile_of(run, "steps", arm, calibrate_to=run.median("step_time_s"))
    return profile.timeline(max(1, accum // 2))


def one_gpu_step(entry: dict) -> float:
    return statistics.median(entry["plain"]["step_s"])


def error(predicted: float, measured: float) -> str:
    return f"{predicted * 1e3:.1f} ({predicted / measured - 1:+.1%})"


def predictions(results: dict) -> list:
    """Rows: the measured 2-GPU steps of each session against the replayed 1-GPU timelines."""
    rows = []
    by_name = {entry["name"]: entry for entry in results["workloads"] if "error" not in entry}
    plans = [("gpt2-large mb8 compiled", session) for session in SESSIONS]
    plans.append(("sdxl-unet gb8 graphed", UNET_SESSION))
    for name, (session, one_gpu_s, measured) in plans:
        entry = by_name.get(name)
        if entry is None:
            continue
        one_gpu_s = one_gpu_s / 1e3 if one_gpu_s > 10 else one_gpu_s  # ms for the GPT sessions, s for the UNet
        factor = one_gpu_s / one_gpu_step(entry)  # the lent GPU's step to the session's own
        ddp_timeline = scaled(two_gpu_timeline(entry, "ddp_one_rank"), factor)
        plain_timeline = scaled(two_gpu_timeline(entry, "plain"), factor)
        for link, measured_value in measured.items():
            measured_s = measured_value / 1e3 if measured_value > 10 else measured_value
            fabric = Topology.flat(TABLE[link], 2)
            nbytes = sum(b.nbytes for b in ddp_timeline.buckets)
            accum = entry["params"]["grad_accum"]
            compute = one_gpu_s * max(1, accum // 2) / accum  # the compute + exposed communication model: the 1-GPU step at the batch per GPU
            exposed = exposed_only(Timeline(0.0, compute, (Bucket(compute, nbytes),), 0.0), fabric.time_s)
            rows.append([name, session, TRANSPORT[link], f"{one_gpu_s * 1e3:.1f}", f"{factor:.3f}", f"{measured_s * 1e3:.1f}",
                         error(replay(ddp_timeline, fabric.time_s).step_s, measured_s),
                         error(replay(plain_timeline, fabric.time_s).step_s, measured_s),
                         error(exposed.step_s, measured_s)])
    return rows


def report(results: dict) -> str:
    lines = [f"# Step timelines on one {results['device']} and the 2x H200 steps replayed from them",
             "", f"`python3 benchmarks/timeline_replay.py`, torch {results['torch']}.", ""]
    rows, costs = [], []
    for entry in results["workloads"]:
        if "error" in entry:
            rows.append([entry["name"], "-", entry["error"]] + ["-"] * 7)
            continue
        for arm in ("plain", "ddp_one_rank"):
            found = entry[arm]["timeline"]
            steps = found["steps"]
            med = {k: statistics.median(s[k] for s in steps) for k in ("forward_s", "backward_s", "optimizer_s", "last_backward_s")}
            ready = [statistics.median(s["bucket_ready_s"][b] for s in steps) for b in range(len(found["bucket_bytes"]))]
            rows.append([entry["name"], "plain (1-GPU baseline)" if arm == "plain" else "DDP at one rank",
                         f"{one_gpu_step(entry) * 1e3:.1f}" if arm == "plain" else f"{statistics.median(entry[arm]['step_s']) * 1e3:.1f}",
                         f"{med['forward_s'] * 1e3:.1f} / {med['backward_s'] * 1e3:.1f} / {med['optimizer_s'] * 1e3:.1f}",
                         f"{len(ready)} ({sum(found['bucket_bytes']) / 1e9:.2f} GB)",
                         f"{ready[0] * 1e3:.1f} / {ready[-1] * 1e3:.1f} of {med['last_backward_s'] * 1e3:.1f}",
                         f"{found['recorder_cpu_s'] * 1e3:.3f} ({found['recorder_cpu_fraction']:.2%})",
                         f"{entry[arm]['setup_and_timing_s']:.0f}"])
        c = entry["cost"]
        costs.append([entry["name"], f"{len(c['block_median_s']['on'])} x 2",
                      f"{statistics.median(c['block_median_s']['on']) * 1e3:.2f}", f"{statistics.median(c['block_median_s']['off']) * 1e3:.2f}",
                      f"{c['ratio_median'] - 1:+.2%} [{c['ratio_min'] - 1:+.2%}, {c['ratio_max'] - 1:+.2%}]"])
    lines += ["## Timelines", "", table(["workload", "model", "step ms", "forward / backward / optimizer ms", "buckets",
                                         "first / last bucket ready ms of the last backward", "recorder CPU ms per step", "set-up and timing s"], rows)]
    lines += ["", "## The recorder's cost", "",
              "Blocks of steps with the recording on and off in turn on the plain model (the hooks stay installed; off, each returns at once).", "",
              table(["workload", "blocks", "step ms, recording on", "step ms, off", "cost: on / off - 1, median [min, max] of the pairs"], costs)]
    lines += ["", "## The 2x H200 steps replayed from the 1-GPU timeline", "",
              "Each session's 2-GPU step (benchmarks/results/ddp_h200x2.md; the UNet's from sdxl_unet_step_h200x1.md) against "
              "the lent GPU's timeline scaled to that session's 1-GPU step, replayed on the all_reduce curve this project "
              "measured on 2x H200 (bench/common/reference.py: nvlink4, pcie5-x16-host). No slowdown under communication: "
              "one GPU cannot measure it. Error = predicted / measured - 1.", "",
              table(["workload", "session", "transport", "session's 1-GPU ms", "scale", "measured 2-GPU ms",
                     "replayed, DDP-at-one-rank timeline ms (error)", "replayed, plain timeline ms (error)",
                     "compute + exposed communication model ms (error)"], predictions(results))]
    if results["skipped"]:
        lines += ["", "Skipped: " + "; ".join(results["skipped"])]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--predict", type=Path, help="a timelines.json written earlier: predict only, no GPU")
    parser.add_argument("--smoke", action="store_true", help="run the recording's code on this CPU with tiny models (no GPU)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    results = json.loads(args.predict.read_text()) if args.predict else record(args.out, args.smoke)
    text = report(results)
    (args.out / "timeline_replay.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
