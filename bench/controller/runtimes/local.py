"""Runtime `local`: this machine, no SSH, no Docker; the agent runs as a child process."""

from __future__ import annotations

import json
import os
import sys

from bench.common.files import write_text
from bench.common.paths import SOURCE_ROOT
from bench.controller.runtimes.base import INTERRUPTED, AgentJob, Runtime, agent_output_listener, exited_early, read_raw
from bench.controller.shell import LocalShell


class LocalRuntime(Runtime):
    needs_address = False  # this machine
    group_refusal = "a group's hosts need runtime native or docker (a slurm job spans nodes by itself: set slurm: nodes)"

    def __init__(self) -> None:
        pythonpath = os.pathsep.join(filter(None, [str(SOURCE_ROOT), os.environ.get("PYTHONPATH")]))
        self._shell = LocalShell({"PYTHONPATH": pythonpath})
        self._cancelled = ""

    def run(self, job: AgentJob) -> dict:
        job.result_dir.mkdir(parents=True, exist_ok=True)
        plan_path = job.result_dir / "plan.json"
        write_text(plan_path, json.dumps(job.plan))
        # The agent's stdin is a pipe from this process: when the controller is killed (kill -9),
        # it closes and the agent ends its ranks instead of running on unseen.
        command = job.agent_args(str(plan_path), str(job.result_dir), stop_on_stdin_eof=True).argv([sys.executable, "-m", "bench.agent"])
        errors = []
        done = self._shell.stream(command, agent_output_listener(job, errors))
        return read_raw(job, errors, lambda: f"the agent was ended: {self._cancelled}" if self._cancelled else exited_early(done))

    def cancel(self, reason: str = INTERRUPTED) -> None:
        """End the agent (it ends its ranks); what it already wrote stays."""
        self._cancelled = self._cancelled or reason
        self._shell.stop(reason)
