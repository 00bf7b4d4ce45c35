"""How long ddpbench takes over the inputs that once took minutes, now bounded; prints a table, asserts nothing.

    PYTHONPATH=$PWD python benchmarks/hostile_inputs.py [--bundle benchmarks/results/bundles/X.bundle.json]

- a report of one bundle whose runs each ran under another env: at the bound (MAX_SERIES series,
  drawn) and far past it (15,000 series, refused);
- `validate` of a gzip file of 500,000 empty members (refused past MAX_GZIP_MEMBERS).
Each command runs as a user runs it (a fresh process, imports included): wall seconds and the CPU
seconds of the process and its children. Target: every refusal within a few seconds.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.bundle import MAX_GZIP_MEMBERS, seal  # noqa: E402
from bench.report.merge import MAX_SERIES  # noqa: E402

PUBLISHED = REPO / "benchmarks" / "results" / "bundles" / "20261125T213922Z-6e20a7.bundle.json"


def with_series(bundle: dict, count: int) -> dict:
    """The bundle's first host with `count` copies of its first run (without its GPU counters and
    measured window, which older bundles lack), each under an env of its own: `count` series."""
    doc = json.loads(json.dumps({k: v for k, v in bundle.items() if k != "sha256"}))
    host = doc["hosts"][0]
    run = {key: value for key, value in host["runs"][0].items() if key not in ("gpu_counters", "measured_window")}
    host["runs"] = [{**run, "env": {"NCCL_BUFFSIZE": str(4096 + i)}} for i in range(count)]
    doc["hosts"] = [host]
    return seal(doc)


def timed(*args: str) -> tuple[float, float, int, str]:
    """(wall s, CPU s of the command and its children, exit status, its last line of stderr)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "bench", *args], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.returncode, (done.stderr.strip().splitlines() or [""])[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bundle", type=Path, default=PUBLISHED, help="a real bundle to make the inputs from")
    args = parser.parse_args()
    bundle = json.loads(args.bundle.read_text())
    rows = []
    with tempfile.TemporaryDirectory(prefix="ddpbench-hostile-") as scratch:
        folder = Path(scratch)
        for count in (MAX_SERIES, 15_000):
            path = folder / f"series-{count}.json"
            path.write_text(json.dumps(with_series(bundle, count)))
            rows.append((f"report, {count:,} series", *timed("report", str(path), "--out", str(folder / f"report-{count}"))))
        members = folder / "members.json.gz"
        members.write_bytes(gzip.compress(b"") * 500_000)
        rows.append((f"validate, 500,000 gzip members (bound {MAX_GZIP_MEMBERS})", *timed("validate", str(members))))
    print(f"{'input':<48} {'wall s':>8} {'CPU s':>8} {'exit':>5}  last line")
    for name, wall, cpu, status, line in rows:
        print(f"{name:<48} {wall:8.1f} {cpu:8.1f} {status:5d}  {line[:100]}")


if __name__ == "__main__":
    main()
