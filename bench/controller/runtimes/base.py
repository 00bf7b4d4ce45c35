"""What every runtime shares: the job it is given, the error it raises, and its interface."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from bench.controller.errors import HostError
from bench.controller.hosts import Host

INTERRUPTED = "interrupted (Ctrl-C)"
# A host's work folder goes only after its results arrived intact (see Shell.fetch_results).
KEPT_RESULTS = "kept {where}: its results could not be fetched intact; copy them by hand, then remove the folder"


@dataclass
class AgentJob:
    host: Host
    plan: dict
    result_dir: Path  # on this machine: where raw.json and the launch logs end up
    progress: Callable[[dict], None]
    run_id: str = "run"
    skip_launch_ids: frozenset = frozenset()
    agent_args: list = field(default_factory=list)  # multi-node placement, added by the group runner
    extra_env: dict = field(default_factory=dict)  # for the ranks, on top of the host's env (group interfaces)
    history: "dict | None" = None  # launch durations of an earlier run of this plan here (bench/common/history.py)

    def agent_command(self, entry: list[str], plan_path: str, out_dir: str, *flags: str) -> list[str]:
        """entry: how the host starts the agent, e.g. [python, "-m", "bench.agent"] or [python, "agent.pyz"]."""
        env = {**self.host.env, **self.extra_env}
        command = [*entry, "run", "--plan", plan_path, "--out", out_dir, "--env", json.dumps(env), *flags, *self.agent_args]
        if self.skip_launch_ids:
            command += ["--skip", ",".join(sorted(self.skip_launch_ids))]
        if self.history:
            command += ["--history", json.dumps(self.history)]
        return command


class Runtime:
    """run(job) starts the agent with the plan, streams its progress events to job.progress,
    and returns the agent's raw result, or raises HostError; cancel() ends it from another
    thread. prepare(job) does what can fail before the agent starts (a group prepares every
    member before starting any); run() calls it when nobody did."""

    pin_mismatches: tuple = ()  # where the host's versions differ from the plan's pin
    scheduler_job: "dict | None" = None  # the batch job the agent ran in (runtime slurm), for the bundle

    def check_input(self, host: Host, plan: dict) -> None:
        """Bad input this runtime can find before anything runs (a UserError, exit 2)."""

    def prepare(self, job: AgentJob) -> None:
        pass

    def run(self, job: AgentJob) -> dict:
        raise NotImplementedError

    def cancel(self, reason: str = INTERRUPTED) -> None:
        raise NotImplementedError


class StagedRuntime(Runtime):
    """A runtime that readies a host in named stages (connect, check, deploy ...) before the
    agent starts, and always cleans up after it; cancel() between stages starts nothing more.
    Subclasses give prepare(), _run_agent() and _close()."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancelled = ""

    def _stage(self, job: AgentJob, stage: str) -> None:
        with self._lock:
            if self._cancelled:
                raise HostError(self._cancelled)
        job.progress({"event": "stage", "stage": stage})

    def run(self, job: AgentJob) -> dict:
        self.prepare(job)
        try:
            return self._run_agent(job)
        finally:
            self._close(job)

    def _run_agent(self, job: AgentJob) -> dict:
        raise NotImplementedError

    def _close(self, job: AgentJob) -> None:
        raise NotImplementedError


def read_event(line: str) -> "dict | None":
    """One progress event from the agent's stdout; anything else is not ours to parse."""
    try:
        event = json.loads(line)
    except ValueError:
        return None
    return event if isinstance(event, dict) and "event" in event else None


def agent_output_listener(job: AgentJob, errors: list) -> Callable[[str], None]:
    """A handler for the agent's stdout lines: progress events go to the job, error events are kept."""

    def on_line(line: str) -> None:
        event = read_event(line)
        if event is None:
            return
        if event["event"] == "error":
            errors.append(event["message"])
        job.progress(event)

    return on_line
