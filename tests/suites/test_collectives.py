"""The collectives suite, for real on the CPU (gloo, torchrun): nccl-tests' byte counting and
busbw factors for every collective, the correctness check, and the bad-input cases."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bench.agent.planning import plan_launches
from bench.agent.runner import run_launch, run_plan
from bench.common.host import Capabilities
from bench.controller.plans import check
from bench.errors import PlanError
from tests.conftest import REPO

EVERY_OP = {
    "name": "every-op",
    "timeout_s": 240,
    "suites": [{
        "suite": "collectives", "world_sizes": [2, 3],
        "params": {"ops": ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "sendrecv"],
                   "dtypes": ["float32", "bfloat16"], "in_place": [False, True], "begin_bytes": 4096,
                   "end_bytes": 16384, "factor": 4, "p2p_sizes_bytes": [8192],
                   "warmup_iters": 1, "iters": 2, "repetitions": 3},
    }],
}
# Four cores claimed: the planner gives a CPU host no more ranks than cores, and every_op runs 3.
CPU_HOST = {"gpus": [], "cpu": {"logical_cpus": 4}, "network": {"infiniband": []}}
# nccl-tests' bus-bandwidth factors (src/*.cu): what each collective's busiest link carries.
BUSBW_FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
                "reduce_scatter": lambda n: (n - 1) / n, "broadcast": lambda n: 1.0, "sendrecv": lambda n: 1.0}


@pytest.fixture(scope="module")
def every_op(tmp_path_factory) -> dict:
    return run_plan(check(EVERY_OP, "every-op"), tmp_path_factory.mktemp("every-op"), CPU_HOST)


def test_every_op_ran_and_checked_out(every_op):
    assert [l["status"] for l in every_op["launches"]] == ["ok", "ok"]
    failed = [r for r in every_op["runs"] if r["status"] != "ok"]
    assert not failed, failed[0]["error"]
    ops = {(r["params"]["op"], r["world_size"]) for r in every_op["runs"]}
    assert ops == {(op, n) for op in BUSBW_FACTOR for n in (2, 3)}


def test_each_run_records_rank_0s_timed_calls_on_the_hosts_clock(every_op):
    for launch in every_op["launches"]:
        runs = [r for r in every_op["runs"] if r["launch_id"] == launch["id"]]
        windows = [r["measured_window"] for r in runs]
        assert [w["steps_count"] for w in windows] == [2 * r["metrics"]["time_s"]["summary"]["n"] for r in runs]
        assert all(a["start_s"] < a["end_s"] <= b["start_s"] for a, b in zip(windows, windows[1:]))


@pytest.mark.parametrize("op", sorted(BUSBW_FACTOR))
def test_busbw_factor_of_each_op(every_op, op):
    for run in (r for r in every_op["runs"] if r["params"]["op"] == op):
        n, m = run["world_size"], run["metrics"]
        for algbw, busbw in zip(m["algbw_gbps"]["samples"], m["busbw_gbps"]["samples"]):
            assert busbw == pytest.approx(algbw * BUSBW_FACTOR[op](n))


def test_gather_and_scatter_count_the_whole_buffer(every_op):
    """all_gather and reduce_scatter sizes are count x nranks x element size, rounded to fit n ranks."""
    sizes = {(r["params"]["op"], r["params"]["dtype"], r["world_size"]) for r in every_op["runs"]
             if r["params"]["size_bytes"] < 8192}
    for op in ("all_gather", "reduce_scatter"):
        assert (op, "float32", 2) in sizes
        run = next(r for r in every_op["runs"] if r["params"]["op"] == op and r["world_size"] == 3
                   and r["params"]["dtype"] == "float32" and r["params"]["size_bytes"] < 8192)
        assert run["params"]["size_bytes"] == 1023 * 4  # 4096 bytes asked: 1024 floats, 1023 divide by 3


def test_all_reduce_and_broadcast_are_recorded_in_place(every_op):
    for op in ("all_reduce", "broadcast"):
        assert {r["params"]["in_place"] for r in every_op["runs"] if r["params"]["op"] == op} == {True}
    assert {r["params"]["in_place"] for r in every_op["runs"] if r["params"]["op"] == "all_gather"} == {True, False}


def test_sendrecv_matrix_has_every_ordered_pair(every_op):
    pairs = {(r["params"]["src_rank"], r["params"]["dst_rank"]) for r in every_op["runs"]
             if r["params"]["op"] == "sendrecv" and r["world_size"] == 3 and r["params"]["dtype"] == "float32"}
    assert pairs == {(s, d) for s in range(3) for d in range(3) if s != d}


def test_planted_wrong_result_is_caught_on_every_rank(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
         str(REPO / "tests" / "helpers" / "planted_wrong_result.py"), str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr
    for rank in (0, 1):
        line = (tmp_path / f"RANK{rank}.txt").read_text()
        assert "honest=None" in line
        assert "planted='planted all_reduce: wrong result on rank" in line and "expected" in line


QUICK = {"suite": "collectives", "params": {"ops": ["all_reduce"], "dtypes": ["float32"], "in_place": [True],
         "begin_bytes": 1 << 20, "end_bytes": 1 << 30, "factor": 4, "warmup_iters": 1, "iters": 1, "repetitions": 1}}
TWO_SMALL_GPUS = Capabilities(gpu_count=2, gpu_memory_bytes=2 << 30, infiniband=False, logical_cpus=8)


def test_size_that_does_not_fit_gpu_memory_is_refused_before_launch():
    with pytest.raises(PlanError, match="end_bytes 1073741824 needs about 3221225472 bytes of GPU memory, the GPU has 2147483648; lower end_bytes"):
        plan_launches(check({"name": "t", "suites": [QUICK]}, "t"), TWO_SMALL_GPUS)


def test_ib_preset_without_infiniband_is_refused_before_launch():
    plan = {"name": "t", "suites": [{**QUICK, "transports": ["ib"], "params": {**QUICK["params"], "end_bytes": 1 << 20}}]}
    with pytest.raises(PlanError, match="'ib' needs an active InfiniBand port, this host has none"):
        plan_launches(check(plan, "t"), TWO_SMALL_GPUS)


def test_world_size_beyond_the_gpus_is_skipped_with_reason():
    plan = {"name": "t", "suites": [{**QUICK, "world_sizes": [2, 4], "params": {**QUICK["params"], "end_bytes": 1 << 20}}]}
    launches = plan_launches(check(plan, "t"), TWO_SMALL_GPUS)
    assert [(l.world_size, l.skipped_reason) for l in launches] == [(2, ""), (4, "needs 4 GPUs per node, this host has 2")]


def test_one_rank_runs_once_whatever_the_transports():
    plan = {"name": "t", "suites": [{**QUICK, "transports": ["default", "p2p_off"], "world_sizes": [1, 2],
                                     "params": {**QUICK["params"], "end_bytes": 1 << 20}}]}
    launches = plan_launches(check(plan, "t"), TWO_SMALL_GPUS)
    assert [(l.id, l.skipped_reason) for l in launches] == [
        ("00-collectives-default-ws1", ""), ("00-collectives-default-ws2", ""),
        ("00-collectives-p2p_off-ws1", "one rank uses no link: its run is the one under 'default'"),
        ("00-collectives-p2p_off-ws2", ""),
    ]


def test_hung_launch_is_ended_by_the_plan_timeout(tmp_path):
    """A sweep that cannot finish in the plan's timeout: ended, recorded, last log lines kept."""
    plan = check({"name": "hang", "timeout_s": 8, "suites": [{**QUICK, "world_sizes": [2], "params": {
        **QUICK["params"], "begin_bytes": 1 << 26, "end_bytes": 1 << 28, "iters": 50, "repetitions": 50}}]}, "hang")
    (planned,) = plan_launches(plan, Capabilities.of(CPU_HOST))
    launch, _ = run_launch(planned, tmp_path)  # run_plan would refuse it: its estimate is past timeout_s
    assert launch["status"] == "timeout"
    assert "no result after 8 s (the plan's timeout_s)" in launch["error"]
    assert launch["log_tail"], "the ranks' last log lines are kept"
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert str(tmp_path) not in ps, "a rank outlived the timeout"


