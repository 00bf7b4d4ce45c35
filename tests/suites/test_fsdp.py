"""fsdp suite: FSDP2 for real on the CPU (gloo, torchrun, the agent and the controller) on 2 ranks, and on 4
ranks over two agents on loopback (2 nodes: HSDP and full sharding); the same weights as DDP after 3 steps;
the bytes a step moves counted against the parameter bytes; scaling against DDP's plain 1-GPU run; the memory
estimate; the bad-input cases; the report's link sensitivity."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from bench import suites
from bench.agent.estimate import estimate_launch, plan_modelled
from bench.agent.planning import plan_launches
from bench.bundle import read_bundle
from bench.common.host import Capabilities
from bench.common.protocol import Placement
from bench.common.run import Run
from bench.controller.inventory import Group, Host, Inventory
from bench.controller.plans import check, load_plan, with_defaults
from bench.controller.run import _check_placements
from bench.errors import PlanError, UserError
from bench.models.shapes import LLAMA_PRESETS, TRANSFORMER_PRESETS, units
from bench.report.merge import HostEntry, RunEntry, Series
from bench.suites.training import memory
from bench.suites.fsdp.report.series import sensitivities
from tests.conftest import REPO, cli as ddpbench
from tests.support.same_samples import another_bundle_of

CPU_HOST = Capabilities(gpu_count=0, logical_cpus=2)
HOSTS_YAML = "hosts:\n  - name: local\n    runtime: local\n    env: {OMP_NUM_THREADS: '1'}\n"
# fp32, so that every gathered and reduced element is 4 bytes; global batches 2 and 4 at micro-batch 1:
# on 2 ranks one micro-batch a step, then two (gradients kept local on the first).
TINY_LLAMA = {"model": "tiny-llama", "micro_batch": 1, "seq_len": 32, "global_batches": [2, 4], "steps": 3, "warmup_steps": 1,
              "warmup_max_steps": 4, "precision": "fp32"}
ROOT, BLOCK, *_ = units(LLAMA_PRESETS["tiny-llama"])
PARAM_BYTES = 4 * sum(units(LLAMA_PRESETS["tiny-llama"]))


def write(path: Path, document) -> Path:
    path.write_text(yaml.safe_dump(document))
    return path


def run_plan(tmp: Path, plan: dict):
    hosts = write(tmp / "hosts.yaml", yaml.safe_load(HOSTS_YAML))
    done = ddpbench("run", "--hosts", str(hosts), "--plan", str(write(tmp / "plan.yaml", plan)), "--out", str(tmp / "results"))
    bundles = sorted((tmp / "results").glob("*/bundle.json"))
    return done, read_bundle(bundles[-1]) if bundles else None


def median(run: dict, name: str) -> float:
    return run["metrics"][name]["summary"]["median"]


# --- FSDP2 for real: 2 ranks, gloo, beside DDP's plain 1-rank baseline ----------------------------

SWEEP = {"name": "fsdp-sweep", "timeout_s": 300, "suites": [
    {"suite": "ddp", "world_sizes": [1], "params": {**TINY_LLAMA, "compile": False}},
    {"suite": "fsdp", "world_sizes": [1, 2], "params": {**TINY_LLAMA, "sharding": "full"}},
    {"suite": "fsdp", "world_sizes": [2], "params": {**TINY_LLAMA, "sharding": "grad_op"}},
]}


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> dict:
    done, bundle = run_plan(tmp_path_factory.mktemp("fsdp"), SWEEP)
    assert done.returncode == 0, done.stderr
    return bundle


def fsdp_runs(bundle: dict) -> dict:
    return {(r["params"]["sharding"], r["world_size"], r["params"]["global_batch"]): r
            for r in bundle["hosts"][0]["runs"] if r["suite"] == "fsdp"}


def test_fsdp_trains_on_one_and_two_ranks_over_gloo(sweep):
    runs = fsdp_runs(sweep)
    # one rank also trains global batch 1: the work of each of two ranks at global batch 2
    assert sorted(runs) == [("full", 1, 1), ("full", 1, 2), ("full", 1, 4), ("full", 2, 2), ("full", 2, 4), ("grad_op", 2, 2),
                            ("grad_op", 2, 4)]
    assert runs[("full", 1, 1)]["params"]["baseline_for"] == 2
    assert all(r["status"] == "ok" and r["transport"]["backend"] == "gloo" for r in runs.values())
    assert {k: r["params"]["grad_accum"] for k, r in runs.items() if k[1] == 2} == {
        ("full", 2, 2): 1, ("full", 2, 4): 2, ("grad_op", 2, 2): 1, ("grad_op", 2, 4): 2}
    assert all(r["params"]["num_params"] == sum(units(LLAMA_PRESETS["tiny-llama"])) for r in runs.values())  # whole, not a shard


def test_counted_bytes_per_step_against_the_parameter_bytes(sweep):
    """Full sharding gathers each block in the forward and again in the backward (the root, kept from
    forward to backward, once): about 3x the parameter bytes with the reduce-scatter; grad_op 2x; a rank
    moves (n-1)/n of it. A micro-batch with its gradients kept local gathers again and reduces nothing."""
    runs = fsdp_runs(sweep)
    for accum, batch in ((1, 2), (2, 4)):
        full, grad_op = runs[("full", 2, batch)], runs[("grad_op", 2, batch)]
        assert median(full, "all_gather_bytes") == accum * 4 * (ROOT + 2 * BLOCK * 2)
        assert median(grad_op, "all_gather_bytes") == accum * PARAM_BYTES
        for run in (full, grad_op):
            assert median(run, "reduce_scatter_bytes") == PARAM_BYTES  # once a step, whatever the accumulation
            assert median(run, "reduce_scatter_calls_per_step_count") == 1 + 2  # the root and each block
        assert median(full, "all_gather_calls_per_step_count") == accum * (1 + 2 * 2)
    full, grad_op = runs[("full", 2, 2)], runs[("grad_op", 2, 2)]
    moved = {name: (median(r, "all_gather_bytes") + median(r, "reduce_scatter_bytes")) / PARAM_BYTES for name, r in (("full", full), ("grad_op", grad_op))}
    assert 2.5 < moved["full"] < 3 and moved["grad_op"] == 2  # tiny-llama's root is 42% of it: gpt2-large's 8%, 2.92x
    assert suites.get("fsdp").collective_bytes(Run(full)) == pytest.approx(moved["full"] * PARAM_BYTES / 2)  # per rank: (n-1)/n
    assert median(runs[("full", 1, 2)], "all_gather_bytes") == 0  # one rank: nothing to gather


def test_scaling_is_against_ddps_plain_model_on_one_rank(sweep):
    """Against the plain model's 1-rank run doing a rank's work (global batch / N) where the plan has it (the
    ddp entry trains 2 and 4), else its run of the same global batch (strong scaling)."""
    runs = fsdp_runs(sweep)
    plain = {r["params"]["global_batch"]: r for r in sweep["hosts"][0]["runs"] if r["suite"] == "ddp"}
    assert sorted(plain) == [2, 4]
    for (_, ranks, batch), run in runs.items():
        base = plain.get(batch // ranks) or plain.get(batch)
        if base is None:  # fsdp's own 1-rank run of global batch 1, which only 2 ranks' runs scale against
            assert run["derived"]["scaling_efficiency_fraction"] is None
            continue
        expected = median(base, "per_sample_gpu_time_s") / median(run, "per_sample_gpu_time_s")
        assert run["derived"]["scaling_efficiency_fraction"] == pytest.approx(expected, rel=1e-12)
    two = runs[("full", 2, 4)]
    assert two["derived"]["exposed_comm_s"] == pytest.approx(median(two, "step_time_s") - median(plain[2], "step_time_s"))
    assert two["derived"]["predicted_step_time_s"] is None and any("no all_gather results" in n for n in two["notes"])


def test_compare_judges_fsdp_runs_by_step_time(sweep, tmp_path):
    path = tmp_path / "bundle.json"
    path.write_text(json.dumps(sweep))
    done = ddpbench("compare", str(path), str(another_bundle_of(path, tmp_path / "again")), "--out", str(tmp_path / "verdict"))
    assert done.returncode in (0, 3), done.stderr  # 3 steps a run: an interval may be too wide to call (inconclusive)
    verdict = json.loads((tmp_path / "verdict" / "verdict.json").read_text())
    judged = [r for r in verdict["runs"] if r["suite"] == "fsdp"]
    assert len(judged) == 7 and {r["metric"] for r in judged} == {"step_time_s"}
    assert {r["verdict"] for r in judged} <= {"reproduced", "inconclusive"}
    assert all(r["original_median"] == r["new_median"] for r in judged)
    assert "sharding" in (tmp_path / "verdict" / "verdict.md").read_text()


# --- the shipped plan ---------------------------------------------------------------------------------

def test_the_reports_answer_judges_each_sharding_beside_ddp(sweep, tmp_path):
    """The report's first section holds a line per strategy of the model, each scaled against the plain
    model on one rank as the bundle derived it."""
    path = tmp_path / "bundle.json"
    path.write_text(json.dumps(sweep))
    done = ddpbench("report", str(path), "--out", str(tmp_path / "report"))
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "report" / "report.md").read_text()
    answer = text[text.index("## The answer"):text.index("\n## ", text.index("## The answer") + 1)]
    for sharding in ("full", "grad_op"):
        run = fsdp_runs(sweep)[(sharding, 2, 4)]
        rows = [line for line in answer.splitlines() if f"fsdp {sharding} | 2 processes |" in line and "| 4 |" in line]
        assert len(rows) == 1, answer
        assert f"{run['derived']['scaling_efficiency_fraction'] * 100:.1f}%" in rows[0]


def test_the_sharded_plans_sweeps_bracket_its_models_unit_sizes():
    """The all_gather and reduce_scatter sweeps cover every unit each model gathers (in bf16) and reduces
    (in fp32), so the exposed communication model's prediction reads them inside the measured sizes; the
    all_reduce sweep covers DDP's gradients."""
    plan = load_plan("seed001-sharded")
    sweeps = {op: (e["params"]["begin_bytes"], e["params"]["end_bytes"]) for e in plan["suites"] if e["suite"] == "collectives"
              and "default" in e["transports"] for op in e["params"]["ops"]}
    for entry in plan["suites"]:
        if entry["suite"] == "fsdp":
            p = entry["params"]
            gathered = 2  # bf16, or bf16 weights
            for unit in units(TRANSFORMER_PRESETS[p["model"]]):
                assert sweeps["all_gather"][0] <= unit * gathered <= sweeps["all_gather"][1], (p["model"], unit)
                assert sweeps["reduce_scatter"][0] <= unit * 4 <= sweeps["reduce_scatter"][1], (p["model"], unit)
        if entry["suite"] == "ddp":
            p = entry["params"]
            grads = sum(units(TRANSFORMER_PRESETS[p["model"]])) * (2 if p["weights_dtype"] == "bfloat16" else 4)
            assert sweeps["all_reduce"][0] <= grads <= sweeps["all_reduce"][1], p["model"]


