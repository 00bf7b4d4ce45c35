"""The ddp suite's figures derived from several runs of one host: scaling efficiency, the compute + exposed communication model,
and the plausibility of both.

The baseline of an N-GPU ddp run is a world-size-1 run with the same model, shapes and precision
(bench.suites.training.derived.Baselines): the one with its work per GPU (global batch / N, so the
same micro-batch and accumulation), which the 1-GPU launch trains beside the plan's global batches;
where a bundle has none, the one with its global batch (strong scaling). Under weak scaling (a fixed
accumulation) the two are one run.

scaling_efficiency = per-sample time x #GPUs of the baseline / the same of the N-GPU run
(1.0 is perfect scaling), from the medians.

Plausibility (warnings): a figure no correct measurement can give is flagged on its run
(`bench.suites.training.derived.scaling_warnings`: code, message, likely cause), never printed silently.

The compute + exposed communication model, in step time (medians):
  compute_s = T1 x (per-GPU batch of the N-GPU run / global batch of the baseline): the
              1-GPU step time at the N-GPU run's batch per GPU; T1 itself with the baseline of the
              same work per GPU, T1 / N against strong scaling's (the optimizer step scaled with it, a
              small understatement)
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
from bench.suites.training.derived import BASELINE_NOTE, Baselines, baseline_note, baselines_of, collective_curves, curve_key, curve_of, one_rank_runs

VARYING = ("global_batch", "grad_accum", "num_params", "train_flops_per_sample", "baseline_for")
# The all_reduce dtype of a ddp run's gradients: the weights' own (fp32 under autocast too; bf16 weights
# give bf16 gradients), or bf16 by the compress hook.
REDUCE_DTYPES = {"fp32": "float32", "bf16": "bfloat16"}
DERIVED_NOTES = ("no 1-GPU run of the same shape", "no all_reduce results for transport", "all-reduce time extrapolated", BASELINE_NOTE)


def _shape_key(run: Run) -> tuple:
    """What a run and its baselines share: everything but the batch."""
    return (run.suite, repr(sorted((k, v) for k, v in run.params.items() if k not in VARYING)))


def _ok_ddp(runs: "list[Run]") -> "list[Run]":
    return [r for r in runs if r.suite == "ddp" and r.ok]


def scaling_baselines(runs: "list[Run]") -> "dict[int, Baselines]":
    """id(run) -> its baselines, for every ok ddp run of one host."""
    one_rank = one_rank_runs(_ok_ddp(runs), _shape_key)
    return {id(run): baselines_of(run, one_rank, _shape_key(run)) for run in _ok_ddp(runs)}


def baselines(runs: "list[Run]") -> "dict[int, Run]":
    """id(run) -> the 1-GPU run it is compared with, for every ok ddp run of one host that has one."""
    return {key: found.used for key, found in scaling_baselines(runs).items() if found.used is not None}


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
    found = scaling_baselines(runs)
    for run in _ok_ddp(runs):
        if run.world_size == 1:
            continue
        derived, notes = run.record.setdefault("derived", {}), []
        baseline = found[id(run)].used
        compute_s = None
        if baseline is None:
            notes.append("no 1-GPU run of the same shape in this bundle: no exposed communication or prediction")
        else:
            notes.append(baseline_note(run, found[id(run)]))
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
