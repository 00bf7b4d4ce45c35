"""How a plan becomes launches and jobs, without running them: repeats round by round over the whole
plan, launches that start alike in one job (and none over several nodes), the 1-GPU launch training
each N-GPU run's work per GPU as its baseline, the estimate counting each job's start-up once, and a GPU
configuration profiled in its first launch only."""

from __future__ import annotations

import pytest

from bench import suites
from bench.agent.estimate import plan_modelled, stretch
from bench.agent.planning import jobs, plan_launches
from bench.agent.runner import profile_once
from bench.agent.switches import SHARED_JOBS
from bench.common import cost, protocol
from bench.common.host import Capabilities
from bench.controller.plans import load_plan, with_defaults
from bench.errors import UserError
from bench.suites.training import cost as training_cost
from benchmarks.plan_durations import MACHINES

CPU = Capabilities(gpu_count=0, logical_cpus=2)
H100X4 = Capabilities.of(MACHINES["4x H100 (NV18)"])


def ids(found: list) -> list:
    return [launch.id for launch in found]


def test_repeats_come_round_by_round_and_launches_that_start_alike_share_a_job():
    launches = plan_launches(load_plan("quick"), CPU)  # on the CPU: every launch three times
    assert ids(launches) == ["00-collectives-default-ws2", "01-ddp-default-ws2", "01-ddp-default-ws1",
                             "00-collectives-default-ws2-r2", "01-ddp-default-ws2-r2", "01-ddp-default-ws1-r2",
                             "00-collectives-default-ws2-r3", "01-ddp-default-ws2-r3", "01-ddp-default-ws1-r3"]
    assert [ids(job) for job in jobs(launches)][:2] == [["00-collectives-default-ws2", "01-ddp-default-ws2"], ["01-ddp-default-ws1"]]
    assert len(jobs(launches)) == 6  # never two rounds in one job: launch-to-launch spread stays measured


def test_the_scaling_plan_on_four_gpus_runs_its_46_launches_in_24_jobs():
    """29 configurations, the 17 of its training entries in a second round (launch_repeats: 2)."""
    launches = [launch for launch in plan_launches(load_plan("scaling"), H100X4) if not launch.skipped_reason]
    found = jobs(launches)
    assert (len(launches), len(found)) == (46, 24)
    assert ["00-collectives-socket-ws4", "03-ddp-socket-ws4", "05-fsdp-socket-ws4"] in [ids(job) for job in found]
    for job in found:  # one environment a job: NCCL reads its own once per process
        assert len({launch.job_key for launch in job}) == 1


@pytest.mark.parametrize("off", ["0", "false", "off", "No", " FALSE "])
def test_sharing_switched_off_or_over_several_nodes_runs_each_launch_alone(off, monkeypatch):
    launches = plan_launches(load_plan("quick"), CPU)
    shared = len(jobs(launches))
    monkeypatch.setenv(SHARED_JOBS, off)
    assert [len(job) for job in jobs(launches)] == [1] * 9 and shared < 9
    monkeypatch.setenv(SHARED_JOBS, "on")
    assert len(jobs(launches)) == shared
    monkeypatch.setenv(SHARED_JOBS, "sometimes")
    with pytest.raises(UserError, match=r"^DDPBENCH_SHARED_JOBS='sometimes' is neither on nor off; set it to 1 or 0 "):
        jobs(launches)
    monkeypatch.delenv(SHARED_JOBS)
    two_nodes = plan_launches(load_plan("quick"), CPU, protocol.Placement(2, 0, "127.0.0.1:29400"))
    assert all(len(job) == 1 for job in jobs(two_nodes))


def test_the_one_gpu_launch_trains_each_n_gpu_runs_work_per_gpu():
    plan = with_defaults({"name": "like", "timeout_s": 600, "suites": [{"suite": "ddp", "world_sizes": [1, 2, 4], "params": {
        "model": "gpt2-large", "micro_batch": 2, "seq_len": 1024, "global_batches": [16], "steps": 3, "warmup_steps": 1,
        "precision": "bf16"}}]})
    (one, two, four) = [launch for launch in plan_launches(plan, H100X4)]
    assert one.params["baselines_for"] == [2, 4] and "baselines_for" not in two.params
    typed = suites.get("ddp").params(one.params)
    assert typed.baseline_batches() == [(8, 2), (4, 4)]  # accumulating 4 and 2 micro-batches, as each rank of 2 and 4 GPUs
    assert suites.get("ddp").configurations(typed, 1, H100X4) == 3
    assert suites.get("ddp").planned_value({"global_batch": 8, "baseline_for": 2}, "global_batch") == 16


def test_a_job_pays_its_start_up_once_and_a_busy_cpu_stretches_what_its_ranks_use():
    launches = plan_launches(load_plan("quick"), CPU)
    by_model = plan_modelled(launches, CPU)
    shared, alone = by_model["01-ddp-default-ws2"], by_model["01-ddp-default-ws1"]
    assert by_model["00-collectives-default-ws2"].fixed_s == pytest.approx(cost.job_start_s("cpu") + cost.launch_own_s("cpu"))
    assert shared.fixed_s == pytest.approx(cost.launch_own_s("cpu") + cost.job_end_s("cpu"))
    assert alone.fixed_s == pytest.approx(cost.job_start_s("cpu") + cost.launch_own_s("cpu") + cost.job_end_s("cpu"))
    busy = plan_modelled(launches, CPU, slowdown=4.0)
    assert busy["01-ddp-default-ws2"].seconds == pytest.approx(4.0 * shared.seconds)  # two ranks: both cores
    assert busy["01-ddp-default-ws1"].seconds == pytest.approx(2.0 * alone.seconds)  # one rank leaves a core
    assert stretch(H100X4, 4.0, 4) == 1.0  # a GPU host's work is the GPUs'


def test_a_gpu_configuration_is_profiled_in_its_first_launch_and_its_repeats_are_priced_without():
    launches = {launch.id: launch for launch in plan_launches(load_plan("quick"), H100X4)}
    assert launches["01-ddp-default-ws4-r2"].profiled_in == "01-ddp-default-ws4"
    assert launches["01-ddp-default-ws4"].profiled_in == ""
    assert launches["00-collectives-default-ws4-r2"].profiled_in == ""  # nothing of a sweep is profiled
    assert all(not launch.profiled_in for launch in plan_launches(load_plan("quick"), CPU))  # no kernels on a CPU
    by_model = plan_modelled(list(launches.values()), H100X4)
    first, repeat = by_model["01-ddp-default-ws1"], by_model["01-ddp-default-ws1-r2"]
    # The profiler's start and stop, its traces' reading (measured per micro-batch), and its steps of about 30 ms.
    params = suites.get("ddp").params(launches["01-ddp-default-ws1"].params)
    traced = training_cost.PROFILER_S + sum(params.profile_steps * batch // params.micro_batch for batch in params.batches(1)) * (
        training_cost.measured_setup("ddp", params, "gpu")["trace_s"])
    assert traced < first.seconds - repeat.seconds < traced + 0.2


def test_a_repeat_profiles_its_own_steps_where_its_first_launch_did_not_end_ok():
    launches = {launch.id: launch for launch in plan_launches(load_plan("quick"), H100X4)}
    job = [launches["01-ddp-default-ws4-r2"], launches["01-ddp-default-ws1-r2"]]
    profile_once(job, [{"id": "01-ddp-default-ws4", "status": "ok"}, {"id": "01-ddp-default-ws1", "status": "timeout"}])
    assert [launch.profiled_in for launch in job] == ["01-ddp-default-ws4", ""]
