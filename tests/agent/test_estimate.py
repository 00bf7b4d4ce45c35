"""Say it before, show it during: the launches and their estimated duration before the first
one (an earlier run of the plan here, else the cost model), one line per finished configuration
with the elapsed time and an ETA, a plan that cannot finish within its own timeout_s refused
before anything runs, and the shipped plans' budgets."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
import yaml

from bench import suites
from bench.agent.estimate import eta_off
from bench.bundle import read_bundle
from bench.common.host import Capabilities
from bench.controller.plans import load_plan, with_defaults
from bench.controller.progress import describe_s
from bench.suites.training import cost as training_cost
from benchmarks import plan_durations
from tests.conftest import REPO, TEST_PLANS, bundle_path_from, cli


def test_the_run_announces_its_launches_and_reports_each_configuration(quick_run, quick_bundle):
    stderr = quick_run[0].stderr
    # On the CPU quick runs each launch three times (launch_repeats), round by round over the plan; the
    # launches of a job (two ranks each) one after the other.
    # A CPU has no P2P: no gate is announced or run.
    assert "P2P gate" not in stderr
    assert re.search(r"^\[local\] 9 launches, estimated (\d+ min )?\d+ s( \(this CPU [\d.]+x slower "
                     r"than idle: other processes\))? in all: 00-collectives-default-ws2 \(7 configurations, ~\d+ s\), 01-ddp-default-ws2 "
                     r"\(1 configuration, ~\d+ s\), 01-ddp-default-ws1 \(1 configuration, ~\d+ s\), 00-collectives-default-ws2-r2 ",
                     stderr, re.M)
    points = [line for line in stderr.splitlines() if line.startswith("[local] 00-collectives-default-ws2 ") and "/7 " in line]
    runs = [r for r in quick_bundle["hosts"][0]["runs"] if r["launch_id"] == "00-collectives-default-ws2"]
    assert len(points) == len(runs) == 7
    assert points[0].startswith("[local] 00-collectives-default-ws2 1/7 all_reduce float32 4 KiB, 2 ranks (elapsed ")
    assert all(re.search(r"\(elapsed (\d+ min )?\d+ s; ETA (\d+ min )?\d+ s\)$", line) for line in points)
    assert re.search(r"^\[local\] 01-ddp-default-ws2 ok \((\d+ min )?\d+ s; estimated (\d+ min )?\d+ s\)$", stderr, re.M)
    assert re.search(r"^launch time: host local: \d+ s in 9 launches \(6 jobs\), measured [\d.]+ s \(\d+%\); the most beside it: ",
                     stderr, re.M)


def test_a_plan_estimated_past_its_timeout_is_refused_before_anything_runs(tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({"name": "too-long", "timeout_s": 5, "suites": [{
        "suite": "ddp", "world_sizes": [2],
        "params": {"model": "tiny", "micro_batch": 2, "seq_len": 32, "steps": 1000, "warmup_steps": 1, "precision": "fp32"}}]}))
    done = cli("run", "--plan", str(plan), "--out", str(tmp_path / "results"))
    assert done.returncode == 1
    assert re.search(r"error: host local: failed: launch 00-ddp-default-ws2 is estimated at \d+ s on this host, "
                     r"longer than the plan's timeout_s 5: raise timeout_s, or trim the entry", done.stderr)
    assert not list(tmp_path.glob("results/*/hosts/local/launches"))


@pytest.mark.parametrize("duration_s, estimate_s, said", [
    (100, 40, "more than 2x the estimate"), (100, 250, "less than 1/2 of the estimate"), (100, 60, ""), (100, 190, ""),
    (2, 0.9, ""), (0.4, 3, ""),  # a few seconds off: no ETA moves by what a reader would notice
    (12, 5, "more than 2x the estimate"), (3, 10, "less than 1/2 of the estimate"),
])
def test_an_eta_off_by_more_than_2x_and_seconds_is_said(duration_s, estimate_s, said):
    assert (said in eta_off(duration_s, estimate_s)) and bool(said) == bool(eta_off(duration_s, estimate_s))


# The plans' budgets on 2x H200, start-up and compilation included; seed001-sharded's: 20 minutes.
BUDGETS_S = {"quick": 90, "seed001": 240, "seed002": 480, "seed000": 600, "collectives-sweep": 360, "seed001-sharded": 1200}


@pytest.mark.parametrize("name", sorted(BUDGETS_S))
def test_each_shipped_plan_fits_its_budget_on_2x_h200_by_the_cost_model(name):
    seconds, _, points, _ = plan_durations.plan_seconds(load_plan(name), plan_durations.MACHINES["2x H200 (NV18)"])
    assert seconds <= BUDGETS_S[name] and points > 0


def typed(suite: str, params: dict):
    """A suite's typed params from a plan entry's, the schema's defaults filled in."""
    return suites.get(suite).params(with_defaults({"suites": [{"suite": suite, "params": params}]})["suites"][0]["params"])


