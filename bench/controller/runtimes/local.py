"""Runtime `local`: this machine, no SSH, no Docker; the agent runs as a child process."""

from __future__ import annotations

import json
import os
import sys

from bench.common.paths import SOURCE_ROOT
from bench.controller.runtimes.base import INTERRUPTED, AgentJob, HostError, Runtime, agent_output_listener
from bench.controller.shell import LocalShell


class LocalRuntime(Runtime):
    def __init__(self) -> None:
        pythonpath = os.pathsep.join(filter(None, [str(SOURCE_ROOT), os.environ.get("PYTHONPATH")]))
        self._shell = LocalShell({"PYTHONPATH": pythonpath})
        self._cancelled = ""

    def run(self, job: AgentJob) -> dict:
        job.result_dir.mkdir(parents=True, exist_ok=True)
        plan_path = job.result_dir / "plan.json"
        plan_path.write_text(json.dumps(job.plan))
        # The agent's stdin is a pipe from this process: when the controller is killed (kill -9),
        # it closes and the agent ends its ranks instead of running on unseen.
        command = job.agent_command([sys.executable, "-m", "bench.agent"], str(plan_path), str(job.result_dir), "--stop-on-stdin-eof")
        errors = []
        on_line = agent_output_listener(job, errors)
        done = self._shell.stream(command, on_line)
        raw_path = job.result_dir / "raw.json"
        if errors:
            raise HostError(errors[0])
        if not raw_path.exists():
            if self._cancelled:
                raise HostError(f"the agent was ended: {self._cancelled}")
            last = done.stderr.strip().splitlines()[-1:] or ["no output"]
            raise HostError(f"the agent exited with status {done.code} before writing results: {last[0].strip()}")
        return json.loads(raw_path.read_text())

    def cancel(self, reason: str = INTERRUPTED) -> None:
        """End the agent (it ends its ranks); what it already wrote stays."""
        self._cancelled = self._cancelled or reason
        self._shell.stop(reason)