@pytest.mark.parametrize("machine", ["2x H200 (NV18)", "2x RTX 3090 (PCIe 4)"])
def test_the_sharded_plan_fits_its_timeout_and_a_24_gb_card(machine):
    """Every launch within timeout_s by the cost model, and no configuration refused by the memory estimate
    (plan_launches would raise it) on the seed's 24 GB cards either."""
    from benchmarks.plan_durations import MACHINES

    host = Capabilities.of(MACHINES[machine])
    launches = [launch for launch in plan_launches(load_plan("seed001-sharded"), host) if not launch.skipped_reason]
    by_model = plan_modelled(launches, host)
    for launch in launches:
        estimate_launch(launch, by_model[launch.id])  # raises past timeout_s
    assert {launch.suite for launch in launches} == {"collectives", "ddp", "fsdp"}


# --- the same weights as DDP ----------------------------------------------------------------------

def test_ddp_and_fsdp_train_the_same_weights(tmp_path):
    """The tiny Llama, 3 steps of 2 micro-batches on 2 ranks from the same seed and data: FSDP full and
    grad_op end with DDP's weights within fp32 rounding, and all three moved away from the start."""
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                           str(REPO / "tests" / "helpers" / "same_weights.py"), str(tmp_path)],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    weights = {name: torch.load(tmp_path / f"{name}.pt") for name in ("initial", "ddp", "full", "grad_op")}
    assert weights["ddp"].keys() == weights["full"].keys() == weights["grad_op"].keys() == weights["initial"].keys()
    for name, start in weights["initial"].items():
        assert not torch.allclose(weights["ddp"][name], start, rtol=0, atol=1e-6), name
        for sharding in ("full", "grad_op"):
            torch.testing.assert_close(weights[sharding][name], weights["ddp"][name], rtol=1e-5, atol=1e-6)


