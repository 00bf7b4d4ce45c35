"""What the benchmark scripts share: write a plan entry, run a plan through the agent and read its results.

Standard library and the agent only, so the scripts run on a GPU host that has nothing but torch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench import suites  # noqa: E402


def plan_entry(suite: str, params: dict, transports: "list | tuple" = ("default",), world_sizes: "list | tuple" = (1,),
               env: "dict | None" = None) -> dict:
    """A plan entry as `ddpbench run` sends it to the agent: every default of the suite's schema written
    out (no jsonschema needed on a bare GPU host), one launch per configuration."""
    properties = suites.get(suite).schema["$defs"]["params"]["properties"]
    complete = {**{key: spec["default"] for key, spec in properties.items() if "default" in spec}, **params}
    return {"suite": suite, "transports": list(transports), "world_sizes": list(world_sizes), "launch_repeats": 1,
            "params": complete, "env": env or {}}


def run_plan(plan: dict, out_dir: "Path | None" = None, env: "dict | None" = None) -> dict:
    """Run a fully specified plan with `python -m bench.agent run`; return its raw result. `env` is set in
    the agent's environment, which its ranks inherit (DDPBENCH_GPU_COUNTERS, DDPBENCH_TIMELINE)."""
    out_dir = out_dir or Path(tempfile.mkdtemp(prefix="ddpbench-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    plan_path = out_dir / "plan.json"
    plan_path.write_text(json.dumps(plan))
    subprocess.run(
        [sys.executable, "-m", "bench.agent", "run", "--plan", str(plan_path), "--out", str(out_dir)],
        cwd=REPO, env={**os.environ, **(env or {}), "PYTHONPATH": str(REPO)}, stdout=sys.stderr,
    )
    return json.loads((out_dir / "raw.json").read_text())


def median(run: dict, metric: str) -> "float | None":
    found = run["metrics"].get(metric)
    return found["summary"]["median"] if found else None


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])
