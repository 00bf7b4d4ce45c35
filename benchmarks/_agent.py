"""What the benchmark scripts share: run a plan through the agent and read its results.

Standard library only, so the scripts run on a GPU host that has nothing but torch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_plan(plan: dict, out_dir: "Path | None" = None, env: "dict | None" = None) -> dict:
    """Run a fully specified plan with `python -m bench.agent run`; return its raw result."""
    out_dir = out_dir or Path(tempfile.mkdtemp(prefix="ddpbench-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    plan_path = out_dir / "plan.json"
    plan_path.write_text(json.dumps(plan))
    subprocess.run(
        [sys.executable, "-m", "bench.agent", "run", "--plan", str(plan_path), "--out", str(out_dir),
         "--env", json.dumps(env or {})],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=sys.stderr,
    )
    return json.loads((out_dir / "raw.json").read_text())


def median(run: dict, metric: str) -> "float | None":
    found = run["metrics"].get(metric)
    return found["summary"]["median"] if found else None


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])
