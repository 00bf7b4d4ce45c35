"""What the progress lines say, word for word: counts in the right number, the launches a resumed
run finished before said to be kept, a CPU's ranks called processes, a host stopped short of its
plan's end never called done."""

from __future__ import annotations

import io
from types import SimpleNamespace

from rich.console import Console

from bench import suites
from bench.common import protocol
from bench.common.run import Run
from bench.controller import progress as progress_module
from bench.controller.progress import HostProgress


def _said(*events) -> list[str]:
    out = io.StringIO()
    progress = HostProgress(["h"], Console(file=out, width=500))
    for event in events:
        progress.update("h", event)
    return out.getvalue().splitlines()


def test_one_launch_of_one_configuration_is_said_in_the_singular():
    assert _said(protocol.Planned(["00-x"], {"00-x": 5.0}, {"00-x": 1})) == [
        "[h] 1 launch, estimated 5 s in all: 00-x (1 configuration, ~5 s)"]


def test_a_resumed_run_names_what_finished_before_and_estimates_the_rest():
    planned = protocol.Planned(["00-a", "01-b", "02-c"], {"02-c": 7.0}, {"02-c": 3}, finished_before=["00-a"])
    assert _said(planned) == ["[h] 3 launches, 1 finished before, estimated 7 s for the rest: 00-a (finished before), "
                              "01-b (not run), 02-c (3 configurations, ~7 s)"]


def test_a_cpu_runs_ranks_are_processes_and_a_gpus_are_gpus():
    ddp = suites.get("ddp")
    run = {"suite": "ddp", "params": {"model": "tiny", "precision": "fp32", "global_batch": 8}, "world_size": 1}
    assert ddp.label(Run({**run, "transport": {"backend": "gloo"}})) == "tiny fp32, batch 8, 1 process"
    assert ddp.label(Run({**run, "world_size": 2, "transport": {"backend": "gloo"}})) == "tiny fp32, batch 8, 2 processes"
    assert ddp.label(Run({**run, "world_size": 2, "transport": {"backend": "nccl"}})) == "tiny fp32, batch 8, 2 GPUs"
    # While its launch runs, the record its ranks wrote has no transport: the launch's backend says where they ran.
    assert ddp.progress_label({**run, "world_size": 2}, "gloo") == "tiny fp32, batch 8, 2 processes"
    assert ddp.progress_label({**run, "world_size": 2}, "nccl") == "tiny fp32, batch 8, 2 GPUs"


def test_the_estimate_counts_the_p2p_gate_and_says_how_busy_the_cpu_is(monkeypatch):
    planned = protocol.Planned(["00-x", "01-y"], {"00-x": 20.0, "01-y": 30.0}, {"00-x": 1, "01-y": 2}, gate_s=6.0, slowdown=3.04)
    assert _said(planned) == ["[h] 2 launches, estimated 56 s (the P2P gate ~6 s; this CPU 3.0x slower than idle: other processes) "
                              "in all: 00-x (1 configuration, ~20 s), 01-y (2 configurations, ~30 s)"]
    quiet = protocol.Planned(["00-x"], {"00-x": 20.0}, {"00-x": 1}, slowdown=1.1)
    assert _said(quiet) == ["[h] 1 launch, estimated 20 s in all: 00-x (1 configuration, ~20 s)"]
    now = [100.0]  # the progress's clock, moved by the test alone
    monkeypatch.setattr(progress_module, "time", SimpleNamespace(monotonic=lambda: now[0]))
    progress = HostProgress(["h"], Console(file=io.StringIO(), width=500))
    progress.update("h", planned)
    now[0] += 4
    assert progress._states["h"].eta_s() == 52  # the gate is counted down until the first launch starts
    progress.update("h", protocol.LaunchStarted("00-x"))
    now[0] += 5
    assert progress._states["h"].eta_s() == 45


def test_the_eta_stretches_host_paced_launches_as_much_as_the_finished_ones_took_here(monkeypatch, capsys):
    now = [100.0]
    monkeypatch.setattr(progress_module, "time", SimpleNamespace(monotonic=lambda: now[0]))
    progress = HostProgress(["h"], Console(file=io.StringIO(), width=500))  # no terminal: a line each, as in a log
    launches = {"00-paced": 10.0, "01-paced": 10.0, "02-gpu-bound": 10.0, "03-paced": 10.0}
    progress.update("h", protocol.Planned(list(launches), launches, dict.fromkeys(launches, 1),
                                          host_paced=["00-paced", "01-paced", "03-paced"]))
    progress.update("h", protocol.LaunchStarted("00-paced"))
    assert progress._states["h"].eta_s() == 40  # nothing finished: the estimates as they are
    now[0] += 15
    progress.update("h", protocol.LaunchEnded("00-paced", "ok", None, 1, 15.0))  # this host's CPU: 1.5x the model's
    progress.update("h", protocol.LaunchStarted("01-paced"))
    now[0] += 3
    progress.update("h", protocol.RunEnded("01-paced", 1, 2, "run", 3.0))
    assert progress._states["h"].eta_s() == 12 + 10 + 15  # the running and the last host-paced at 15 s, the GPU-bound as priced
    assert capsys.readouterr().err.splitlines()[-1].endswith("; ETA 37 s, host-paced launches at 1.50x their estimates here)")
    now[0] += 12
    progress.update("h", protocol.LaunchEnded("01-paced", "failed", "boom", 0, 12.0))  # a failed launch teaches nothing
    assert progress._states["h"].pace() == 1.5


def test_a_host_stopped_before_its_plans_end_is_not_said_to_be_done(capsys):
    progress = HostProgress(["a", "b", "c"], Console(file=io.StringIO(), width=500))  # no terminal: a line each, as in a log
    progress.finish("a", None)
    progress.finish("b", None, complete=False)  # as Ctrl-C leaves it: the agent ended, what finished written
    progress.finish("c", "unreachable")
    assert capsys.readouterr().err.splitlines() == [
        "[a] done", "[b] stopped before the end of its plan: what finished is kept", "[c] failed: unreachable"]
