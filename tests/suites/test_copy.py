"""The copy suite, for real on the CPU (host memory to host memory through the same harness,
check and statistics as on a GPU), and what the planner refuses before launching it."""

from __future__ import annotations

import pytest
import torch

from bench.agent.harness import Context, time_per_call
from bench.agent.planning import plan_launches
from bench.agent.runner import run_plan
from bench.common.host import Capabilities
from bench.common.protocol import RunEnded
from bench.errors import PlanError
from bench.suites.copy.suite import WARMUP_LEAST_S
from bench.controller.plans import check
from bench import schemas

COPY = {
    "suite": "copy",
    "params": {"directions": ["h2d", "d2h", "d2d"], "engines": ["ce", "sm"], "bidirectional": [False, True],
               "begin_bytes": 4096, "end_bytes": 1 << 20, "factor": 16, "warmup_iters": 1, "iters": 2, "repetitions": 3},
}
CPU_HOST = {"gpus": [], "cpu": {"logical_cpus": 2}, "network": {"infiniband": []}, "memory_total_bytes": 8 << 30}
ONE_GPU_BUSY = Capabilities(gpu_count=1, gpu_memory_bytes=80 << 30, infiniband=False, logical_cpus=8,
                        gpu_memory_free_bytes=3 << 30, host_memory_bytes=256 << 30)


@pytest.fixture(scope="module")
def cpu_copy_run(tmp_path_factory) -> tuple[dict, list]:
    """The agent's raw result and the progress events it sent."""
    events: list = []
    raw = run_plan(check({"name": "copy-cpu", "timeout_s": 240, "suites": [COPY]}, "copy-cpu"),
                   tmp_path_factory.mktemp("copy"), CPU_HOST, progress=events.append)
    return raw, events


@pytest.fixture(scope="module")
def cpu_copies(cpu_copy_run) -> dict:
    return cpu_copy_run[0]


def test_cpu_host_runs_host_to_host_copies_one_way_with_statistics(cpu_copies):
    assert [l["status"] for l in cpu_copies["launches"]] == ["ok"]
    runs = cpu_copies["runs"]
    assert [(r["params"]["direction"], r["params"]["engine"], r["params"]["bidirectional"], r["params"]["size_bytes"])
            for r in runs] == [("h2h", "cpu", False, 4096), ("h2h", "cpu", False, 65536), ("h2h", "cpu", False, 1 << 20)]
    for run in runs:
        assert run["status"] == "ok" and run["world_size"] == 1
        gbps, time_s = run["metrics"]["copy_gbps"], run["metrics"]["time_s"]
        assert gbps["summary"]["n"] == 3
        # bytes per second of the one copy: the suite's whole byte count
        assert gbps["samples"][0] == pytest.approx(run["params"]["size_bytes"] / time_s["samples"][0] / 1e9)


def test_each_copy_run_records_the_span_of_its_timed_calls(cpu_copies):
    windows = [run["measured_window"] for run in cpu_copies["runs"]]
    # iters calls per repetition, the warm-up left out; one run after the other
    assert [w["steps_count"] for w in windows] == [2 * run["metrics"]["time_s"]["summary"]["n"] for run in cpu_copies["runs"]]
    assert all(w["start_s"] < w["end_s"] for w in windows)
    assert all(a["end_s"] <= b["start_s"] for a, b in zip(windows, windows[1:]))


def test_each_copy_point_warms_up_for_at_least_its_least_time_before_it_is_timed(cpu_copies):
    """One warm-up copy of 4 KiB lasts microseconds; the first milliseconds of copies into new
    buffers can run slow, so the warm-up goes on for WARMUP_LEAST_S."""
    windows = [run["measured_window"] for run in cpu_copies["runs"]]
    assert all(b["start_s"] - a["end_s"] >= WARMUP_LEAST_S for a, b in zip(windows, windows[1:]))


def test_copy_runs_validate_against_the_bundle_schema(cpu_copies):
    assert [schemas.first_problem(run, "bundle", "run") for run in cpu_copies["runs"]] == [None] * 3


def test_copy_launch_is_one_rank_whatever_the_gpu_count():
    plan = check({"name": "t", "suites": [{**COPY, "params": {**COPY["params"], "end_bytes": 1 << 20}}]}, "t")
    launches = plan_launches(plan, Capabilities(gpu_count=2, gpu_memory_bytes=24 << 30, infiniband=False, logical_cpus=8,
                                            gpu_memory_free_bytes=24 << 30, host_memory_bytes=64 << 30))
    assert [(l.id, l.world_size) for l in launches] == [("00-copy-default-ws1", 1)]


def test_copy_size_over_free_gpu_memory_is_refused_before_launch():
    plan = check({"name": "t", "suites": [{**COPY, "params": {**COPY["params"], "end_bytes": 1 << 30}}]}, "t")
    with pytest.raises(PlanError, match=r"copy: end_bytes 1073741824 needs about 4294967296 bytes of GPU memory, "
                                        r"the GPU has 3221225472 free; lower end_bytes"):
        plan_launches(plan, ONE_GPU_BUSY)


def test_copy_size_over_host_memory_is_refused_before_launch():
    plan = check({"name": "t", "suites": [{**COPY, "params": {**COPY["params"], "end_bytes": 4 << 30}}]}, "t")
    with pytest.raises(PlanError, match=r"pinned host memory, more than half of this host's memory \(8 GiB\); lower end_bytes"):
        plan_launches(plan, Capabilities.of(CPU_HOST))


def test_copy_size_is_judged_against_the_cgroups_limit_not_the_machines_memory():
    """A container given 4 GiB of a 64 GiB machine: its copies of 2 GiB cannot be pinned twice there."""
    plan = check({"name": "t", "suites": [{**COPY, "params": {**COPY["params"], "end_bytes": 2 << 30}}]}, "t")
    container = {**CPU_HOST, "memory_total_bytes": 64 << 30, "memory_limit_bytes": 4 << 30}
    with pytest.raises(PlanError, match=r"pinned host memory, more than half of its cgroup's memory limit \(4 GiB\); lower end_bytes"):
        plan_launches(plan, Capabilities.of(container))
    assert plan_launches(plan, Capabilities.of({**container, "memory_limit_bytes": None}))


def test_progress_names_each_finished_copy(cpu_copy_run):
    """The line a user sees per finished configuration says which copy it was."""
    finished = [event.run for event in cpu_copy_run[1] if isinstance(event, RunEnded)]
    assert finished == [f"h2h cpu host→host {size}" for size in ("4 KiB", "64 KiB", "1 MiB")]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_a_queued_ahead_repetition_times_the_copies_not_pythons_issue_rate():
    """4 KiB device copies take the GPU about 2 us and Python longer to issue: timed as issued,
    a copy looks as slow as Python; queued ahead, as fast as the GPU copies."""
    ctx = Context(rank=0, local_rank=0, world_size=1, device=torch.device("cuda", 0), backend="nccl")
    src, dst = torch.ones(1024, device=ctx.device), torch.empty(1024, device=ctx.device)
    copy = lambda: dst.copy_(src, non_blocking=True)  # noqa: E731
    for _ in range(10):
        copy()
    ctx.sync()
    as_issued = min(time_per_call(ctx, copy, 50) for _ in range(5))
    queued_ahead = min(time_per_call(ctx, copy, 50, queue_ahead=True) for _ in range(5))
    assert queued_ahead < 0.8 * as_issued, (queued_ahead, as_issued)