# --- 2 nodes on loopback: HSDP and full sharding over 4 ranks ----------------------------------------

def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_hybrid_sharding_over_two_nodes_on_loopback(tmp_path):
    """Two agents, one node each (torchrun's c10d rendezvous on 127.0.0.1), 2 ranks a node: HSDP shards
    within a node (gathers and scatters over its 2 ranks) and all-reduces the shards across the nodes;
    full sharding runs over all 4 ranks."""
    plan = check({"name": "hsdp", "timeout_s": 300, "suites": [
        {"suite": "fsdp", "world_sizes": [2], "params": {**TINY_LLAMA, "global_batches": [4, 8], "sharding": "hybrid", "compile": False}},
        {"suite": "fsdp", "world_sizes": [2], "params": {**TINY_LLAMA, "global_batches": [8], "sharding": "full", "compile": False}},
    ]}, "plan")
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    rendezvous = f"127.0.0.1:{free_port()}"
    agents = [subprocess.Popen(
        [sys.executable, "-m", "bench.agent", "run", "--plan", str(tmp_path / "plan.json"), "--out", str(tmp_path / f"node{rank}"),
         "--env", json.dumps({"OMP_NUM_THREADS": "1"}), "--nnodes", "2", "--node-rank", str(rank), "--rendezvous", rendezvous,
         "--job-id", "hsdp-test"], env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True) for rank in (0, 1)]
    try:
        errors = [agent.communicate(timeout=400)[1] for agent in agents]
    finally:
        for agent in agents:
            if agent.poll() is None:
                agent.kill()
    assert [agent.returncode for agent in agents] == [0, 0], errors
    raws = [json.loads((tmp_path / f"node{rank}" / "raw.json").read_text()) for rank in (0, 1)]
    assert all(launch["status"] == "ok" and launch["nodes"] == 2 for raw in raws for launch in raw["launches"])
    runs = {(r["params"]["sharding"], r["params"]["global_batch"]): r for raw in raws for r in raw["runs"]}  # on global rank 0's node
    assert sorted(runs) == [("full", 8), ("hybrid", 4), ("hybrid", 8)]
    assert all(r["status"] == "ok" and r["world_size"] == 4 for r in runs.values())
    hybrid = runs[("hybrid", 4)]
    assert median(hybrid, "reduce_scatter_bytes") == PARAM_BYTES  # within the node: the whole gradient, scattered to 2
    assert median(hybrid, "all_reduce_bytes") == PARAM_BYTES / 2  # across nodes: each rank's shard
    assert median(hybrid, "all_gather_bytes") == median(runs[("full", 8)], "all_gather_bytes") / 2  # accum 1 against 2
    assert median(runs[("hybrid", 8)], "all_reduce_bytes") == PARAM_BYTES / 2  # once a step, accumulating or not
    assert "all_reduce_bytes" not in runs[("full", 8)]["metrics"]


