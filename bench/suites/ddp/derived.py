"""The ddp suite's figures derived from several runs of one host: scaling efficiency, the compute + exposed communication model,
and the plausibility of both.

The baseline of an N-GPU ddp run is the world-size-1 run with the same model, shapes and
precision, and the same global batch when a sweep fixes it (strong scaling) or the same
accumulation when the batch per GPU is fixed (weak scaling).

scaling_efficiency = per-sample time x #GPUs of the baseline / the same of the N-GPU run
(1.0 is perfect scaling), from the medians.

Plausibility (warnings): a figure no correct measurement can give is flagged on its run
(`bench.suites.training.derived.scaling_warnings`: code, message, likely cause), never printed silently.

The compute + exposed communication model, in step time (medians):
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

from bench.common.allreduce import curve_time
from bench.common.run import Run
from bench.suites.training.derived import collective_curves, curve_key, curve_of

VARYING = ("global_batch", "grad_accum", "num_params", "train_flops_per_sample")
# The all_reduce dtype of a ddp run's gradients: the weights' own (fp32 under autocast too; bf16 weights
# give bf16 gradients), or bf16 by the compress hook.
REDUCE_DTYPES = {"fp32": "float32", "bf16": "bfloat16"}
DERIVED_NOTES = ("no 1-GPU run of the same shape", "no all_reduce results for transport", "all-reduce time extrapolated")


def _shape_key(run: Run) -> tuple:
    """What a run and its baseline share; the repeat too (launch_repeats): each repeat's N-GPU run
    is compared with the baseline measured in the same turn."""
    params = run.params
    fixed = "global_batch" if params.get("global_batches") else "grad_accum"
    same = {k: v for k, v in params.items() if k not in VARYING}
    return (run.suite, repr(sorted(same.items())), fixed, params.get(fixed), run.repeat)


def _ok_ddp(runs: "list[Run]") -> "list[Run]":
    return [r for r in runs if r.suite == "ddp" and r.ok]


def baselines(runs: "list[Run]") -> "dict[int, Run]":
    """id(run) -> the 1-GPU run it is compared with, for every ok ddp run of one host that has one."""
    by_shape = {}
    for run in _ok_ddp(runs):
        if run.world_size == 1:
            # Prefer the default preset's run; with one rank there is no link to differ.
            key = _shape_key(run)
            if key not in by_shape or run.preset == "default":
                by_shape[key] = run
    return {id(run): by_shape[_shape_key(run)] for run in _ok_ddp(runs) if _shape_key(run) in by_shape}


def derive_scaling(runs: "list[Run]") -> None:
    """Set derived.scaling_efficiency_fraction on every ok ddp run that has a baseline."""
    found = baselines(runs)
    for run in _ok_ddp(runs):
        baseline = found.get(id(run))
        mine, base = run.median("per_sample_gpu_time_s"), baseline and baseline.median("per_sample_gpu_time_s")
        run.record.setdefault("derived", {})["scaling_efficiency_fraction"] = base / mine if base and mine else None


def gradient_curve(dtypes: dict, run: Run) -> list[tuple]:
    """The curve of the dtype DDP reduces in, else the one that reaches the largest size."""
    params = run.params
    reduced = "bfloat16" if params.get("weights_dtype") == "bfloat16" else REDUCE_DTYPES[params.get("grad_reduce_dtype", "fp32")]
    return curve_of(dtypes, reduced)


def derive_prediction(runs: "list[Run]", launches: list[dict]) -> None:
    """Set derived predicted_step_time_s, allreduce_time_s and exposed_comm_s on every ok N-GPU ddp run.

    A figure whose inputs are not in the runs (no baseline, no all_reduce results for that
    transport) is null, and a note on the run says which input is missing.
    """
    nodes_of_launch = {launch["id"]: launch.get("nodes", 1) for launch in launches}
    curves = collective_curves(runs, "all_reduce", nodes_of_launch)
    found = baselines(runs)
    for run in _ok_ddp(runs):
        if run.world_size == 1:
            continue
        derived, notes = run.record.setdefault("derived", {}), []
        baseline = found.get(id(run))
        compute_s = None
        if baseline is None:
            notes.append("no 1-GPU run of the same shape in this bundle: no exposed communication or prediction")
        else:
            per_gpu_batch = run.params["global_batch"] / run.world_size
            compute_s = baseline.median("step_time_s") * per_gpu_batch / baseline.params["global_batch"]
        derived["exposed_comm_s"] = None if compute_s is None else run.median("step_time_s") - compute_s
        preset = run.preset
        dtypes = curves.get(curve_key(run, nodes_of_launch))
        curve = dtypes and gradient_curve(dtypes, run)
        allreduce_s = None
        if curve is None:
            notes.append(f"no all_reduce results for transport {preset} at {run.world_size} ranks in this bundle: no prediction")
        else:
            grad_bytes = run.median("grad_allreduce_bytes")
            allreduce_s, extrapolated = curve_time(curve, grad_bytes)
            if extrapolated:
                notes.append(
                    f"all-reduce time extrapolated: the gradients ({grad_bytes:.0f} bytes) exceed the largest all_reduce "
                    f"size measured ({curve[-1][0]} bytes); that size's bandwidth was used"
                )
        derived["allreduce_time_s"] = allreduce_s
        derived["predicted_step_time_s"] = None if compute_s is None or allreduce_s is None else compute_s + allreduce_s
        # Derived again on resume (an input may have arrived since): this function's notes are replaced,
        # the ranks' own (a sampling or warm-up stopped at the launch's deadline) kept.
        kept = [note for note in run.notes if not note.startswith(DERIVED_NOTES)]
        if kept + notes:
            run.record["notes"] = kept + notes
        else:
            run.record.pop("notes", None)
