"""Where a launch's time went, in the bundle of the real CPU run: every launch's phases, summing to its
duration; the launches that start alike in one job, paying its start-up and exit once; and the line
`ddpbench run` ends with; and how fast the host's CPU ran meanwhile."""

from __future__ import annotations

import pytest

from bench import schemas
from bench.common import launch_time
from bench.common.protocol import PHASES, START_PHASES


def test_each_launch_says_where_its_time_went_and_the_job_it_ran_in(real_bundle):
    launches = {launch["id"]: launch for launch in real_bundle["hosts"][0]["launches"]}
    assert sorted(launches) == ["00-collectives-default-ws2", "01-ddp-default-ws1", "01-ddp-default-ws2"]
    for launch in launches.values():
        assert schemas.first_problem(launch, "bundle", "launch") is None
        assert sorted(launch["phases"]) == sorted(f"{name}_s" for name in PHASES)
        assert sum(launch["phases"].values()) == pytest.approx(launch["duration_s"], abs=0.02)
        assert launch["phases"]["measured_s"] > 0
    # The 2-rank launches start alike: the all-reduce sweep starts the job, DDP's runs in it and ends it.
    first, second = launches["00-collectives-default-ws2"], launches["01-ddp-default-ws2"]
    assert first["job"] == second["job"] == first["id"] and launches["01-ddp-default-ws1"]["job"] == "01-ddp-default-ws1"
    assert first["phases"]["imports_s"] > 0 and first["phases"]["teardown_s"] == 0
    assert all(second["phases"][f"{name}_s"] == 0 for name in START_PHASES) and second["phases"]["teardown_s"] > 0


def test_each_launch_records_how_fast_its_hosts_cpu_ran_python(real_bundle):
    """The agent times a Python call every second while a job runs: each launch keeps those of its span."""
    for launch in real_bundle["hosts"][0]["launches"]:
        pace = launch["cpu_pace"]
        assert pace["samples_count"] >= max(1, launch["duration_s"] // 2 - 1), launch["id"]  # a busy machine delays some
        assert 10 < pace["python_call_ns_min"] <= pace["python_call_ns_median"] <= pace["python_call_ns_max"] < 100_000


def test_the_run_ends_with_where_its_launch_time_went(real_bundle):
    (line,) = launch_time.summary_lines(real_bundle)
    launches = real_bundle["hosts"][0]["launches"]
    total = sum(launch["duration_s"] for launch in launches)
    measured = sum(launch["phases"]["measured_s"] for launch in launches)
    assert line.startswith(f"launch time: host local: {total:.0f} s in 3 launches (2 jobs), measured {measured:.1f} s "
                           f"({measured / total:.0%}); the most beside it: ")
    named = line.split("the most beside it: ")[1].split(", ")
    assert len(named) == 3 and any(part.startswith("start-up ") for part in named)  # torch imported twice, by 2 ranks then 1