def test_world_size_all_on_a_one_gpu_host_skips_the_collectives_that_would_cross_no_link():
    """quick on a one-GPU box: its first launch would be all-reduces over one rank, busbw 0 by definition."""
    one_gpu = Capabilities(gpu_count=1, gpu_memory_bytes=80 << 30, infiniband=False, logical_cpus=8)
    plan = {"name": "t", "suites": [{**QUICK, "world_sizes": ["all"], "params": {**QUICK["params"], "end_bytes": 1 << 20}}]}
    (launch,) = plan_launches(check(plan, "t"), one_gpu)
    assert launch.world_size == 1 and launch.skipped_reason == (
        "world size all is one GPU on this host, and collectives over one rank crosses no link (busbw is 0 by definition); "
        "give world_sizes: [1] to run it anyway")
    explicit = {"name": "t", "suites": [{**plan["suites"][0], "world_sizes": [1]}]}
    assert [launch.skipped_reason for launch in plan_launches(check(explicit, "t"), one_gpu)] == [""]


def test_quick_on_a_one_gpu_host_starts_with_training_not_one_rank_all_reduces():
    one_gpu = Capabilities(gpu_count=1, gpu_memory_bytes=80 << 30, infiniband=False, logical_cpus=8)
    from bench.controller.plans import load_plan

    launches = plan_launches(load_plan("quick"), one_gpu)
    # the plan's precision block: every configuration in 2 launches
    assert [(l.suite, l.world_size) for l in launches if not l.skipped_reason] == [("ddp", 1), ("ddp", 1)]
