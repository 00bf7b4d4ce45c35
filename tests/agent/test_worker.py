"""How a rank ends: a real CPU launch through torchrun and bench.agent.worker."""

from __future__ import annotations

import json
import os

import yaml

from tests.conftest import REPO, bundle_path_from, cli


def test_a_rank_whose_gloo_workers_are_still_finishing_collectives_ends_cleanly(tmp_path):
    """DDP leaves the ranks' gloo process group alive past destroy_process_group, so its worker threads
    outlive the rank's work; ranks that end while those threads still drop their last collectives'
    tensors finish their launch as ok (Python's finalization would abort them after every record
    was written)."""
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({"name": "rank-exit", "timeout_s": 300, "suites": [{"suite": "ddp", "world_sizes": [2], "params": {
        "model": "tiny", "micro_batch": 2, "seq_len": 32, "global_batches": [4], "steps": 2, "warmup_steps": 1, "precision": "fp32",
        "compile": False}}]}))
    helper = REPO / "tests" / "helpers" / "collectives_at_exit"
    done = cli("run", "--plan", plan, "--out", tmp_path / "results", env={"PYTHONPATH": os.pathsep.join([str(REPO), str(helper)])})
    assert done.returncode == 0, done.stderr
    bundle = json.loads(bundle_path_from(done.stdout).read_text())
    (launch,) = bundle["hosts"][0]["launches"]
    assert launch["status"] == "ok", launch
    assert [run["status"] for run in bundle["hosts"][0]["runs"]] == ["ok"]


def test_ranks_meet_in_a_run_folder_given_as_a_relative_path_and_leave_no_store_behind(tmp_path):
    """One node's ranks meet in a store file in the run folder, not on a port another process may take."""
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({"name": "relative", "timeout_s": 60, "suites": [{"suite": "collectives", "world_sizes": [2], "params": {
        "ops": ["all_reduce"], "dtypes": ["float32"], "in_place": [True], "begin_bytes": 4096, "end_bytes": 4096,
        "factor": 2, "warmup_iters": 1, "iters": 1, "repetitions": 1}}]}))
    done = cli("run", "--hosts", REPO / "hosts" / "local.yaml", "--plan", plan, "--out", "results", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (path,) = (tmp_path / "results").glob("*/bundle.json")
    bundle = json.loads(path.read_text())
    assert [launch["status"] for launch in bundle["hosts"][0]["launches"]] == ["ok"]
    assert not list((tmp_path / "results").rglob("*.store"))
