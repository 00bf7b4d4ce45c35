"""What every runtime shares: the job it is given and the error it raises."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from bench.controller.hosts import Host


class HostError(Exception):
    """A host could not run the plan; the message names the cause and the fix."""


@dataclass
class AgentJob:
    host: Host
    plan: dict
    result_dir: Path  # on this machine: where raw.json and the launch logs end up
    progress: Callable[[dict], None]
    skip_launch_ids: frozenset = frozenset()
    agent_args: list = field(default_factory=list)  # multi-node placement, added by the group runner

    def agent_command(self, python: str, plan_path: str, out_dir: str) -> list[str]:
        command = [python, "-m", "bench.agent", "run", "--plan", plan_path, "--out", out_dir,
                   "--env", json.dumps(self.host.env), *self.agent_args]
        if self.skip_launch_ids:
            command += ["--skip", ",".join(sorted(self.skip_launch_ids))]
        return command


def read_event(line: str) -> "dict | None":
    """One progress event from the agent's stdout; anything else is not ours to parse."""
    try:
        event = json.loads(line)
    except ValueError:
        return None
    return event if isinstance(event, dict) and "event" in event else None