def test_the_cost_model_knows_graphs_shorten_the_unets_step_and_gloo_fills_host_buffers():
    h200x2 = Capabilities.of(plan_durations.MACHINES["2x H200 (NV18)"])
    unet = {"model": "sdxl-unet", "micro_batch": 2, "global_batches": [64], "steps": 100, "warmup_steps": 1, "compile": False,
            "weights_dtype": "bfloat16"}
    eager, graphed = (suites.get("ddp").launch_seconds(typed("ddp", {**unet, "cuda_graphs": g}), "default", 1, h200x2) for g in (False, True))
    assert graphed < eager / 2
    sweep = {"ops": ["all_reduce"], "dtypes": ["bfloat16"], "in_place": [True], "begin_bytes": 1_400_000_000,
             "end_bytes": 1_400_000_000, "factor": 2, "warmup_iters": 1, "iters": 1, "repetitions": 5}
    # seed002's 1.4 GB gloo point took 43 s on a 2x H200 host, 6 s of it in the calls
    assert 30 < suites.get("collectives").launch_seconds(typed("collectives", sweep), "gloo", 2, h200x2) < 60


def test_configurations_count_the_sendrecv_matrix_and_both_placements():
    params = {"ops": ["all_gather", "sendrecv"], "dtypes": ["float32"], "in_place": [False, True],
              "begin_bytes": 1024, "end_bytes": 4096, "factor": 2, "p2p_sizes_bytes": [1024],
              "warmup_iters": 1, "iters": 1, "repetitions": 1}
    assert suites.get("collectives").configurations(typed("collectives", params), 4, Capabilities(gpu_count=0)) == 3 * 2 + 4 * 3


def test_copy_configurations_follow_the_machines_gpus():
    """One process drives every GPU: h2d/d2h per GPU, d2d per ordered pair; host copies alone without a GPU."""
    copy = suites.get("copy")
    params = copy.params(load_plan("copy")["suites"][0]["params"])  # 3 directions, 2 engines, both ways, 4 MiB..1 GiB by 4: 5 sizes
    two_gpus = Capabilities.of(plan_durations.MACHINES["2x H200 (NV18)"])
    assert copy.configurations(params, 1, two_gpus) == (2 + 2 + 2) * 2 * 2 * 5
    assert copy.configurations(params, 1, Capabilities(gpu_count=0)) == 5
    assert copy.launch_seconds(params, "default", 1, two_gpus) > 0


def test_an_earlier_run_of_the_plan_here_gives_the_estimate(tmp_path):
    out = tmp_path / "results"
    plan = str(TEST_PLANS / "short-second-launch.yaml")
    first = cli("run", "--plan", plan, "--out", str(out))
    assert first.returncode == 0, first.stderr
    durations = {l["id"]: l["duration_s"] for l in read_bundle(bundle_path_from(first.stdout))["hosts"][0]["launches"]}
    second = cli("run", "--plan", plan, "--out", str(out))
    assert second.returncode == 0, second.stderr
    announced = next(line for line in second.stderr.splitlines() if " launches, estimated " in line)
    for launch, seconds in durations.items():
        seconds_said = re.escape(describe_s(round(seconds, 1)))  # the agent keeps 0.1 s
        assert re.search(re.escape(launch) + r" \(\d+ configurations?, ~" + seconds_said + r", as measured before\)", announced)


