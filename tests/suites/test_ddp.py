"""DDP suite: real runs on the CPU (gloo, torchrun, the agent and the controller), the metrics'
arithmetic, the compute + exposed communication model, the bad-input cases, and the seed plans' place
beside their posts (tests/suites/test_shipped_plans.py runs every shipped plan)."""
from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import time
import weakref
from dataclasses import replace
from pathlib import Path

import psutil
import pytest
import torch
import torch.distributed as dist
import yaml

from bench.agent import proctree, training
from bench.agent.harness import Context
from bench.agent.planning import plan_launches
from bench.common.host import Capabilities
from bench.common.run import Run
from bench.errors import PlanError
from bench.models import gpt, workload
from bench.models.shapes import GPT_PRESETS
from bench.suites.ddp import ranks as ddp
from bench.common.allreduce import curve_time as allreduce_time
from bench.suites.ddp.derived import derive_prediction, derive_scaling
from bench.suites.ddp.params import Params
from bench.suites.training import PRIMING_STEPS, least_warmup_steps
from bench.bundle import read_bundle
from bench.controller.plans import PLANS_DIR, load_plan, plan_names, with_defaults
from tests.conftest import REPO, cli as ddpbench, start_cli

CPU_HOST = Capabilities(gpu_count=0, gpu_memory_bytes=0, infiniband=False, logical_cpus=2)
# One OpenMP thread per rank: two ranks on two cores, and no spinning threads fighting the
# other engineers' tests for the same cores.
HOSTS_YAML = "hosts:\n  - name: local\n    runtime: local\n    env: {OMP_NUM_THREADS: '1'}\n"

TINY_GPT = {"model": "tiny", "micro_batch": 2, "seq_len": 32, "steps": 4, "warmup_steps": 1, "precision": "fp32", "compile": False}


def typed(params: dict) -> Params:
    """An entry's parameters as a rank gets them: the schema's defaults written out, typed."""
    return Params.of(with_defaults({"suites": [{"suite": "ddp", "params": params}]})["suites"][0]["params"])


def write(path: Path, document) -> Path:
    path.write_text(yaml.safe_dump(document) if path.suffix == ".yaml" else json.dumps(document))
    return path


def run_plan_on_cpu(tmp: Path, plan: "dict | str") -> tuple[subprocess.CompletedProcess, "dict | None"]:
    """`ddpbench run` on this machine; the bundle it wrote, if any."""
    hosts = tmp / "hosts.yaml"
    hosts.write_text(HOSTS_YAML)
    plan_arg = plan if isinstance(plan, str) else str(write(tmp / "plan.yaml", plan))
    done = ddpbench("run", "--hosts", str(hosts), "--plan", plan_arg, "--out", str(tmp / "results"))
    bundles = sorted((tmp / "results").glob("*/bundle.json"))
    return done, read_bundle(bundles[-1]) if bundles else None


def median(run: dict, name: str) -> float:
    return run["metrics"][name]["summary"]["median"]


def ddp_runs(bundle: dict) -> list[dict]:
    return [r for r in bundle["hosts"][0]["runs"] if r["suite"] == "ddp"]


# --- the suite for real: tiny GPT, gloo, world sizes 1 and 2, accumulation 1, 2 and 4 -------------

SWEEP_PLAN = {
    "name": "ddp-sweep",
    "suites": [{
        "suite": "ddp", "world_sizes": [1, 2],
        # 4 and 8 samples per step in micro-batches of 2: 2 ranks accumulate 1 and 2, 1 rank 2 and 4
        "params": {**TINY_GPT, "global_batches": [4, 8], "count_allreduce": True},
    }],
}


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> dict:
    done, bundle = run_plan_on_cpu(tmp_path_factory.mktemp("sweep"), SWEEP_PLAN)
    assert done.returncode == 0, done.stderr
    return bundle


def by_shape(bundle: dict) -> dict:
    return {(r["world_size"], r["params"]["global_batch"]): r for r in ddp_runs(bundle)}


def test_sweep_reaches_each_global_batch_by_accumulation(sweep):
    runs = by_shape(sweep)
    # One rank also trains global batch 2: the work of each of 2 ranks at global batch 4, as their baseline.
    assert sorted(runs) == [(1, 2), (1, 4), (1, 8), (2, 4), (2, 8)]
    assert {k: r["params"]["grad_accum"] for k, r in runs.items()} == {(1, 2): 1, (1, 4): 2, (1, 8): 4, (2, 4): 1, (2, 8): 2}
    assert [k for k, r in runs.items() if "baseline_for" in r["params"]] == [(1, 2)] and runs[(1, 2)]["params"]["baseline_for"] == 2
    assert all(r["status"] == "ok" and r["transport"]["backend"] == "gloo" for r in runs.values())
    assert sweep["hosts"][0]["status"] == "ok"


