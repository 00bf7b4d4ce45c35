"""`micro_batch: auto` resolved on the host: the largest micro-batch its GPU holds by the memory estimate
that divides every global batch at every world size; what it became, and why, in the launch's params;
a host or model it cannot be resolved for refused in one line."""

from __future__ import annotations

import copy

import pytest

from benchmarks.plan_durations import MACHINES
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