# --- bad input --------------------------------------------------------------------------------------

def assert_one_line_error(done, code: int, *fragments: str) -> str:
    assert done.returncode == code, (done.returncode, done.stderr)
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
    for fragment in fragments:
        assert fragment in errors[0], (fragment, errors[0])
    return errors[0]


def test_unknown_sharding_strategy_is_refused_by_the_schema(tmp_path):
    plan = write(tmp_path / "plan.yaml", {"name": "bad", "suites": [{"suite": "fsdp", "params": {**TINY_LLAMA, "sharding": "zero3"}}]})
    assert_one_line_error(ddpbench("run", "--plan", str(plan), "--out", str(tmp_path / "results")), 2,
                          "field suites[0].params.sharding: 'zero3' is not one of ['full', 'grad_op', 'hybrid']")
    assert not (tmp_path / "results").exists()


def test_hybrid_sharding_on_one_node_is_refused_before_any_host_is_touched(tmp_path):
    plan = {"name": "bad", "suites": [{"suite": "fsdp", "world_sizes": [2], "params": {**TINY_LLAMA, "sharding": "hybrid"}}]}
    done, bundle = run_plan(tmp_path, plan)
    assert_one_line_error(done, 2, "host 'local': the plan's suites[0]: fsdp: sharding hybrid (HSDP)", "one node",
                          "use sharding full, or run the entry on a group of hosts")
    assert bundle is None and not (tmp_path / "results").exists()


