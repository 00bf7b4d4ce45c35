"""`micro_batch: auto` and `gpu-bound` resolved on the host: the largest micro-batch its GPU holds by the
memory estimate that divides every global batch at every world size, or the smallest of those the
cost model expects the GPU to pace, one for every entry that asks it; what it became, and why, in the
launch's params; a host or model it cannot be resolved for refused in one line."""

from __future__ import annotations

import copy

import pytest

from benchmarks.plan_durations import MACHINES
from bench import suites
from bench.agent.estimate import plan_modelled
from bench.agent.planning import plan_launches
from bench.common.host import Capabilities
from bench.common.protocol import Placement
from bench.controller.plans import load_plan
from bench.errors import PlanError

H100X4, RTX3090X2, CPU = MACHINES["4x H100 (NV18)"], MACHINES["2x RTX 3090 (PCIe 4)"], MACHINES["CPU, 2 cores (idle)"]


def micro_batches(plan: dict, fingerprint: dict) -> dict:
    """(suite, world size) -> (micro_batch, why) of the plan's training launches on that machine."""
    return {(l.suite, l.world_size): (l.params["micro_batch"], l.params.get("micro_batch_auto"))
            for l in plan_launches(plan, Capabilities.of(fingerprint), Placement())
            if l.suite in ("ddp", "fsdp") and not l.skipped_reason}


def test_auto_takes_the_largest_micro_batch_the_gpu_holds_that_divides_every_world_size():
    found = micro_batches(load_plan("scaling"), H100X4)
    assert {mb for mb, _ in found.values()} == {16}  # 64 / 4 GPUs: 16 divides it; 32 would not
    assert all(why.startswith("16: the largest of 64, 32, 16") and "80 GiB" in why for _, why in found.values())
    assert "world sizes 1, 2, 4" in found[("ddp", 2)][1]


def test_a_24_gb_card_gets_a_smaller_micro_batch_rather_than_a_refusal():
    found = micro_batches(load_plan("scaling"), RTX3090X2)
    assert {mb for mb, _ in found.values()} == {4}


def test_a_plan_without_auto_keeps_its_micro_batch():
    found = micro_batches(load_plan("seed002"), H100X4)
    assert {mb for mb, why in found.values()} == {16} and not any(why for _, why in found.values())


def test_auto_on_a_host_without_a_gpu_is_refused_in_one_line():
    plan = copy.deepcopy(load_plan("scaling"))
    plan["suites"] = [entry for entry in plan["suites"] if entry["suite"] == "ddp"][:1]
    plan["suites"][0].pop("cpu")
    plan["suites"][0]["transports"] = ["default"]
    with pytest.raises(PlanError, match="micro_batch auto is resolved from a GPU's memory, and this host shows none; "
                                        "set micro_batch in the entry's cpu: override"):
        plan_launches(plan, Capabilities.of(CPU), Placement())


def test_auto_for_a_model_the_estimate_does_not_know_is_refused():
    plan = copy.deepcopy(load_plan("seed000"))
    plan["suites"][0]["params"]["micro_batch"] = "auto"
    with pytest.raises(PlanError, match="micro_batch auto needs a GPT or Llama model"):
        plan_launches(plan, Capabilities.of(H100X4), Placement())


# --- micro_batch: gpu-bound ----------------------------------------------------------------------

def training_launches(plan: dict, fingerprint: dict) -> list:
    return [l for l in plan_launches(plan, Capabilities.of(fingerprint), Placement())
            if l.suite in ("ddp", "fsdp") and not l.skipped_reason]


def global_batches(launches: list, world_size: int) -> set:
    return {tuple(suites.get(l.suite).params(l.params).batches(world_size)) for l in launches if l.world_size == world_size}


