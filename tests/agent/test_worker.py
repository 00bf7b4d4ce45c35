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
