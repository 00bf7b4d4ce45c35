"""What a launch measured is not lost to its limits: a launch whose sampling toward cv_target, or
whose warm-up, cannot finish within the plan's timeout_s ends with what it measured, each such run
saying so, instead of being killed with every sample lost ("a rank hung or a peer died"); a plan
larger than the host's memory is refused before it runs, and a rank the kernel kills is named as
out of memory with the host's figure (not "torchrun exited with status 1")."""

from __future__ import annotations

import json
import os
import re

import yaml

from tests.conftest import REPO, bundle_path_from, cli

TIMEOUT_S = 30  # the ranks stop 10 s before it (runner.deadline_reserve_s)


def run(tmp_path, entry: dict) -> tuple:
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({"name": "deadline", "timeout_s": TIMEOUT_S, "suites": [entry]}))
    done = cli("run", "--plan", plan, "--out", tmp_path / "results")
    return done, json.loads(bundle_path_from(done.stdout).read_text())


def test_sampling_that_cannot_reach_its_cv_target_stops_in_time_and_keeps_its_samples(tmp_path):
    done, bundle = run(tmp_path, {"suite": "collectives", "world_sizes": [2], "params": {
        "ops": ["all_reduce"], "dtypes": ["float32"], "in_place": [True], "begin_bytes": 4096, "end_bytes": 16384,
        # 50 calls a sample: the deadline comes long before the bundle's 10000 samples, on a fast machine too
        "factor": 4, "warmup_iters": 1, "iters": 50, "repetitions": 5, "cv_target": 1e-9, "sampling_cap_s": 86400}})
    assert done.returncode == 0, done.stderr
    (launch,) = bundle["hosts"][0]["launches"]
    assert launch["status"] == "ok" and launch["duration_s"] < TIMEOUT_S
    first, second = bundle["hosts"][0]["runs"]
    assert first["status"] == "ok" and len(first["metrics"]["busbw_gbps"]["samples"]) > 5  # it sampled until the deadline
    assert len(first["notes"]) == 1 and first["notes"][0].startswith("sampling stopped at the launch's timeout_s with ")
    assert "above cv_target 0.0%: what was measured is kept" in first["notes"][0]
    assert second["status"] == "ok" and second["metrics"]["busbw_gbps"]["samples"]  # the point after it ran too


def test_a_warm_up_that_never_settles_stops_in_time_and_the_steps_are_timed(tmp_path):
    done, bundle = run(tmp_path, {"suite": "ddp", "world_sizes": [2], "params": {
        "model": "tiny", "micro_batch": 2, "seq_len": 32, "steps": 3, "warmup_steps": 1, "precision": "fp32",
        "compile": False, "warmup_tolerance": 1e-9, "warmup_max_steps": 10000}})
    assert done.returncode == 0, done.stderr
    (run_record,) = bundle["hosts"][0]["runs"]
    assert run_record["status"] == "ok" and len(run_record["metrics"]["step_time_s"]["samples"]) == 3
    assert run_record["metrics"]["warmup_steps_count"]["samples"][0] > 3
    assert any(note.startswith("warm-up stopped after ") and "timed steps may include warm-up" in note for note in run_record["notes"])
    assert bundle["hosts"][0]["launches"][0]["duration_s"] < TIMEOUT_S


def test_a_sweep_larger_than_the_hosts_memory_is_refused_before_any_launch(tmp_path):
    done, bundle = run(tmp_path, {"suite": "collectives", "world_sizes": [2], "params": {
        "ops": ["all_reduce"], "dtypes": ["float32"], "in_place": [True], "begin_bytes": 4096, "end_bytes": 64 << 30,
        "factor": 4, "warmup_iters": 1, "iters": 1, "repetitions": 1}})
    assert done.returncode == 1 and "Traceback" not in done.stderr
    (line,) = [l for l in done.stderr.splitlines() if l.startswith("error: ")]
    assert line.startswith("error: host local: failed: collectives: end_bytes 68719476736 needs about 549755813888 bytes "
                           "of host memory on 2 rank(s) (gloo reduces in host memory), ")
    assert re.search(r"\), (this host's memory|the memory limit of cgroup .+) \([\d.]+ [GT]iB\) allows 80% of it; lower end_bytes$", line), line
    assert bundle["hosts"][0]["launches"] == []


def test_a_rank_the_kernel_kills_is_named_as_out_of_memory_with_the_hosts_figure(tmp_path):
    helper = REPO / "tests" / "helpers" / "killed_rank"
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({"name": "killed", "timeout_s": 60, "suites": [{"suite": "collectives", "world_sizes": [2], "params": {
        "ops": ["all_reduce"], "dtypes": ["float32"], "in_place": [True], "begin_bytes": 4096, "end_bytes": 4096,
        "factor": 2, "warmup_iters": 1, "iters": 1, "repetitions": 1}}]}))
    done = cli("run", "--plan", plan, "--out", tmp_path / "results",
               env={"PYTHONPATH": os.pathsep.join([str(REPO), str(helper)]), "DDPBENCH_TEST_KILLED_RANK": "1"})
    assert done.returncode == 1
    (launch,) = json.loads(bundle_path_from(done.stdout).read_text())["hosts"][0]["launches"]
    assert launch["status"] == "failed"
    assert re.fullmatch(r"a rank was killed by SIGKILL, most likely out of memory \((this host's memory|the memory limit of cgroup .+) "
                        r"\([\d.]+ GiB\) allows no more\); lower the "
                        r"entry's sizes, model or batch, or give the host more memory", launch["error"]), launch["error"]