def test_hybrid_sharding_over_one_rank_per_node_is_refused():
    """A world size it cannot shard over: two nodes of one rank each leave nothing to shard within a node."""
    plan = with_defaults({"name": "bad", "suites": [{"suite": "fsdp", "world_sizes": [1], "params": {**TINY_LLAMA, "sharding": "hybrid"}}]})
    pair = Inventory(hosts=(Host("a", address="127.0.0.2"), Host("b", address="127.0.0.3")), groups=(Group("pair", ("a", "b")),))
    with pytest.raises(UserError, match=r"host 'a': the plan's suites\[0\]: fsdp: sharding hybrid over 1 rank per node has nothing to shard"):
        _check_placements(pair, plan)
    with pytest.raises(PlanError, match="sharding hybrid over 1 rank per node"):  # the agent's own check, for a plan it is handed
        plan_launches(plan, CPU_HOST, Placement(nnodes=2, node_rank=0, rendezvous="127.0.0.2:29400"))
    _check_placements(pair, with_defaults({**plan, "suites": [{**plan["suites"][0], "world_sizes": [2]}]}))  # 2 a node: fine


def test_a_model_that_cannot_fit_is_refused_before_launch_with_what_would(tmp_path):
    plan = {"name": "big", "suites": [{"suite": "fsdp", "world_sizes": [2], "params": {
        **TINY_LLAMA, "model": "llama3.1-8b", "seq_len": 1024, "global_batches": [8], "micro_batch": 4, "precision": "bf16"}}]}
    gpus = Capabilities(gpu_count=2, gpu_memory_bytes=24 << 30, gpu_memory_free_bytes=24 << 30, logical_cpus=16)
    with pytest.raises(PlanError) as refused:
        plan_launches(with_defaults(plan), gpus)
    message = str(refused.value)
    assert message.startswith("fsdp: llama3.1-8b with sharding full over 2 ranks at micro_batch 4 needs about ")
    assert "per GPU by the estimate (parameters 14.96 GiB, gradients 14.96 GiB, optimizer 29.92 GiB" in message
    assert "the GPU has 24 GiB free; it would fit with sharding full over 8 GPUs with activation_checkpointing at micro_batch 1" in message
    assert plan_launches(with_defaults(plan), Capabilities(gpu_count=8, gpu_memory_bytes=141 << 30, logical_cpus=16))  # 8x H200: fits
    # On this host the same refusal is a host's: one line, exit 1, nothing launched.
    done, bundle = run_plan(tmp_path, plan)
    assert_one_line_error(done, 1, "error: host local: failed: fsdp: llama3.1-8b with sharding full over 2 ranks", "per rank by the estimate")
    assert bundle["hosts"][0]["launches"] == []


