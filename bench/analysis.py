"""Figures derived from several runs of one host: scaling efficiency against the 1-GPU baseline.

scaling_efficiency = per-sample time x #GPUs of the 1-GPU run / the same of the N-GPU run
(seed 000's metric; 1.0 is perfect scaling). The baseline is the world-size-1 run with the
same model, shapes and precision, and the same global batch when a sweep fixes it (or the
same accumulation when the batch per GPU is fixed).
"""

from __future__ import annotations

VARYING = ("global_batch", "grad_accum", "num_params")


def _shape_key(run: dict) -> tuple:
    params = run["params"]
    fixed = "global_batch" if params.get("global_batches") else "grad_accum"
    same = {k: v for k, v in params.items() if k not in VARYING}
    return (run["suite"], repr(sorted(same.items())), fixed, params.get(fixed))


def _median(run: dict, metric: str) -> "float | None":
    found = run["metrics"].get(metric)
    return found["summary"]["median"] if found else None


def baselines(runs: list[dict]) -> "dict[int, dict]":
    """id(run) -> the 1-GPU run it is compared with, for every ok ddp run of one host that has one."""
    by_shape = {}
    for run in runs:
        if run["suite"] == "ddp" and run["status"] == "ok" and run["world_size"] == 1:
            # Prefer the default preset's run; with one rank there is no link to differ.
            key = _shape_key(run)
            if key not in by_shape or run["transport"]["preset"] == "default":
                by_shape[key] = run
    found = {}
    for run in runs:
        if run["suite"] == "ddp" and run["status"] == "ok" and _shape_key(run) in by_shape:
            found[id(run)] = by_shape[_shape_key(run)]
    return found


def derive_scaling(runs: list[dict]) -> None:
    """Set derived.scaling_efficiency_fraction on every ok ddp run that has a baseline."""
    found = baselines(runs)
    for run in runs:
        if run["suite"] != "ddp" or run["status"] != "ok":
            continue
        baseline = found.get(id(run))
        mine, base = _median(run, "per_sample_gpu_time_s"), baseline and _median(baseline, "per_sample_gpu_time_s")
        run.setdefault("derived", {})["scaling_efficiency_fraction"] = base / mine if base and mine else None
