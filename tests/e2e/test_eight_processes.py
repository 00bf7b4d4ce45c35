"""Eight ranks on a small CPU machine, as on an 8-GPU host: gloo's collectives and DDP of the tiny GPT
at world size 8 under torchrun, on their own and as 2 emulated nodes of 4, through `ddpbench run`.
A CPU host refuses more ranks than cores unless the entry lets them share (ranks_per_core)."""

from __future__ import annotations

import json
import math
import os

import pytest
import yaml

from bench.agent.planning import plan_launches
from bench.common.host import Capabilities
from bench.controller.plans import check
from bench.errors import PlanError
from tests.conftest import bundle_path_from, cli

RANKS = 8
CORES = os.cpu_count() or 1
SHARE = math.ceil(RANKS / CORES)  # ranks a core must hold here
SWEEP = {"ops": ["all_reduce", "all_gather", "reduce_scatter"], "dtypes": ["float32"], "in_place": [True],
         "begin_bytes": 4096, "end_bytes": 4096, "factor": 2, "warmup_iters": 1, "iters": 1, "repetitions": 3}
# The fewest steps a run records: 8 processes on 2 cores take seconds a step to settle.
TINY = {"model": "tiny", "micro_batch": 1, "seq_len": 8, "global_batches": [RANKS], "steps": 1, "warmup_steps": 0,
        "warmup_max_steps": 0, "precision": "fp32", "compile": False}


def entry(suite: str, params: dict, **axes) -> dict:
    return {"suite": suite, "world_sizes": [RANKS], "cpu": {"ranks_per_core": SHARE}, "params": params, **axes}


def test_a_cpu_host_holds_more_ranks_than_cores_only_where_the_entry_lets_them_share():
    two_cores = Capabilities(gpu_count=0, logical_cpus=2, host_memory_bytes=16 << 30)
    plan = {"name": "t", "suites": [{"suite": "collectives", "world_sizes": [8], "params": SWEEP}]}
    with pytest.raises(PlanError, match=r"world size 8 needs 8 processes on this host, which has 2 cores and no GPU; lower "
                                        r"world_sizes to at most 2, or let ranks share cores \(the entry's cpu: ranks_per_core\)"):
        plan_launches(check(plan, "t"), two_cores)
    plan["suites"][0]["cpu"] = {"ranks_per_core": 4}
    (launch,) = plan_launches(check(plan, "t"), two_cores)
    assert launch.world_size == 8
    plan["suites"][0]["cpu"] = {"ranks_per_core": 3}
    with pytest.raises(PlanError, match="lower world_sizes to at most 6$"):
        plan_launches(check(plan, "t"), two_cores)


@pytest.mark.skipif(SHARE > 4, reason=f"{RANKS} ranks need at least 2 cores ({CORES} here)")
def test_eight_gloo_processes_run_collectives_and_ddp_alone_and_as_two_nodes_of_four(tmp_path):
    plan = {"name": "eight", "timeout_s": 600, "suites": [
        entry("collectives", SWEEP), entry("collectives", SWEEP, nodes=2), entry("ddp", TINY, nodes=2)]}
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan))
    done = cli("run", "--plan", path, "--out", tmp_path / "out", timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    host = json.loads(bundle_path_from(done.stdout).read_text())["hosts"][0]
    assert [(l["id"], l["status"]) for l in host["launches"]] == [
        ("00-collectives-default-ws8", "ok"), ("01-collectives-default-n2-ws8", "ok"), ("02-ddp-default-n2-ws8", "ok")]
    runs = host["runs"]
    assert len(runs) == 7 and all(r["status"] == "ok" and r["world_size"] == RANKS for r in runs)
    assert sorted(r["params"]["op"] for r in runs if r["suite"] == "collectives") == sorted(SWEEP["ops"] * 2)
    two_nodes = {"count": 2, "ranks_per_node": 4, "emulated": True, "proof": "planned"}  # gloo: as planned, nothing saw it
    assert [r["transport"].get("nodes") for r in runs] == [None] * 3 + [two_nodes] * 4
    (trained,) = [r for r in runs if r["suite"] == "ddp"]
    assert trained["metrics"]["step_time_s"]["samples"] and trained["params"]["grad_accum"] == 1
