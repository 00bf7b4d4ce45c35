"""The ddp suite's figures derived from several runs of one host: scaling efficiency, seed 002's
communication model, and the plausibility of both.

The baseline of an N-GPU ddp run is the world-size-1 run with the same model, shapes and
precision, and the same global batch when a sweep fixes it (strong scaling) or the same
accumulation when the batch per GPU is fixed (weak scaling).

scaling_efficiency = per-sample time x #GPUs of the baseline / the same of the N-GPU run
(seed 000's metric; 1.0 is perfect scaling), from the medians.

Plausibility (warnings): a figure no correct measurement can give is flagged on its run
(`warnings`: code, message, likely cause), never printed silently.

Seed 002's model, in step time (medians):
  compute_s = T1 x (per-GPU batch of the N-GPU run / global batch of the baseline): the
              1-GPU step time at the N-GPU run's batch per GPU; T1 / N under strong scaling,
              T1 under weak scaling (the optimizer step is scaled with it, a small understatement)
  predicted_step_time_s = compute_s + t_allreduce(gradient bytes), the all-reduce fully
              exposed, its time read off the all_reduce results of the same host, transport,
              world size and node count (log-size interpolation of the bandwidth between the
              measured sizes around the gradient bytes; below the smallest size, that size's
              time; past the largest, that size's bandwidth, and a note says so)
  exposed_comm_s = measured step time - compute_s
"""

from __future__ import annotations

import statistics

from bench.common.allreduce import curve_time
from bench.common.stats import LEVEL, ratio_of_medians
from bench.suites.base import warning

VARYING = ("global_batch", "grad_accum", "num_params", "train_flops_per_sample")
# The all_reduce dtype of a ddp run's gradients: the weights' own (fp32 under autocast too; bf16 weights
# give bf16 gradients), or bf16 by the compress hook.
REDUCE_DTYPES = {"fp32": "float32", "bf16": "bfloat16"}


def _shape_key(run: dict) -> tuple:
    """What a run and its baseline share; the repeat too (launch_repeats): each repeat's N-GPU run
    is compared with the baseline measured in the same turn."""
    params = run["params"]
    fixed = "global_batch" if params.get("global_batches") else "grad_accum"
    same = {k: v for k, v in params.items() if k not in VARYING}
    return (run["suite"], repr(sorted(same.items())), fixed, params.get(fixed), run.get("repeat", 1))


def _median(run: dict, metric: str) -> "float | None":
    found = run["metrics"].get(metric)
    return found["summary"]["median"] if found else None


def _ok_ddp(runs: list[dict]) -> list[dict]:
    return [r for r in runs if r["suite"] == "ddp" and r["status"] == "ok"]


def baselines(runs: list[dict]) -> "dict[int, dict]":
    """id(run) -> the 1-GPU run it is compared with, for every ok ddp run of one host that has one."""
    by_shape = {}
    for run in _ok_ddp(runs):
        if run["world_size"] == 1:
            # Prefer the default preset's run; with one rank there is no link to differ.
            key = _shape_key(run)
            if key not in by_shape or run["transport"]["preset"] == "default":
                by_shape[key] = run
    return {id(run): by_shape[_shape_key(run)] for run in _ok_ddp(runs) if _shape_key(run) in by_shape}


def derive_scaling(runs: list[dict]) -> None:
    """Set derived.scaling_efficiency_fraction on every ok ddp run that has a baseline."""
    found = baselines(runs)
    for run in _ok_ddp(runs):
        baseline = found.get(id(run))
        mine, base = _median(run, "per_sample_gpu_time_s"), baseline and _median(baseline, "per_sample_gpu_time_s")
        run.setdefault("derived", {})["scaling_efficiency_fraction"] = base / mine if base and mine else None


def allreduce_curves(runs: list[dict], nodes_of_launch: dict) -> dict:
    """(preset, world size, nodes) -> {dtype: [(size_bytes, median seconds)]} of the ok all_reduce runs,
    by size; repeated sizes take the median."""
    points: dict = {}
    for run in runs:
        if run["suite"] != "collectives" or run["status"] != "ok" or run["params"].get("op") != "all_reduce":
            continue
        key = (run["transport"]["preset"], run["world_size"], nodes_of_launch.get(run["launch_id"], 1))
        sizes = points.setdefault(key, {}).setdefault(run["params"]["dtype"], {})
        sizes.setdefault(run["params"]["size_bytes"], []).append(_median(run, "time_s"))
    return {
        key: {dtype: sorted((size, statistics.median(times)) for size, times in sizes.items()) for dtype, sizes in dtypes.items()}
        for key, dtypes in points.items()
    }