# --- the memory estimate -----------------------------------------------------------------------------

def test_memory_estimate_parts_by_strategy():
    base = memory.Setup("llama3.2-1b", "replicated", 1, micro_batch=2, seq_len=1024, precision="bf16")
    ddp = memory.estimate(base)
    full = memory.estimate(memory.Setup(**{**base.__dict__, "strategy": "full", "shards": 2}))
    grad_op = memory.estimate(memory.Setup(**{**base.__dict__, "strategy": "grad_op", "shards": 2}))
    lean = memory.estimate(memory.Setup(**{**base.__dict__, "checkpointing": True}))
    assert ddp.parameters_bytes == 4 * 1_235_814_400 and ddp.optimizer_bytes == 2 * ddp.parameters_bytes
    for sharded in (full, grad_op):
        assert sharded.parameters_bytes == ddp.parameters_bytes / 2 and sharded.optimizer_bytes == ddp.optimizer_bytes / 2
    assert grad_op.gathered_bytes > full.gathered_bytes  # every unit gathered at the forward's end, not two blocks
    logits = 2 * 1024 * 128256 * 12  # the loss's, which checkpointing keeps
    assert lean.activations_bytes - logits < (ddp.activations_bytes - logits) / 4
    held = ddp.parameters_bytes + ddp.optimizer_bytes + ddp.gathered_bytes
    # one micro-batch a step: the backward frees activations as it makes gradients; accumulating holds both
    assert ddp.total_bytes == held + max(ddp.gradients_bytes, ddp.activations_bytes)
    accumulating = memory.estimate(memory.Setup(**{**base.__dict__, "accumulating": True}))
    assert accumulating.total_bytes == held + ddp.gradients_bytes + ddp.activations_bytes
    assert ddp.parts().endswith("; of gradients and activations the larger, one micro-batch a step")
    assert "the larger" not in accumulating.parts()


def test_memory_estimate_matches_a_measured_peak():
    """quick's gpt2 at micro-batch 8 on one H200 (measured with `make bench`): 9.355 GiB peak."""
    estimated = memory.estimate(memory.Setup("gpt2", "replicated", 1, micro_batch=8, seq_len=1024, precision="bf16")).total_bytes
    assert estimated == pytest.approx(9.355 * 2**30, rel=0.05)


# seed001-sharded on one H100 (benchmarks/results/seed001_sharded_h100x2.md): fsdp's peak at world size 1,
# micro-batch 2, 1024 tokens, bf16, accumulating (torch.cuda.max_memory_allocated).
FSDP_ONE_H100_PEAK_BYTES = {
    ("gpt2-large", "full"): 16_984_698_880, ("gpt2-large", "grad_op"): 18_462_642_176,
    ("llama3.2-1b", "full"): 16_291_178_496, ("llama3.2-1b", "grad_op"): 18_240_612_352,
}


@pytest.mark.parametrize("model, sharding", list(FSDP_ONE_H100_PEAK_BYTES))
def test_memory_estimate_of_fsdp_on_one_gpu_matches_the_measured_peak(model, sharding):
    """On one rank accumulation keeps no second, unsharded gradient: counting one put the estimate
    18-26% above these peaks."""
    llama = model.startswith("llama")
    setup = memory.Setup(model, sharding, 1, micro_batch=2, seq_len=1024, precision="bf16", accumulating=True,
                         weights_dtype="bfloat16" if llama else "float32", checkpointing=llama)
    assert memory.estimate(setup).total_bytes == pytest.approx(FSDP_ONE_H100_PEAK_BYTES[(model, sharding)], rel=0.05)


