"""What a launch measured is not lost to its limits: a launch whose sampling toward cv_target, or
whose warm-up, cannot finish within the plan's timeout_s ends with what it measured, each such run
saying so, instead of being killed with every sample lost ("a rank hung or a peer died"); a plan
larger than the host's memory is refused before it runs, and a rank the kernel kills is named as
out of memory with the host's figure (not "torchrun exited with status 1"), and a rank that fails
with an uncaught error is named with that error."""

from __future__ import annotations

import json
import os
import re

import pytest
import yaml

from tests.conftest import REPO, bundle_path_from, cli

TIMEOUT_S = 30  # the ranks stop 10 s before it (bench.agent.launch.deadline_reserve_s)


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


def run_with_helper(tmp_path, helper: str, switch: str):
    """One small all-reduce on 2 ranks, rank 1 started with tests/helpers/HELPER (its sitecustomize)
    switched on by the environment variable SWITCH."""
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({"name": helper, "timeout_s": 60, "suites": [{"suite": "collectives", "world_sizes": [2], "params": {
        "ops": ["all_reduce"], "dtypes": ["float32"], "in_place": [True], "begin_bytes": 4096, "end_bytes": 4096,
        "factor": 2, "warmup_iters": 1, "iters": 1, "repetitions": 1}}]}))
    return cli("run", "--plan", plan, "--out", tmp_path / "results",
               env={"PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests" / "helpers" / helper)]), switch: "1"})


def test_a_rank_the_kernel_kills_is_named_as_out_of_memory_with_the_hosts_figure(tmp_path):
    done = run_with_helper(tmp_path, "killed_rank", "DDPBENCH_TEST_KILLED_RANK")
    assert done.returncode == 1
    (launch,) = json.loads(bundle_path_from(done.stdout).read_text())["hosts"][0]["launches"]
    assert launch["status"] == "failed"
    assert re.fullmatch(r"a rank was killed by SIGKILL, most likely out of memory \((this host's memory|the memory limit of cgroup .+) "
                        r"\([\d.]+ GiB\) allows no more\); lower the "
                        r"entry's sizes, model or batch, or give the host more memory", launch["error"]), launch["error"]


SLOW_STEP = REPO / "tests" / "helpers" / "slow_step"


# A rank's start (torch imported, the process group set up) took 23 s on the 2-core machine under a
# load of 15: these launches leave room for it.
SLOW_TIMEOUT_S = 90


def run_slow_steps(tmp_path, step_s: float, timeout_s: float = SLOW_TIMEOUT_S, **params) -> tuple:
    """The tiny GPT on one rank, each of its steps made step_s seconds longer (tests/helpers/slow_step)."""
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({"name": "slow", "timeout_s": timeout_s, "suites": [{"suite": "ddp", "world_sizes": [1], "params": {
        "model": "tiny", "micro_batch": 2, "seq_len": 16, "steps": 40, "warmup_steps": 1, "precision": "fp32", "compile": False,
        **params}}]}))
    done = cli("run", "--plan", plan, "--out", tmp_path / "results",
               env={"PYTHONPATH": os.pathsep.join([str(REPO), str(SLOW_STEP)]), "DDPBENCH_TEST_STEP_S": str(step_s)})
    assert "Traceback" not in done.stderr, done.stderr
    return done, json.loads(bundle_path_from(done.stdout).read_text())


def test_steps_longer_than_the_time_left_are_cut_and_what_was_timed_is_kept(tmp_path):
    """40 steps of 3 s each cannot fit in a 90 s launch: it times the steps that fit, says so, and ends in time."""
    done, bundle = run_slow_steps(tmp_path, 3.0)
    assert done.returncode == 0, done.stderr
    (launch,) = bundle["hosts"][0]["launches"]
    assert launch["status"] == "ok" and launch["duration_s"] < SLOW_TIMEOUT_S
    (run_record,) = bundle["hosts"][0]["runs"]
    timed = run_record["metrics"]["step_time_s"]["samples"]
    assert run_record["status"] == "ok" and 1 <= len(timed) < 40 and min(timed) >= 3.0
    (note,) = [note for note in run_record["notes"] if note.startswith("timed ")]
    said = re.fullmatch(rf"timed {len(timed)} of its 40 steps: one step takes about ([\d.]+) s and (\d+) s were left of the launch's "
                        r"timeout_s; raise timeout_s, or trim the entry \(fewer steps, smaller batches\); what was measured is kept", note)
    assert said, note
    step_s, left_s = float(said[1]), int(said[2])
    assert step_s >= 3.0 and len(timed) * step_s < left_s  # a 3 s step or longer on a busy machine; the steps timed fit


@pytest.mark.parametrize("compile_model, cause", [
    (False, r"the first step of global batch 2 had run \d+ s and not ended, a step longer than the launch had left; raise "
            r"timeout_s, or lower micro_batch, seq_len or the global batches"),
    (True, r"still compiling the model \(torch\.compile\) in the first step of global batch 2 after \d+ s; compiling took "
           r"longer here than its estimate: raise timeout_s, or set compile: false"),
], ids=["one_long_step", "compiling"])
def test_a_launch_killed_at_its_timeout_names_what_it_was_doing(tmp_path, compile_model, cause):
    """A first step (or its compilation) that outlasts the launch: the line says so, not "a rank hung or a peer died"."""
    done, bundle = run_slow_steps(tmp_path, 600, timeout_s=60, compile=compile_model)
    assert done.returncode == 1
    (launch,) = bundle["hosts"][0]["launches"]
    assert launch["status"] == "timeout"
    assert re.fullmatch(rf"no result after 60 s \(the plan's timeout_s\): {cause}", launch["error"]), launch["error"]


def test_a_rank_that_fails_is_named_with_the_error_it_left_uncaught(tmp_path):
    done = run_with_helper(tmp_path, "raising_rank", "DDPBENCH_TEST_RAISING_RANK")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    (launch,) = json.loads(bundle_path_from(done.stdout).read_text())["hosts"][0]["launches"]
    assert launch["error"] == "rank 1 exited with status 1: RuntimeError: a bug in the suite"
    assert done.stderr.splitlines()[-1].endswith(": rank 1 exited with status 1: RuntimeError: a bug in the suite")