def test_cpu_baseline_gets_the_threads_and_cores_per_rank_of_the_n_rank_runs(sweep):
    # Planned without a hosts-file override: 2 cores, 2 ranks at most, so 1 thread per rank for
    # the 1-rank baseline too (torchrun alone would give it every core).
    plan = {"suites": [{"suite": "ddp", "world_sizes": [1, 2], "params": TINY_GPT},
                       {"suite": "ddp", "world_sizes": [1], "params": TINY_GPT}]}
    launches = plan_launches(with_defaults(plan), CPU_HOST)
    assert {(l.world_size, l.env["OMP_NUM_THREADS"], l.threads_per_rank) for l in launches} == {(1, "1", 1), (2, "1", 1)}
    # And as the sweep recorded it: the same threads per rank, each rank on cores of its own.
    resources = {l["world_size"]: l["resources"] for l in sweep["hosts"][0]["launches"]}
    assert resources[1]["threads_per_rank"] == resources[2]["threads_per_rank"] == 1
    if len(os.sched_getaffinity(0)) >= 2:
        first, second = resources[2]["cpus_of_local_ranks"]
        assert resources[1]["cpus_of_local_ranks"] == [first] and not set(first) & set(second)


def test_warm_up_runs_until_steady_and_says_how_many_steps(sweep):
    for run in ddp_runs(sweep):
        count = run["metrics"]["warmup_steps_count"]["samples"]
        assert len(count) == 1 and TINY_GPT["warmup_steps"] <= count[0] <= 20  # the plan's least and the default cap


def test_a_gpu_ddp_warm_up_outlasts_the_iterations_ddp_synchronises():
    """DDP waits for the GPU in its first 10 synchronising steps: no timed step may be among them."""
    assert least_warmup_steps(5, steps_taken=0, synced_on_gpu=True) == 11  # quick's gpt2 on 2 GPUs
    assert least_warmup_steps(1, steps_taken=9, synced_on_gpu=True) == 2  # a later global batch of the launch
    assert least_warmup_steps(1, steps_taken=30, synced_on_gpu=True) == 1
    assert least_warmup_steps(2, steps_taken=0, synced_on_gpu=False) == 2  # one rank, or the CPU: no such wait


def test_each_run_says_where_its_time_went_within_its_launch(sweep):
    launches = {launch["id"]: launch for launch in sweep["hosts"][0]["launches"]}
    spent: dict = {}
    for run in ddp_runs(sweep):
        phases = [run["metrics"][name]["samples"] for name in ("setup_s", "warmup_s", "profile_s")]
        assert all(len(seconds) == 1 and seconds[0] >= 0 for seconds in phases)
        first_of_launch = run["params"]["global_batch"] == run["params"]["global_batches"][0]
        assert (phases[0][0] > 0) == first_of_launch  # the model is set up once per launch
        timed_s = run["measured_window"]["end_s"] - run["measured_window"]["start_s"]
        spent[run["launch_id"]] = spent.get(run["launch_id"], 0.0) + sum(seconds[0] for seconds in phases) + timed_s
    assert spent and all(0 < seconds <= launches[launch_id]["duration_s"] for launch_id, seconds in spent.items())


def test_metrics_arithmetic(sweep):
    for (world_size, global_batch), run in by_shape(sweep).items():
        steps = run["metrics"]["step_time_s"]["samples"]
        assert len(steps) == SWEEP_PLAN["suites"][0]["params"]["steps"]  # warm-up steps are not samples
        expected = {
            "per_sample_gpu_time_s": [t / global_batch * world_size for t in steps],
            "samples_per_s": [global_batch / t for t in steps],
            "tokens_per_s": [global_batch * TINY_GPT["seq_len"] / t for t in steps],
        }
        for name, values in expected.items():
            assert run["metrics"][name]["samples"] == pytest.approx(values, rel=1e-12), name
        assert "mfu_fraction" not in run["metrics"]  # no GPU, no peak: never guessed
        grad_bytes = 4 * run["params"]["num_params"]  # fp32 gradients
        assert median(run, "grad_allreduce_bytes") == (grad_bytes if world_size > 1 else 0)
        assert median(run, "peak_memory_bytes") > 0