def test_the_estimate_counts_the_sampling_the_plans_precision_asks_for():
    """Each run of a plan with precision is priced its expected sampling past its minimum, never past its budget:
    on a shared CPU, where nothing clears +-2%, all of it."""
    from bench.agent.estimate import modelled
    from bench.agent.planning import plan_launches

    cpu = Capabilities(gpu_count=0, logical_cpus=2)
    plan = load_plan("quick")
    plain = {key: value for key, value in plan.items() if key != "precision"}
    for launch in (l for l in plan_launches(plan, cpu) if not l.skipped_reason):
        base, priced = modelled(replace(launch, precision=None), cpu), modelled(launch, cpu)
        cap = suites.get(launch.suite).params(launch.params).sampling_cap_s
        assert priced.seconds == pytest.approx(base.seconds + priced.sampling_s)
        assert priced.sampling_s == pytest.approx(base.configurations * cap)
    assert plan_launches(plain, cpu)[0].precision is None


def test_the_estimate_counts_the_sampling_a_cv_target_asks_for():
    """An entry with a cv_target samples until that steady: its estimate must count it (1 min 01 s
    said, 2 min 45 s taken on this CPU machine by a quick whose entries all had one)."""
    from bench.agent.estimate import SAMPLING_ROUNDS, modelled
    from bench.agent.planning import plan_launches

    cpu = Capabilities(gpu_count=0, logical_cpus=2)
    # A cv_target's sampling alone, within the schema's sampling_cap_s (quick's CPU form lowers it for its precision).
    plan = {key: value for key, value in load_plan("quick").items() if key != "precision"}
    plan["suites"] = [{**e, "cpu": {k: v for k, v in e["cpu"].items() if k != "sampling_cap_s"}} for e in plan["suites"]]
    sampled = {**plan, "suites": [{**entry, "params": {**entry["params"], "cv_target": 0.01}} for entry in plan["suites"]]}
    plain = {l.id: l for l in plan_launches(plan, cpu)}
    totals = [0.0, 0.0]
    for launch in (l for l in plan_launches(sampled, cpu) if not l.skipped_reason):
        base, sampled_launch = modelled(plain[launch.id], cpu), modelled(launch, cpu)
        seconds = sampled_launch.seconds
        assert base.seconds < seconds <= base.seconds + base.configurations * suites.get(launch.suite).params(launch.params).sampling_cap_s
        totals = [totals[0] + base.seconds, totals[1] + seconds]
    assert totals[1] > 1.5 * totals[0] and SAMPLING_ROUNDS > 1

def test_a_small_eager_micro_batch_is_priced_at_its_measured_time_and_host_paced_sampling(monkeypatch):
    """On a fast GPU a small eager micro-batch waits on the host launching its kernels: priced by its FLOPs
    it was 2-8x short. Where its setup was measured, no micro-batch as small is priced below it, and its
    sampling stops as a host-paced run's does; a larger, compiled or other setup keeps the FLOPs' price
    and a typical spread's sampling."""
    from bench.common.launch_costs import MEASURED
    from bench.common.sampling import HOST_PACED_SAMPLES, TYPICAL_CV, samples_needed

    measured = {"ddp gpt2-large": {"micro_batch": 2, "micro_batch_s": 0.1, "runs": 1}}
    monkeypatch.setitem(MEASURED["gpu"], "eager_micro_batches", measured)
    h100 = Capabilities.of(plan_durations.MACHINES["4x H100 (NV18)"])
    entry = {"model": "gpt2-large", "seq_len": 1024, "global_batches": [4], "steps": 10, "warmup_steps": 3, "precision": "bf16", "compile": False}

    def priced(suite: str, **params):
        typed_params = typed(suite, {**entry, **params})
        samples = suites.get(suite).expected_samples(typed_params, "default", 1, h100, 0.005)
        return suites.get(suite).priced(typed_params, "default", 1, h100), typed_params.steps, samples

    (small, steps, small_samples), (smaller, _, smaller_samples) = priced("ddp", micro_batch=2), priced("ddp", micro_batch=1)
    assert small.measured_s == pytest.approx(steps * (2 * 0.1 + training_cost.STEP_OVERHEAD_S["gpu"]))
    assert smaller.measured_s == pytest.approx(steps * (4 * 0.1 + training_cost.STEP_OVERHEAD_S["gpu"]))
    assert small.host_paced and smaller.host_paced and small_samples == smaller_samples == HOST_PACED_SAMPLES
    for other, _, samples in (priced("ddp", micro_batch=4), priced("ddp", micro_batch=2, compile=True),
                              priced("fsdp", micro_batch=2, sharding="full")):
        assert other.measured_s < small.measured_s / 2 and not other.host_paced
        assert samples == samples_needed(0.005, TYPICAL_CV["gpu"]) > HOST_PACED_SAMPLES


