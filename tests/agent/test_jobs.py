"""Launches that start alike run in one job; one that ends its job early takes only itself down; the first
job's ranks import while the fingerprint's torch probes run."""

from __future__ import annotations

import json
import os

import yaml

from tests.conftest import REPO, bundle_path_from, cli

SLOW_STEP = REPO / "tests" / "helpers" / "slow_step"
SLOW_PROBES = REPO / "tests" / "helpers" / "slow_torch_probes"


def test_a_launch_that_outlasts_its_timeout_ends_its_job_and_the_next_launch_runs_in_a_job_of_its_own(tmp_path):
    """DDP's first step takes 10 minutes (tests/helpers/slow_step): its launch is ended at its timeout_s,
    and the all-reduce sweep that would have run after it in the same processes runs in fresh ones."""
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({"name": "jobs", "timeout_s": 60, "suites": [
        {"suite": "ddp", "world_sizes": [2], "params": {"model": "tiny", "micro_batch": 2, "seq_len": 16, "steps": 2,
                                                         "warmup_steps": 1, "precision": "fp32", "compile": False}},
        {"suite": "collectives", "world_sizes": [2], "params": {"ops": ["all_reduce"], "dtypes": ["float32"], "in_place": [True],
                                                                 "begin_bytes": 4096, "end_bytes": 4096, "factor": 2,
                                                                 "warmup_iters": 1, "iters": 1, "repetitions": 3}},
    ]}))
    done = cli("run", "--plan", plan, "--out", tmp_path / "results",
               env={"PYTHONPATH": os.pathsep.join([str(REPO), str(SLOW_STEP)]), "DDPBENCH_TEST_STEP_S": "600"})
    assert done.returncode == 1, done.stderr
    host = json.loads(bundle_path_from(done.stdout).read_text())["hosts"][0]
    launches = {launch["id"]: launch for launch in host["launches"]}
    slow, sweep = launches["00-ddp-default-ws2"], launches["01-collectives-default-ws2"]
    assert slow["status"] == "timeout" and slow["error"].startswith("no result after 60 s (the plan's timeout_s): ")
    assert slow["job"] == "00-ddp-default-ws2" and slow["duration_s"] < 90
    assert sweep["status"] == "ok" and sweep["job"] == sweep["id"]  # its own processes, started afresh
    assert sweep["phases"]["imports_s"] > 0
    assert [run["launch_id"] for run in host["runs"]] == ["01-collectives-default-ws2"]


def test_the_first_jobs_ranks_import_beside_the_fingerprints_torch_probes_and_wait_for_them(tmp_path):
    """The torch probes take 20 s more (tests/helpers/slow_torch_probes): the first job's ranks import
    meanwhile, then wait (held) until they end, before any device; the bundle's fingerprint is whole."""
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({"name": "held", "timeout_s": 120, "suites": [
        {"suite": "collectives", "world_sizes": [2], "params": {"ops": ["all_reduce"], "dtypes": ["float32"], "in_place": [True],
                                                                 "begin_bytes": 4096, "end_bytes": 4096, "factor": 2,
                                                                 "warmup_iters": 1, "iters": 1, "repetitions": 3}}]}))
    done = cli("run", "--plan", plan, "--out", tmp_path / "results",
               env={"PYTHONPATH": os.pathsep.join([str(REPO), str(SLOW_PROBES)]), "DDPBENCH_TEST_TORCH_PROBES_S": "20"})
    assert done.returncode == 0, done.stderr
    host = json.loads(bundle_path_from(done.stdout).read_text())["hosts"][0]
    (launch,) = host["launches"]
    phases = launch["phases"]
    assert host["fingerprint"]["probes"]["durations_s"]["torch"] >= 20 and host["fingerprint"]["software"]["torch"]
    assert phases["held_s"] > 1 and phases["spawn_s"] + phases["imports_s"] + phases["held_s"] >= 15, phases