def test_gpu_bound_gives_a_large_gpu_the_micro_batch_its_gpu_paces_and_a_24_gb_card_a_smaller_one():
    """seed001-sharded: on H100s its GPT-2 Large and Llama 1B steps train 16 samples a micro-batch, which the
    cost model prices GPU-bound (at the 2 it once shipped, the host's CPU paced them there); on an RTX 3090,
    whose slower GPU paces a micro-batch of 2, they train 2, and so the accumulations' global batches are 8
    times smaller."""
    plan = load_plan("seed001-sharded")
    for machine, size in ((H100X4, 16), (RTX3090X2, 2)):
        launches = training_launches(plan, machine)
        assert {l.params["micro_batch"] for l in launches} == {size}
        assert all(l.params["micro_batch_auto"].startswith(f"{size}: the smallest of 1, 2, 4, 8, 16, 32, 64 at which the "
                                                          "cost model expects the GPU to pace every gpu-bound entry")
                   for l in launches)
        assert global_batches(launches, 1) == {(size, 2 * size, 4 * size)}
        assert global_batches(launches, 2) == {(2 * size, 4 * size, 8 * size)}
        host = Capabilities.of(machine)
        assert not any(m.host_paced for m in plan_modelled(launches, host).values())


def test_gpu_bound_is_one_micro_batch_for_every_entry_that_asks_it():
    """DDP alone paces its GPT-2 Large at 8 on an H100; beside FSDP's full sharding, whose hooks make the
    host's share of a micro-batch 2.5 times DDP's, both train 16, so the strategies compare alike."""
    plan = copy.deepcopy(load_plan("seed001-sharded"))
    ddp, fsdp = (next(e for e in plan["suites"] if e["suite"] == suite and e["params"]["model"] == "gpt2-large")
                 for suite in ("ddp", "fsdp"))
    plan["suites"] = [ddp]
    assert {l.params["micro_batch"] for l in training_launches(plan, H100X4)} == {8}
    plan["suites"] = [ddp, fsdp]
    assert {l.params["micro_batch"] for l in training_launches(plan, H100X4)} == {16}


def test_gpu_bound_past_the_gpus_memory_takes_the_largest_it_holds_and_says_the_host_may_pace():
    small = copy.deepcopy(H100X4)
    for gpu in small["gpus"]:
        gpu["memory_total_bytes"] = 24 << 30
    launches = training_launches(load_plan("seed001-sharded"), small)
    (why,) = {l.params["micro_batch_auto"] for l in launches}
    assert {l.params["micro_batch"] for l in launches} == {4}
    assert why == ("4: the largest that 24 GiB of GPU memory holds for every gpu-bound entry; the cost model expects "
                   "the GPU to pace them from 16, so the host may pace these steps")


def test_gpu_bound_where_the_hosts_launch_time_is_not_measured_takes_the_largest_and_says_so():
    plan = copy.deepcopy(load_plan("seed001-sharded"))
    plan["suites"] = [next(e for e in plan["suites"] if e["suite"] == "ddp")]
    plan["suites"][0]["params"]["compile"] = True
    (why,) = {l.params["micro_batch_auto"] for l in training_launches(plan, H100X4)}
    assert why.startswith("16: the largest that 80 GiB of GPU memory holds for every gpu-bound entry; the host's "
                          "time launching ddp gpt2-large's kernels is not measured here")


def test_gpu_bound_on_a_host_without_a_gpu_and_both_sweeps_are_refused_in_one_line():
    plan = copy.deepcopy(load_plan("seed001-sharded"))
    plan["suites"] = [next(e for e in plan["suites"] if e["suite"] == "ddp")]
    plan["suites"][0].pop("cpu")
    plan["suites"][0]["transports"] = ["default"]
    with pytest.raises(PlanError, match="^ddp: micro_batch gpu-bound is resolved from a GPU's memory, and this host shows none; "):
        plan_launches(plan, Capabilities.of(CPU), Placement())
    both = copy.deepcopy(load_plan("seed001-sharded"))
    both["suites"] = [next(e for e in both["suites"] if e["suite"] == "ddp")]
    both["suites"][0]["params"]["global_batches"] = [16]
    with pytest.raises(PlanError, match=r"^global_batches and grad_accums both set the global batches; keep one"):
        plan_launches(both, Capabilities.of(H100X4), Placement())