def test_a_profiled_step_of_a_measured_setup_costs_its_trace_per_micro_batch(monkeypatch):
    """Reading a profiled step's trace follows the kernels its micro-batches launch: where the setup's was
    measured, each profiled step costs that per micro-batch, at any micro-batch size; elsewhere nothing."""
    from bench.common.launch_costs import MEASURED

    h100 = Capabilities.of(plan_durations.MACHINES["4x H100 (NV18)"])
    entry = {"model": "gpt2-large", "seq_len": 1024, "global_batches": [8], "steps": 10, "warmup_steps": 3, "precision": "bf16",
             "compile": False, "profile_steps": 2}

    def seconds(trace: "dict | None", micro_batch: int) -> float:
        measured = {"micro_batch": 2, "micro_batch_s": 0.1, "runs": 1, **(trace or {})}
        monkeypatch.setitem(MEASURED["gpu"], "eager_micro_batches", {"ddp gpt2-large": measured})
        return suites.get("ddp").priced(typed("ddp", {**entry, "micro_batch": micro_batch}), "default", 1, h100).seconds

    for micro_batch in (2, 4):  # 4 and 2 micro-batches of global batch 8, 2 profiled steps
        traced = seconds({"trace_s": 0.25, "profiled_runs": 3}, micro_batch) - seconds(None, micro_batch)
        assert traced == pytest.approx(2 * (8 // micro_batch) * 0.25)


def test_the_plans_the_gpu_costs_were_fitted_on_are_estimated_within_15_percent():
    """The cost model against what it was fitted on: the bundles that bench/common/launch_costs.py names for
    the GPU, each plan priced on its hosts, within +-15% of its launches' measured time over its runs. A
    launch whose host-paced runs sampled past where sampling now stops them (HOST_PACED_SAMPLES, or the
    entry's steps) is left out: the model prices sampling as it runs now."""
    from bench.common.launch_costs import MEASURED
    from bench.common.sampling import HOST_PACED_SAMPLES
    from benchmarks import estimate_error

    run_ids = re.findall(r"bundle (\S+) \(", MEASURED["gpu"]["source"])
    by_plan: dict = {}
    left_out = set()
    for run_id in run_ids:
        (path,) = (REPO / "benchmarks" / "results").glob(f"bundles*/{run_id}.bundle.json*")  # those set aside too
        bundle = read_bundle(path)
        for host in bundle["hosts"]:
            left_out |= {(run_id, run["launch_id"]) for run in host["runs"] if run.get("sampling") and (run.get("pacing") or {}).get("verdict") == "host-paced"
                         and run["sampling"]["samples"] > max(HOST_PACED_SAMPLES, run["params"]["steps"])}
        for _, launches in estimate_error.rows(bundle):
            kept = [(measured, estimated) for launch, measured, estimated in launches if (run_id, launch) not in left_out]
            totals = by_plan.setdefault(bundle["plan"]["name"], [0.0, 0.0])
            totals[0] += sum(measured for measured, _ in kept)
            totals[1] += sum(estimated for _, estimated in kept)
    assert by_plan and all(estimated for _, estimated in by_plan.values())  # every plan keeps launches to judge
    for plan, (measured, estimated) in by_plan.items():
        assert abs(measured / estimated - 1) <= 0.15, f"{plan}: {measured:.1f} s measured, {estimated:.1f} s estimated"
