"""The fsdp suite's figures derived from several runs of one host: scaling against the plain model on
one GPU, the compute + exposed communication model's prediction with FSDP's collectives, and their
plausibility.

The baseline of an fsdp run is the ddp suite's world-size-1 run of the same model, recipe and shape
(one rank training the plain model, no wrapper: what a single-GPU script gives), with its work per
GPU (global batch / N: the same micro-batch and accumulation) where measured, else with its global
batch (strong scaling; bench.suites.training.derived.Baselines); the default preset's where there
are several. An fsdp run on one GPU is scaled against it too: its efficiency is what FSDP's
machinery costs with no peer. Where the bundle has no such ddp run, the fsdp suite's own
world-size-1 run of the same shape and sharding stands in, and a note on the run says so (FSDP's own
cost on one GPU is then inside the baseline); without either there is no scaling.

The compute + exposed communication model, with FSDP's collectives (medians):
  compute_s = the baseline's step time at this run's batch per GPU
  predicted_step_time_s = compute_s + all_gather_time_s + reduce_scatter_time_s, fully exposed: each
      the step's calls x the time of one call of (its bytes / calls) on the same host's sweep of that
      op (same transport, world size and nodes; the curve of the dtype moved where measured: gathers
      in the compute dtype, scatters in the reduce dtype). Equal calls stand for the step's units: the
      root's gather is several times a block's, which the bandwidth regime of large messages forgives.
  exposed_comm_s = measured step time - compute_s
Hybrid sharding gathers within a node and all-reduces across nodes, which no sweep over every rank
prices: no prediction, with a note.
"""

from __future__ import annotations

from bench.common.allreduce import curve_time
from bench.common.run import Run
from bench.suites.training import of_plain_model, training_recipe
from bench.suites.training.derived import Baselines, baseline_note, baselines_of, collective_curves, curve_key, curve_of, one_rank_runs

REDUCE_DTYPES = {"bf16": "bfloat16", "fp32": "float32"}
OWN_BASELINE = ("baseline: FSDP on one GPU (this bundle has no 1-GPU run of the plain model of the same shape): the scaling "
                "leaves out what FSDP itself costs on one GPU")


def _ok(runs: "list[Run]") -> "list[Run]":
    return [r for r in runs if r.suite == "fsdp" and r.ok]


def _shape(run: Run) -> tuple:
    """What a run and its 1-GPU baseline share, whatever suite trained it: everything but the batch."""
    p = run.params
    return (p["model"], training_recipe(p), p.get("seq_len"), p["micro_batch"])


def _sharded(run: Run) -> tuple:
    return (_shape(run), run.params["sharding"], run.params.get("reduce_dtype"))


def scaling_baselines(runs: "list[Run]") -> "dict[int, Baselines]":
    """id(run) -> its baselines, for every ok fsdp run of one host: the plain model's, else (N-GPU runs)
    fsdp's own one-GPU run's."""
    plain = one_rank_runs([r for r in runs if of_plain_model(r)], _shape)
    own = one_rank_runs(_ok(runs), _sharded)
    found = {}
    for run in _ok(runs):
        mine = baselines_of(run, plain, _shape(run))
        if mine.used is None and run.world_size > 1:
            mine = baselines_of(run, own, _sharded(run))
        found[id(run)] = mine
    return found


def baselines(runs: "list[Run]") -> "dict[int, Run]":
    """id(run) -> the run it is scaled against, for every ok fsdp run of one host that has one."""
    return {key: found.used for key, found in scaling_baselines(runs).items() if found.used is not None}


def derive_scaling(runs: "list[Run]") -> None:
    """Set derived.scaling_efficiency_fraction on every ok fsdp run that has a baseline (a note where
    the baseline is FSDP's own one-GPU run)."""
    found = baselines(runs)
    for run in _ok(runs):
        baseline = found.get(id(run))
        mine, base = run.median("per_sample_gpu_time_s"), baseline and baseline.median("per_sample_gpu_time_s")
        run.record.setdefault("derived", {})["scaling_efficiency_fraction"] = base / mine if base and mine else None


def _collective_s(curves: dict, key: tuple, run: Run, op: str, dtype: str, notes: list) -> "float | None":
    calls, moved = run.median(f"{op}_calls_per_step_count"), run.median(f"{op}_bytes")
    dtypes = curves.get(key)
    if dtypes is None:
        notes.append(f"no {op} results for transport {key[0]} at {key[1]} ranks in this bundle: no prediction")
        return None
    if not calls or moved is None:
        return 0.0
    curve = curve_of(dtypes, dtype)
    seconds, extrapolated = curve_time(curve, moved / calls)
    if extrapolated:
        notes.append(f"{op} time extrapolated: its calls ({moved / calls:.0f} bytes) exceed the largest {op} size measured "
                     f"({curve[-1][0]} bytes); that size's bandwidth was used")
    return calls * seconds


def derive_prediction(runs: "list[Run]", launches: list[dict]) -> None:
    """Set derived exposed_comm_s, all_gather_time_s, reduce_scatter_time_s and predicted_step_time_s on
    every ok N-GPU fsdp run; a figure whose inputs are not in the runs is null, and a note says which."""
    nodes_of_launch = {launch["id"]: launch.get("nodes", 1) for launch in launches}
    curves = {op: collective_curves(runs, op, nodes_of_launch) for op in ("all_gather", "reduce_scatter")}
    found = scaling_baselines(runs)
    for run in _ok(runs):
        if run.world_size == 1:
            continue
        derived, notes = run.record.setdefault("derived", {}), []
        p, baseline = run.params, found[id(run)].used
        if baseline is not None:
            notes.append(baseline_note(run, found[id(run)]))
        if baseline is not None and baseline.suite == "fsdp":
            notes.append(OWN_BASELINE)
        compute_s = None
        if baseline is None:
            notes.append("no 1-GPU run of the same shape in this bundle (the plain model's, or fsdp's own): no scaling, exposed communication or prediction")
        else:
            compute_s = baseline.median("step_time_s") * p["global_batch"] / run.world_size / baseline.params["global_batch"]
        derived["exposed_comm_s"] = None if compute_s is None else run.median("step_time_s") - compute_s
        key = curve_key(run, nodes_of_launch)
        gather_s = scatter_s = None
        if p["sharding"] == "hybrid":
            notes.append("hybrid sharding gathers within a node and all-reduces across nodes; the sweeps run over every rank: no prediction")
        else:
            gathered = "bfloat16" if p["precision"] == "bf16" or p.get("weights_dtype") == "bfloat16" else "float32"
            gather_s = _collective_s(curves["all_gather"], key, run, "all_gather", gathered, notes)
            scatter_s = _collective_s(curves["reduce_scatter"], key, run, "reduce_scatter", REDUCE_DTYPES[p.get("reduce_dtype", "fp32")], notes)
        derived["all_gather_time_s"], derived["reduce_scatter_time_s"] = gather_s, scatter_s
        derived["predicted_step_time_s"] = (None if compute_s is None or gather_s is None or scatter_s is None
                                            else compute_s + gather_s + scatter_s)
        if notes:
            run.record["notes"] = notes
        else:
            run.record.pop("notes", None)  # derived again on resume: an input may have arrived since