def gradient_curve(dtypes: dict, run: dict) -> list[tuple]:
    """The curve of the dtype DDP reduces in, else the one that reaches the largest size."""
    params = run["params"]
    reduced = "bfloat16" if params.get("weights_dtype") == "bfloat16" else REDUCE_DTYPES[params.get("grad_reduce_dtype", "fp32")]
    return dtypes.get(reduced) or max(dtypes.values(), key=lambda curve: curve[-1][0])


def derive_prediction(runs: list[dict], launches: list[dict]) -> None:
    """Set derived predicted_step_time_s, allreduce_time_s and exposed_comm_s on every ok N-GPU ddp run.

    A figure whose inputs are not in the runs (no baseline, no all_reduce results for that
    transport) is null, and a note on the run says which input is missing.
    """
    nodes_of_launch = {launch["id"]: launch.get("nodes", 1) for launch in launches}
    curves = allreduce_curves(runs, nodes_of_launch)
    found = baselines(runs)
    for run in _ok_ddp(runs):
        if run["world_size"] == 1:
            continue
        derived, notes = run.setdefault("derived", {}), []
        baseline = found.get(id(run))
        compute_s = None
        if baseline is None:
            notes.append("no 1-GPU run of the same shape in this bundle: no exposed communication or prediction")
        else:
            per_gpu_batch = run["params"]["global_batch"] / run["world_size"]
            compute_s = _median(baseline, "step_time_s") * per_gpu_batch / baseline["params"]["global_batch"]
        derived["exposed_comm_s"] = None if compute_s is None else _median(run, "step_time_s") - compute_s
        preset = run["transport"]["preset"]
        dtypes = curves.get((preset, run["world_size"], nodes_of_launch.get(run["launch_id"], 1)))
        curve = dtypes and gradient_curve(dtypes, run)
        allreduce_s = None
        if curve is None:
            notes.append(f"no all_reduce results for transport {preset} at {run['world_size']} ranks in this bundle: no prediction")
        else:
            grad_bytes = _median(run, "grad_allreduce_bytes")
            allreduce_s, extrapolated = curve_time(curve, grad_bytes)
            if extrapolated:
                notes.append(
                    f"all-reduce time extrapolated: the gradients ({grad_bytes:.0f} bytes) exceed the largest all_reduce "
                    f"size measured ({curve[-1][0]} bytes); that size's bandwidth was used"
                )
        derived["allreduce_time_s"] = allreduce_s
        derived["predicted_step_time_s"] = None if compute_s is None or allreduce_s is None else compute_s + allreduce_s
        if notes:
            run["notes"] = notes
        else:
            run.pop("notes", None)  # derived again on resume: an input may have arrived since


UNLIKE_BASELINE = ("the 1-GPU baseline did not get the resources per rank the N-GPU run got (threads, cores, clocks) "
                   "or was not warmed up; or the machine was busy while it ran")


def _unlike_baseline(run: dict, baseline: "dict | None", others_share: dict) -> str:
    """The likely cause, with the CPU share other processes took during either run where recorded."""
    busy = [f"{others_share[r['launch_id']]:.0%} of the machine's CPU during the {r['world_size']}-rank run"
            for r in (baseline, run) if r is not None and (others_share.get(r["launch_id"]) or 0) > 0.1]
    return UNLIKE_BASELINE + (f" (other processes took {' and '.join(busy)})" if busy else "")


def warnings(run: dict, baseline: "dict | None", others_share: dict) -> list[dict]:
    cause = _unlike_baseline(run, baseline, others_share)
    found = []
    if baseline is not None:
        efficiency = ratio_of_medians(baseline["metrics"]["per_sample_gpu_time_s"]["samples"],
                                      run["metrics"]["per_sample_gpu_time_s"]["samples"])
        if efficiency.low is not None and efficiency.low > 1:
            found.append(warning(
                "scaling_above_perfect",
                f"scaling efficiency {efficiency.median:.0%} (its {LEVEL:.0%} interval [{efficiency.low:.0%}, {efficiency.high:.0%}] "
                f"lies above 100%): {run['world_size']} ranks did more than {run['world_size']} times the work of one", cause))
    exposed = (run.get("derived") or {}).get("exposed_comm_s")
    if exposed is not None and exposed < 0:
        step = _median(run, "step_time_s")
        found.append(warning(
            "negative_exposed_comm",
            f"exposed communication {exposed * 1e3:.4g} ms is negative: the 1-GPU step for the same work per rank "
            f"({(step - exposed) * 1e3:.4g} ms) is slower than this {run['world_size']}-GPU step ({step * 1e3:.4g} ms)", cause))
    return found