# benchmarks/fsdp_one_gpu.py on one H100 (benchmarks/results/fsdp_one_gpu_h100.md): the peak at world size 1,
# 1024 tokens, bf16 (torch.cuda.max_memory_allocated), GiB. Counting gradients and activations together in
# single-micro-batch steps put the estimate 12-30% above the four of them that the sum missed by over 10%.
ONE_H100_PEAK_GIB = [  # model, strategy, micro-batch, accumulating, bf16 weights and checkpointing, peak
    ("gpt2-large", "replicated", 8, False, False, 27.59), ("gpt2-large", "replicated", 8, True, False, 30.47),
    ("gpt2-large", "replicated", 4, False, False, 18.96), ("gpt2-large", "full", 8, False, False, 24.82),
    ("gpt2-large", "full", 8, True, False, 27.71), ("llama3.2-1b", "replicated", 2, False, True, 10.25),
    ("llama3.2-1b", "full", 2, False, True, 11.23), ("llama3.1-8b", "full", 1, False, True, 67.72),
]


@pytest.mark.parametrize("model, strategy, micro_batch, accumulating, lean, peak_gib", ONE_H100_PEAK_GIB)
def test_memory_estimate_of_one_gpu_within_10_percent_of_the_measured_peak(model, strategy, micro_batch, accumulating, lean, peak_gib):
    setup = memory.Setup(model, strategy, 1, micro_batch=micro_batch, seq_len=1024, precision="bf16", accumulating=accumulating,
                         weights_dtype="bfloat16" if lean else "float32", checkpointing=lean)
    assert memory.estimate(setup).total_bytes == pytest.approx(peak_gib * 2**30, rel=0.10)


# --- the report's link sensitivity -------------------------------------------------------------------

def fake_entry(strategy: str, preset: str, world_size: int, samples: list, baseline: "Run | None" = None) -> RunEntry:
    params = {"model": "gpt2-large", "precision": "bf16", "seq_len": 1024, "micro_batch": 2, "global_batch": 8}
    suite, extra = ("ddp", {}) if strategy == "ddp" else ("fsdp", {"sharding": strategy})
    run = {"suite": suite, "params": {**params, **extra}, "world_size": world_size, "transport": {"preset": preset},
           "metrics": {"per_sample_gpu_time_s": {"samples": samples}}}
    host = HostEntry("h", {}, 0, "r", "0", {"link_label": "2x H200, NVLink NV18"})
    return RunEntry(host, Run(run), Series("h", "2x H200, NVLink NV18", f"{preset} via X", False), baseline, suites.get(suite))


def test_link_sensitivity_is_each_transports_scaling_over_defaults():
    one_gpu = fake_entry("ddp", "default", 1, [1.0, 1.0, 1.0]).run
    entries = [fake_entry("ddp", "default", 2, [1.25] * 5, one_gpu), fake_entry("ddp", "p2p_off", 2, [2.5] * 5, one_gpu),
               fake_entry("full", "default", 2, [2.0] * 5, one_gpu), fake_entry("full", "socket", 2, [8.0] * 5, one_gpu)]
    found = {row.strategy: row for row in sensitivities(entries)}
    assert found["ddp"].scaling.median == pytest.approx(0.8) and found["fsdp full"].scaling.median == pytest.approx(0.5)
    (ratio,) = found["ddp"].ratios.values()  # 40% scaling against 80%
    assert list(found["ddp"].ratios) == ["p2p_off"] and (ratio.median, ratio.n) == (pytest.approx(0.5), 5)
    assert ratio.low < 0.5 < ratio.high  # one launch a side, however steady: the launch-to-launch floor widens it
    assert found["fsdp full"].ratios["socket"].median == pytest.approx(0.25)
