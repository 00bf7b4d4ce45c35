"""Runtime `local`: this machine, no SSH, no Docker; the agent runs as a child process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading

from bench.controller.runtimes.base import INTERRUPTED, AgentJob, HostError, Runtime, read_event

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


class LocalRuntime(Runtime):
    def __init__(self) -> None:
        self._process: "subprocess.Popen | None" = None
        self._lock = threading.Lock()

    def run(self, job: AgentJob) -> dict:
        job.result_dir.mkdir(parents=True, exist_ok=True)
        plan_path = job.result_dir / "plan.json"
        plan_path.write_text(json.dumps(job.plan))
        command = job.agent_command([sys.executable, "-m", "bench.agent"], str(plan_path), str(job.result_dir))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [REPO_ROOT, os.environ.get("PYTHONPATH")]))}
        errors = []
        with self._lock:
            # A session of its own: Ctrl-C reaches the controller, which then ends the agent cleanly.
            self._process = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
            )
        stderr_lines = []
        drain = threading.Thread(target=lambda: stderr_lines.extend(self._process.stderr), daemon=True)
        drain.start()
        for line in self._process.stdout:
            event = read_event(line)
            if event is None:
                continue
            if event["event"] == "error":
                errors.append(event["message"])
            job.progress(event)
        code = self._process.wait()
        drain.join(timeout=5)
        raw_path = job.result_dir / "raw.json"
        if errors:
            raise HostError(errors[0])
        if not raw_path.exists():
            last = next((l.strip() for l in reversed(stderr_lines) if l.strip()), "no output")
            raise HostError(f"the agent exited with status {code} before writing results: {last}")
        return json.loads(raw_path.read_text())

    def cancel(self, reason: str = INTERRUPTED) -> None:
        """End the agent (it ends its ranks); what it already wrote stays."""
        with self._lock:
            process = self._process
        if process is not None and process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
