"""A stop (SIGTERM, SIGINT) that comes while a job's processes start: none of them outlives it."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from types import SimpleNamespace

import pytest

from bench.agent import launch
from bench.agent.proctree import descendants
from bench.agent.spawn import stops_deferred


def _exit_on(signum, frame):
    raise SystemExit(128 + signum)  # as the agent does (bench/agent/__main__.py)


@pytest.fixture
def agent_stops():
    previous = signal.signal(signal.SIGTERM, _exit_on)
    yield
    signal.signal(signal.SIGTERM, previous)


def test_a_sigterm_between_two_ranks_starts_ends_both(tmp_path, monkeypatch, agent_stops):
    monkeypatch.setattr(launch, "commands", lambda job, files: [(["sleep", "60"], dict(os.environ))] * 2)
    real_popen, started = subprocess.Popen, []

    def popen_then_stop(*args, **kwargs):
        process = real_popen(*args, **kwargs)
        started.extend(p for p in descendants(os.getpid()) if p.pid == process.pid)
        if len(started) == 1:
            os.kill(os.getpid(), signal.SIGTERM)  # the controller's stop, after the first rank started
        return process

    monkeypatch.setattr(launch.subprocess, "Popen", popen_then_stop)
    job = [SimpleNamespace(timeout_s=60, nodes=SimpleNamespace(nnodes=1))]
    with pytest.raises(SystemExit) as stopped:
        launch.run_processes(job, [], tmp_path / "job.log", time.monotonic(), lambda: (0, time.monotonic()), lambda: None)
    assert stopped.value.code == 128 + signal.SIGTERM
    assert len(started) == 2 and not any(process.alive() for process in started)


def test_a_stop_within_the_block_acts_as_it_ends(agent_stops):
    with pytest.raises(SystemExit):
        with stops_deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            reached = True
    assert reached
    assert signal.getsignal(signal.SIGTERM) is _exit_on