def test_scaling_efficiency_from_the_medians(sweep):
    runs = by_shape(sweep)
    for global_batch in (4, 8):
        one, two = runs[(1, global_batch // 2)], runs[(2, global_batch)]  # one rank doing the work of each of the two
        expected = median(one, "per_sample_gpu_time_s") / median(two, "per_sample_gpu_time_s")
        assert two["derived"]["scaling_efficiency_fraction"] == pytest.approx(expected, rel=1e-12)
        assert one["derived"]["scaling_efficiency_fraction"] == 1.0


def test_accumulation_all_reduces_once_per_step(sweep):
    runs = by_shape(sweep)
    accum_1, accum_2 = runs[(2, 4)], runs[(2, 8)]
    calls = median(accum_1, "allreduce_calls_per_step_count")
    assert calls >= 1
    # Without no_sync() the second micro-batch would all-reduce every bucket again: twice the calls.
    assert median(accum_2, "allreduce_calls_per_step_count") == calls


def test_exposed_communication_uses_the_1gpu_time_at_the_same_batch_per_gpu(sweep):
    runs = by_shape(sweep)
    for global_batch in (4, 8):
        one, two = runs[(1, global_batch // 2)], runs[(2, global_batch)]
        # Each of 2 ranks does the work of one rank at half the global batch: that run's step is the compute.
        compute_s = median(one, "step_time_s")
        assert two["derived"]["exposed_comm_s"] == pytest.approx(median(two, "step_time_s") - compute_s, rel=1e-9)
        assert two["derived"]["predicted_step_time_s"] is None  # no all_reduce results in this bundle
        assert any("no all_reduce results" in note for note in two["notes"])


# --- FLOPs ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("preset, seq_len", [("tiny", 64), ("gpt2", 1024)])
def test_gpt_flops_formula_matches_torch_flop_counter(preset, seq_len):
    """The counter the UNet's FLOPs come from agrees with the GPT's 6N + attention formula."""
    tokens = torch.randint(100, (2, seq_len + 1))
    counted = workload.count_training_flops(lambda: gpt.GPT(GPT_PRESETS[preset]), (tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()))
    with torch.device("meta"):
        formula = gpt.GPT(GPT_PRESETS[preset]).flops_per_token(seq_len) * seq_len
    assert counted == pytest.approx(formula, rel=0.005)


def test_mfu_is_model_flops_over_the_peak_of_every_gpu():
    metrics = training.throughput_metrics([0.5, 0.25], global_batch=8, world_size=2, tokens_per_sample=None,
                                          flops_per_sample=1e12, peak_tflops=100.0)
    # 8 samples x 1 TFLOP in 0.5 s on 2 GPUs of 100 TFLOP/s: 16 / 200 = 8%
    assert metrics["mfu_fraction"]["samples"] == pytest.approx([0.08, 0.16])
    assert "tokens_per_s" not in metrics
    assert training.throughput_metrics([1.0], 8, 2, 64, 1e12, None).keys() == {
        "step_time_s", "samples_per_s", "per_sample_gpu_time_s", "tokens_per_s"}


# --- the compute + exposed communication model -----------------------------------------------------

def fake_run(suite: str, world_size: int, params: dict, metrics: dict, preset: str = "default", launch_id: str = "x") -> dict:
    return {
        "suite": suite, "world_size": world_size, "status": "ok", "params": params, "launch_id": launch_id,
        "metrics": {k: {"samples": [v], "summary": {"median": v}} for k, v in metrics.items()},
        "transport": {"preset": preset},
    }


def allreduce_runs(points: dict, world_size: int = 2, preset: str = "default", dtype: str = "float32") -> list[dict]:
    return [fake_run("collectives", world_size, {"op": "all_reduce", "dtype": dtype, "size_bytes": size}, {"time_s": t}, preset)
            for size, t in points.items()]


CURVE = [(1_000_000, 0.001), (100_000_000, 0.01)]  # 1 GB/s at 1 MB, 10 GB/s at 100 MB


def test_allreduce_time_interpolates_bandwidth_in_log_size():
    assert allreduce_time(CURVE, 100_000_000) == (0.01, False)
    # 10 MB: half way in log-size, so 5.5 GB/s
    assert allreduce_time(CURVE, 10_000_000) == (pytest.approx(10e6 / 5.5e9), False)
    # below the smallest size: the time of the smallest size at or above it
    assert allreduce_time(CURVE, 1000) == (0.001, False)
    # past the largest: that size's bandwidth, flagged
    assert allreduce_time(CURVE, 400_000_000) == (pytest.approx(0.04), True)


def gpt_ddp_run(world_size: int, global_batch: int, step_s: float, grad_bytes: float, preset: str = "default") -> dict:
    params = {"model": "gpt2", "micro_batch": 4, "global_batches": [16], "global_batch": global_batch, "grad_accum": 1}
    return fake_run("ddp", world_size, params, {
        "step_time_s": step_s, "per_sample_gpu_time_s": step_s / global_batch * world_size, "grad_allreduce_bytes": grad_bytes,
    }, preset, launch_id=f"01-ddp-{preset}-ws{world_size}")


def test_prediction_is_1gpu_share_plus_allreduce_of_the_gradients():
    one, two = gpt_ddp_run(1, 16, 1.0, 0), gpt_ddp_run(2, 16, 0.56, 10_000_000)
    runs = allreduce_runs(dict(CURVE)) + [one, two]
    derive_scaling([Run(run) for run in runs])
    derive_prediction([Run(run) for run in runs], [{"id": "01-ddp-default-ws2", "nodes": 1}])
    derived = two["derived"]
    # strong scaling, 16 samples: each GPU does 8, half the 1-GPU step
    assert derived["allreduce_time_s"] == pytest.approx(10e6 / 5.5e9)
    assert derived["predicted_step_time_s"] == pytest.approx(0.5 + 10e6 / 5.5e9)
    assert derived["exposed_comm_s"] == pytest.approx(0.06)
    assert derived["scaling_efficiency_fraction"] == pytest.approx(1.0 / 1.12)
    assert "exposed_comm_s" not in one["derived"]
    # no 1-GPU run of global batch 8, the work of each GPU: strong scaling's run is the baseline, and the note says so
    assert two["notes"] == ["baseline: 1 GPU at global batch 16, accumulating 1 micro-batch (strong scaling's: no 1-rank run of "
                            "this work per rank)"]


def test_prediction_past_the_measured_sizes_says_so_and_matches_transport():
    one = gpt_ddp_run(1, 16, 1.0, 0)
    socket, p2p_off = gpt_ddp_run(2, 16, 2.0, 400_000_000, "socket"), gpt_ddp_run(2, 16, 1.0, 400_000_000, "p2p_off")
    runs = allreduce_runs(dict(CURVE), preset="socket") + [one, socket, p2p_off]
    derive_prediction([Run(run) for run in runs], [])
    assert socket["derived"]["predicted_step_time_s"] == pytest.approx(0.5 + 0.04)
    assert any("extrapolated" in note and "100000000 bytes" in note for note in socket["notes"])
    assert p2p_off["derived"]["predicted_step_time_s"] is None  # no all_reduce on its transport
    assert p2p_off["derived"]["exposed_comm_s"] == pytest.approx(0.5)


def test_bf16_weights_are_predicted_from_the_bfloat16_all_reduce():
    """bf16 weights give bf16 gradients: the all_reduce curve of that dtype, not float32's, prices them."""
    one, two = gpt_ddp_run(1, 16, 1.0, 0), gpt_ddp_run(2, 16, 0.6, 10_000_000)
    two["params"]["weights_dtype"] = "bfloat16"
    slow_fp32 = allreduce_runs({size: t * 10 for size, t in CURVE})
    runs = slow_fp32 + allreduce_runs(dict(CURVE), dtype="bfloat16") + [one, two]
    derive_prediction([Run(run) for run in runs], [])
    assert two["derived"]["allreduce_time_s"] == pytest.approx(10e6 / 5.5e9)


# --- the memory-lean recipe (24 GB cards) ---------------------------------------------------------

LEAN = {**TINY_GPT, "precision": "bf16", "weights_dtype": "bfloat16", "activation_checkpointing": True, "seed": 0}


def block_calls_and_grads(params: dict) -> tuple[list[int], dict]:
    work = workload.build(typed(params), 1, torch.device("cpu"), 0)
    calls = [0] * len(work.module.blocks)

    def counted(i: int, forward):
        def run(x):
            calls[i] += 1
            return forward(x)
        return run

    for i, block in enumerate(work.module.blocks):
        block.forward = counted(i, block.forward)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        work.module(*work.micro_batches[0]).backward()
    return calls, {name: p.grad for name, p in work.module.named_parameters()}


def test_activation_checkpointing_recomputes_each_block_with_the_same_gradients():
    plain_calls, plain = block_calls_and_grads({**LEAN, "activation_checkpointing": False})
    calls, grads = block_calls_and_grads(LEAN)
    assert plain_calls == [1, 1] and calls == [2, 2]  # forward, then again in backward
    assert all(torch.equal(grads[name], plain[name]) for name in plain)


def test_bf16_weights_make_bf16_gradients_and_half_the_bytes_on_the_link(tmp_path):
    plan = {"name": "lean", "suites": [{"suite": "ddp", "world_sizes": [2], "params": {**LEAN, "optimizer": "adafactor"}}]}
    done, bundle = run_plan_on_cpu(tmp_path, plan)
    assert done.returncode == 0, done.stderr
    (run,) = ddp_runs(bundle)
    assert run["status"] == "ok"
    assert run["metrics"]["grad_allreduce_bytes"]["summary"]["median"] == 2 * run["params"]["num_params"]
    work = workload.build(typed(LEAN), 1, torch.device("cpu"), 0)
    assert {p.dtype for p in work.module.parameters()} == {torch.bfloat16}


def test_adafactor_keeps_far_less_state_than_adamw():
    def state_bytes(name: str) -> int:
        work = workload.build(typed(TINY_GPT), 1, torch.device("cpu"), 0)
        optimizer = training.make_optimizer(name, work.module, ONE_CPU_RANK)
        before = [p.detach().clone() for p in work.module.parameters()]
        work.module(*work.micro_batches[0]).backward()
        optimizer.step()
        assert all(not torch.equal(a, p) for a, p in zip(before, work.module.parameters()))  # it trains
        return sum(t.numel() * t.element_size() for s in optimizer.state.values() for t in s.values() if torch.is_tensor(t))

    assert isinstance(training.make_optimizer("adafactor", torch.nn.Linear(2, 2), ONE_CPU_RANK), torch.optim.Adafactor)
    assert state_bytes("adafactor") < state_bytes("adamw") / 4


# --- bad input -----------------------------------------------------------------------------------

# What the agent gets: the entry's parameters with the schema's defaults written out.
SUITE_PARAMS = with_defaults({"name": "suite", "suites": [{"suite": "ddp", "params": {
    **TINY_GPT, "micro_batch": 1, "global_batches": [2, 4], "steps": 1, "warmup_steps": 1}}]})["suites"][0]["params"]
ONE_CPU_RANK = Context(0, 0, 1, torch.device("cpu"), "gloo")


@pytest.fixture
def process_group(tmp_path):
    dist.init_process_group("gloo", store=dist.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_out_of_memory_is_recorded_and_the_next_global_batch_sets_up_afresh(process_group):
    class OutOfMemory(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, *batch):
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB\nmore detail")

    built, alive_at_build = [], []

    def build(params, accum, device, rank):
        alive_at_build.append([ref() is not None for ref in built])
        work = workload.build(params, accum, device, rank)
        built.append(weakref.ref(work.module))
        if len(built) == 1:  # the first global batch's model runs out of memory
            work.module = OutOfMemory(work.module)
        return work

    records = []
    collecting = gc.isenabled()
    gc.disable()  # only the suite's own collection may free the cycles DDP makes
    try:
        ddp.run(ONE_CPU_RANK, SUITE_PARAMS, records.append, build=build)
    finally:
        if collecting:
            gc.enable()
    assert [(r["params"]["global_batch"], r["status"]) for r in records] == [(2, "oom"), (4, "ok")]
    assert records[0]["error"] == (
        "out of memory at micro_batch 1 (global batch 2): CUDA out of memory. Tried to allocate 20.00 GiB; lower micro_batch")
    assert records[0]["metrics"] == {}
    assert alive_at_build == [[], [False]]  # on a GPU it would still hold the memory the next one needs
    assert built[1]() is None  # freed when the sweep ends, before the process group is


def test_on_a_gpu_each_batch_of_timed_steps_follows_an_untimed_unrecorded_step(monkeypatch):
    """Timed from an idle GPU, a step waits on the host's first launches: one untimed step fills the GPU's
    queue before each batch of timed ones. It is neither timed nor in the timeline; on a CPU none runs."""
    params = Params.of(SUITE_PARAMS)
    trained = ddp.set_up(ONE_CPU_RANK, params, 1, workload.build)
    trained.recorder.recording = True
    on_cpu = training.time_each_call
    monkeypatch.setattr(training, "time_each_call", lambda ctx, fn, count: on_cpu(ONE_CPU_RANK, fn, count))  # no CUDA events here
    gpu = replace(ONE_CPU_RANK, device=torch.device("cuda", 0))
    assert len(training.timed_steps(gpu, trained, 3)) == 3
    assert (trained.steps_taken, len(trained.recorder.steps)) == (3 + PRIMING_STEPS, 3)
    assert len(training.timed_steps(ONE_CPU_RANK, trained, 2)) == 2
    assert (trained.steps_taken, len(trained.recorder.steps)) == (5 + PRIMING_STEPS, 5)


def test_a_sweep_sets_its_model_up_once_and_each_global_batch_steps_over_its_own_micro_batches(process_group):
    """Set-up (and on a GPU, graph capture or compilation) is paid once per launch, not per global batch."""
    builds, forwards = [], []

    def build(params, accum, device, rank):
        builds.append(accum)
        work = workload.build(params, accum, device, rank)
        inner = work.module.forward
        work.module.forward = lambda *batch: forwards.append(1) or inner(*batch)
        return work

    records = []
    ddp.run(ONE_CPU_RANK, {**SUITE_PARAMS, "steps": 2}, records.append, build=build)
    assert builds == [4]  # micro-batches enough for the largest global batch (4 at micro_batch 1)
    first, second = (r["metrics"] for r in records)
    assert first["setup_s"]["samples"][0] > 0 and second["setup_s"]["samples"] == [0.0]
    steps = [int(m["warmup_steps_count"]["samples"][0]) + m["step_time_s"]["summary"]["n"] for m in (first, second)]
    assert len(forwards) == steps[0] * 2 + steps[1] * 4  # global batch 2 is 2 micro-batches a step, 4 is 4


def run_with_oom_on_ranks(tmp_path: Path, ranks: str) -> tuple[subprocess.CompletedProcess, dict, float]:
    """A 2-rank sweep over global batches 4 and 8, then a 1-rank entry; `ranks` run out of memory at batch 4."""
    plan = {"name": "oom", "timeout_s": 300, "suites": [
        {"suite": "ddp", "world_sizes": [2], "params": {**TINY_GPT, "global_batches": [4, 8]}},
        {"suite": "ddp", "world_sizes": [1], "params": TINY_GPT},
    ]}
    hosts = write(tmp_path / "hosts.yaml", yaml.safe_load(HOSTS_YAML))
    helper = REPO / "tests" / "helpers" / "oom_on_ranks"
    began = time.monotonic()
    done = ddpbench("run", "--hosts", str(hosts), "--plan", str(write(tmp_path / "plan.yaml", plan)), "--out", str(tmp_path / "results"),
                    env={"PYTHONPATH": os.pathsep.join([str(REPO), str(helper)]), "DDPBENCH_TEST_OOM_RANKS": ranks})
    return done, read_bundle(next(tmp_path.glob("results/*/bundle.json"))), time.monotonic() - began


def test_every_rank_out_of_memory_is_recorded_and_the_sweep_goes_on(tmp_path):
    done, bundle, _ = run_with_oom_on_ranks(tmp_path, "0,1")
    assert done.returncode == 1  # a configuration that did not fit makes the run partial
    assert done.stderr.endswith("error: host local: partial: out of memory at micro_batch 2 (global batch 4): "
                                "CUDA out of memory. Tried to allocate 20.00 GiB; lower micro_batch\n")
    host = bundle["hosts"][0]
    assert [(r["world_size"], r["params"]["global_batch"], r["status"]) for r in host["runs"]] == [(2, 4, "oom"), (2, 8, "ok"), (1, 2, "ok")]


def test_one_rank_out_of_memory_ends_its_launch_at_once_and_says_why(tmp_path):
    """Its peer waits in the all-reduce: the launch ends with the rank's reason, not after timeout_s."""
    done, bundle, took_s = run_with_oom_on_ranks(tmp_path, "1")
    assert done.returncode == 1
    host = bundle["hosts"][0]
    failed, after = host["launches"]
    assert (failed["id"], failed["status"], after["status"]) == ("00-ddp-default-ws2", "failed", "ok")
    assert failed["error"] == (
        "rank 1 ran out of memory at micro_batch 2 (global batch 4) and its peers did not; "
        "the peers cannot go on without it, so this launch's later configurations did not run; lower micro_batch")
    assert [(r["launch_id"], r["params"]["global_batch"]) for r in host["runs"]] == [("01-ddp-default-ws1", 2)]
    assert took_s < 150  # the plan's timeout_s is 300
    assert done.stderr.endswith(f"error: host local: partial: {failed['error']}\n")


def test_batch_not_divisible_fails_before_anything_launches(tmp_path):
    plan = {"name": "bad", "suites": [{"suite": "ddp", "world_sizes": [1, 2], "params": {**TINY_GPT, "global_batches": [4, 6]}}]}
    done, bundle = run_plan_on_cpu(tmp_path, plan)
    assert done.returncode == 1
    assert "error: host local: failed: ddp: global batch 6 is not divisible by world size 2 x micro_batch 2; choose a multiple of 4" in done.stderr
    assert "Traceback" not in done.stderr
    assert bundle["hosts"][0]["launches"] == [] and not list(tmp_path.glob("results/*/hosts/local/launches"))


@pytest.mark.parametrize("entry, message", [
    ({"params": {**TINY_GPT, "model": "gpt3"}}, "field suites[0].params.model: 'gpt3' is not one of ['tiny', 'gpt2'"),
    ({"params": TINY_GPT, "cpu": {"transport": ["gloo"]}},
     "field suites[0].cpu: Unevaluated properties are not allowed ('transport' was unexpected)"),
    ({"params": {**TINY_GPT, "global_batches": [4]}, "cpu": {"grad_accums": [1, 2]}},
     "field suites[0].params with its cpu: override: global_batches and grad_accums both set the global batches; keep one"),
])
def test_unknown_model_or_key_is_refused_by_the_schema(tmp_path, entry, message):
    plan = write(tmp_path / "plan.yaml", {"name": "bad", "suites": [{"suite": "ddp", **entry}]})
    done = ddpbench("validate", str(plan))
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: {plan}: {message}")
    assert done.stderr.count("\n") == 1


@pytest.mark.parametrize("change, message", [
    ({"seq_len": 512}, "ddp: seq_len 512 is longer than model 'tiny' allows (256); lower seq_len"),
    ({"weights_dtype": "bfloat16"}, "ddp: weights_dtype bfloat16 needs precision bf16 (fp32 compute over bf16 weights is not a recipe "
                                    "anyone trains with); set precision: bf16"),
    ({"seq_len": None}, "ddp: model 'tiny' needs seq_len (tokens per sample); add it to the entry's params"),
])
def test_gpt_shapes_are_checked_before_launch(change, message):
    params = {k: v for k, v in {**TINY_GPT, **change}.items() if v is not None}
    with pytest.raises(PlanError, match=message.replace("(", r"\(").replace(")", r"\)")):
        plan_launches(with_defaults({"suites": [{"suite": "ddp", "params": params}]}), CPU_HOST)


def test_cuda_graphs_are_refused_without_a_gpu_and_beside_compile():
    graphed = {"suite": "ddp", "params": {**TINY_GPT, "cuda_graphs": True}}
    with pytest.raises(PlanError, match="ddp: cuda_graphs replays CUDA graphs, this host has no GPU; "
                                        "set cuda_graphs: false in the entry's cpu: override"):
        plan_launches(with_defaults({"suites": [graphed]}), CPU_HOST)
    gpu = Capabilities(gpu_count=2, gpu_memory_bytes=80 << 30, infiniband=False, logical_cpus=16)
    assert [l.params["cuda_graphs"] for l in plan_launches(with_defaults({"suites": [graphed]}), gpu)] == [True]
    with pytest.raises(PlanError, match="ddp: cuda_graphs replays CUDA graphs, transport 'gloo' trains on the CPU; "
                                        "run 'gloo' in an entry with cuda_graphs: false"):
        plan_launches(with_defaults({"suites": [{**graphed, "transports": ["default", "gloo"]}]}), gpu)
    compiled = {**graphed, "params": {**graphed["params"], "compile": True}}
    with pytest.raises(PlanError, match=r"ddp: cuda_graphs and compile are both on; choose one \(compile: false"):
        plan_launches(with_defaults({"suites": [compiled]}), gpu)


def test_missing_diffusers_names_the_extra(tmp_path):
    blocker = tmp_path / "no-diffusers"
    blocker.mkdir()
    # What Python does for an absent package: find_spec() finds nothing, import fails.
    (blocker / "sitecustomize.py").write_text("import sys\nsys.modules['diffusers'] = None\n")
    hosts = write(tmp_path / "hosts.yaml", yaml.safe_load(HOSTS_YAML))
    done = ddpbench("run", "--hosts", str(hosts), "--plan", "seed000", "--out", str(tmp_path / "results"),
                    env={"PYTHONPATH": os.pathsep.join([str(blocker), str(REPO)])})
    assert done.returncode == 1
    assert (f"error: host local: failed: ddp: model 'tiny-unet' needs diffusers, which is not installed for {sys.executable}; "
            "install the 'sdxl' extra (pip install 'ddpbench[sdxl]', or pip install diffusers) or choose a GPT model") in done.stderr


def test_cpu_override_picks_the_transports_a_cpu_can_run():
    entry = {"suite": "ddp", "transports": ["default", "p2p_off"], "world_sizes": [2], "params": TINY_GPT}
    with pytest.raises(PlanError, match="transport preset 'p2p_off' needs NCCL and a GPU"):
        plan_launches(with_defaults({"suites": [entry]}), CPU_HOST)
    launches = plan_launches(with_defaults({"suites": [{**entry, "cpu": {"transports": ["default"], "micro_batch": 1}}]}), CPU_HOST)
    assert [(l.id, l.backend, l.params["micro_batch"]) for l in launches] == [("00-ddp-default-ws2", "gloo", 1)]
    assert "transports" not in launches[0].params
    gpu = Capabilities(gpu_count=2, gpu_memory_bytes=80 << 30, infiniband=False, logical_cpus=16)
    assert [l.id for l in plan_launches(with_defaults({"suites": [{**entry, "cpu": {"transports": ["default"]}}]}), gpu)] == [
        "00-ddp-default-ws2", "00-ddp-p2p_off-ws2"]


def test_launch_repeats_come_round_by_round_over_the_plan_and_skip_nothing_twice():
    entry = {"suite": "ddp", "world_sizes": [1, 2], "launch_repeats": 2, "params": TINY_GPT,
             "cpu": {"launch_repeats": 3}}
    launches = plan_launches(with_defaults({"suites": [entry, {"suite": "ddp", "world_sizes": [1], "params": TINY_GPT}]}), CPU_HOST)
    assert [(l.id, l.repeat) for l in launches] == [
        ("00-ddp-default-ws1", 1), ("00-ddp-default-ws2", 1), ("01-ddp-default-ws1", 1), ("00-ddp-default-ws1-r2", 2),
        ("00-ddp-default-ws2-r2", 2), ("00-ddp-default-ws1-r3", 3), ("00-ddp-default-ws2-r3", 3)]
    # The second entry's configuration is the first's: skipped once, not repeated.
    assert [l.id for l in launches if l.skipped_reason] == ["01-ddp-default-ws1"]
    assert "launch_repeats" not in launches[0].params
    gpu = Capabilities(gpu_count=2, gpu_memory_bytes=80 << 30, infiniband=False, logical_cpus=16)
    assert [l.id for l in plan_launches(with_defaults({"suites": [entry]}), gpu)] == [
        "00-ddp-default-ws1", "00-ddp-default-ws2", "00-ddp-default-ws1-r2", "00-ddp-default-ws2-r2"]


def test_hung_rank_times_out_and_keeps_what_finished(tmp_path):
    """Rank 1 stops (SIGSTOP) during the second configuration: rank 0 waits for it in the all-reduce."""
    plan = {
        "name": "hang", "timeout_s": 45,
        "suites": [
            {"suite": "ddp", "world_sizes": [2], "params": {**TINY_GPT, "global_batches": [4, 8], "steps": 60}},
            {"suite": "ddp", "world_sizes": [1], "params": TINY_GPT},
        ],
    }
    hosts = write(tmp_path / "hosts.yaml", yaml.safe_load(HOSTS_YAML))
    cli = start_cli("run", "--hosts", hosts, "--plan", write(tmp_path / "plan.yaml", plan), "--out", tmp_path / "results")
    stopped = None
    try:
        deadline = time.monotonic() + 60
        while stopped is None and time.monotonic() < deadline:
            results = list(tmp_path.glob("results/*/hosts/local/launches/00-ddp-default-ws2.jsonl"))
            if results and results[0].read_text().count("\n") >= 1:  # the first configuration is done
                stopped = rank_process(cli.pid, rank=1)
                stopped.send_signal(signal.SIGSTOP)
            time.sleep(0.02)
        assert stopped is not None, "the first configuration never finished"
        _, stderr = cli.communicate(timeout=120)
    finally:
        if cli.poll() is None:
            cli.kill()
    assert cli.returncode == 1
    assert not stopped.is_running()  # ended by the runner, not left behind
    bundle = read_bundle(next(tmp_path.glob("results/*/bundle.json")))
    host = bundle["hosts"][0]
    hung, after = host["launches"]
    assert (hung["id"], hung["status"]) == ("00-ddp-default-ws2", "timeout")
    assert hung["error"] == ("no result after 45 s (the plan's timeout_s): a rank hung or a peer died, or the launch needed "
                             "longer; 1 of 2 configurations finished and are kept: if none hung, raise timeout_s or trim the "
                             "entry (sizes, steps, batches)")
    assert hung["log_tail"]
    assert (after["id"], after["status"]) == ("01-ddp-default-ws1", "ok")
    assert [(r["launch_id"], r["params"]["global_batch"]) for r in host["runs"]] == [
        ("00-ddp-default-ws2", 4), ("01-ddp-default-ws1", 2)]
    assert host["status"] == "partial" and "error: host local: partial: no result after 45 s" in stderr


def test_process_tree_reaches_grandchildren_and_tells_a_reused_pid_apart():
    shell = subprocess.Popen(["sh", "-c", "sleep 60 & wait"], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # until the forked child has become `sleep`
            found = proctree.descendants(shell.pid)
            if found and psutil.Process(found[0].pid).name() == "sleep":
                break
            time.sleep(0.01)
        (sleeper,) = found
        assert sleeper.alive()
        assert not proctree.Process(sleeper.pid, sleeper.start_ticks + 1).alive()  # same pid, another process
        sleeper.signal(signal.SIGKILL)
        shell.wait(timeout=10)
        assert not sleeper.alive()
    finally:
        if shell.poll() is None:
            shell.kill()


def rank_process(agent_root_pid: int, rank: int) -> psutil.Process:
    for process in psutil.Process(agent_root_pid).children(recursive=True):
        try:
            if "bench.agent.worker" in process.cmdline() and process.environ().get("RANK") == str(rank):
                return process
        except psutil.NoSuchProcess:
            continue
    raise AssertionError(f"no worker process of rank {rank}")


# --- the shipped plans ----------------------------------------------------------------------------

def test_seed_plans_are_shipped_and_cited_beside_their_posts():
    assert {"seed000", "seed001", "seed002"} <= set(plan_names())
    posts = (REPO / "docs" / "posts.md").read_text()
    for name in ("seed000", "seed001", "seed002"):
        assert f"`{name}`" in posts, f"docs/posts.md names no plan {name}"


def test_samples_until_the_cv_target_or_the_time_cap(tmp_path):
    # A CV no CPU reaches: sampling goes on, in batches of `steps`, until the 2 s cap past the first batch.
    plan = {"name": "steady", "suites": [{"suite": "ddp", "world_sizes": [2], "params": {
        **TINY_GPT, "cv_target": 1e-9, "sampling_cap_s": 2}}]}
    done, bundle = run_plan_on_cpu(tmp_path, plan)
    assert done.returncode == 0, done.stderr
    (run,) = ddp_runs(bundle)
    samples = run["metrics"]["step_time_s"]["samples"]
    assert len(samples) > TINY_GPT["steps"] and len(samples) % TINY_GPT["steps"] == 0
    assert sum(samples) < 2 + (2 * TINY_GPT["steps"] + 5) * max(samples)  # the first batch, the cap past it, one batch more


def test_entries_the_cpu_override_makes_one_configuration_run_once():
    launches = plan_launches(load_plan("seed002"), CPU_HOST)
    ran = [l.id for l in launches if not l.skipped_reason]
    assert sorted(l.id for l in launches if l.suite == "ddp") == ["03-ddp-default-ws1", "03-ddp-default-ws2", "04-ddp-default-ws1",
                                                                  "04-ddp-default-ws2"]
    # the sockets' and gloo's sweeps both become one gloo sweep on a CPU, as gpt2 and gpt2-large become the tiny model
    assert sorted(ran) == ["00-collectives-default-ws2", "01-collectives-gloo-ws2", "03-ddp-default-ws1", "03-ddp-default-ws2"]
    skipped = {l.id: l.skipped_reason for l in launches}
    assert skipped["04-ddp-default-ws1"] == "the same configuration as launch 03-ddp-default-ws1, which runs it once"
    assert skipped["02-collectives-gloo-ws2"] == "the same configuration as launch 01-collectives-gloo-ws2, which runs it once"
