"""How long `ddpbench report` takes on 10 and on 1,000 bundles; prints a table, asserts nothing.

    PYTHONPATH=$PWD python benchmarks/report_speed.py [--bundle results/X/bundle.json] [--counts 10,1000]

The bundles are made from one real bundle (without --bundle: a real CPU run of
tests/report/plan.yaml, about 20 s): each copy gets its own host name, one of four machines
(CPU, 2x RTX 3090 NVLink, 2x RTX 4090 PCIe x4, 2x H200 NVLink), a transport preset, and every
sample jittered, then is re-sealed. The report command runs as a user runs it (a fresh process,
imports included); the phases are then timed again in this process.
Targets (on the 2-core dev machine): 1,000 bundles under 10 s, 10 under 2 s.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.report_variants import PLAN, make_variant, write  # noqa: E402

MACHINES = [  # (hardware, preset, bandwidth factor, exposed communication / compute of a multi-GPU step)
    (None, "default", 1.0, None),
    ("3090-nvlink", "default", 40.0, 0.05),
    ("4090-pcie-x4", "p2p_off", 3.0, 0.6),
    ("h200-nvlink", "default", 300.0, 0.02),
]


def real_bundle(path: "Path | None", scratch: Path) -> dict:
    if path:
        return json.loads(path.read_text())
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-m", "bench", "run", "--plan", str(PLAN), "--out", str(scratch / "run")],
                   cwd=REPO, env=env, check=True, capture_output=True)
    (found,) = (scratch / "run").glob("*/bundle.json")
    return json.loads(found.read_text())


def make_bundles(real: dict, count: int, folder: Path) -> None:
    jitter = random.Random(count)
    for i in range(count):
        hardware, preset, bandwidth, exposed = MACHINES[i % len(MACHINES)]
        doc = make_variant(real, f"host-{i:04d}", hardware=hardware, preset=preset, bandwidth=bandwidth,
                           exposed=exposed, jitter=jitter,
                           run_id=f"{real['run_id'][:-6]}{i:06x}")
        write(folder / f"{i:04d}" / "bundle.json", doc)


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(step) -> tuple[float, object]:
    begin = time.perf_counter()
    result = step()
    return time.perf_counter() - begin, result


def main() -> int:
    top = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    top.add_argument("--bundle", type=Path, help="a real bundle to vary (default: make one now)")
    top.add_argument("--counts", default="10,1000", help="how many bundles, comma-separated (default: 10,1000)")
    top.add_argument("--repeat", type=int, default=3, help="runs of the report command; the fastest is shown (default: 3)")
    args = top.parse_args()

    from bench.report import build, html, markdown
    from bench.report.inputs import expand, load
    from bench.report.merge import merge

    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        real = real_bundle(args.bundle, scratch)
        for count in [int(c) for c in args.counts.split(",")]:
            folder = scratch / f"bundles-{count}"
            make_bundles(real, count, folder)
            pattern = str(folder / "*" / "bundle.json")
            env = {**os.environ, "PYTHONPATH": str(REPO)}
            command = [sys.executable, "-m", "bench", "report", pattern, "--out", str(scratch / f"report-{count}")]
            runs = []  # (wall, CPU): the machine is shared, so the fastest run is the one least disturbed
            for _ in range(args.repeat):
                cpu_before = children_cpu_s()
                wall, done = timed(lambda: subprocess.run(command, env=env, capture_output=True, text=True))
                if done.returncode != 0:
                    print(done.stderr, file=sys.stderr)
                    return 1
                runs.append((wall, children_cpu_s() - cpu_before))
            cli_s, cli_cpu_s = min(runs)
            out = scratch / f"phases-{count}"
            out.mkdir()
            load_s, (loaded, _) = timed(lambda: load(expand([pattern], lambda line: None), False, lambda line: None))
            merge_s, comparison = timed(lambda: merge([item.bundle for item in loaded]))
            plot_s, blocks = timed(lambda: build(comparison, out, []))
            render_s, _ = timed(lambda: (markdown.render(blocks), html.render(blocks, "report")))
            plots = len(list(out.glob("*.png")))
            rows.append((count, cli_s, cli_cpu_s, load_s, merge_s, plot_s, render_s, plots))

    print(f"{'bundles':>8} {'ddpbench report':>16} {'(CPU)':>7} {'read+check':>11} {'merge+judge':>12} {'tables+plots':>13} "
          f"{'md+html':>8} {'plots':>6}")
    for count, cli_s, cli_cpu_s, load_s, merge_s, plot_s, render_s, plots in rows:
        print(f"{count:>8} {cli_s:>15.2f}s {cli_cpu_s:>6.2f}s {load_s:>10.2f}s {merge_s:>11.2f}s {plot_s:>12.2f}s "
              f"{render_s:>7.2f}s {plots:>6}")
    print(f"(python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; wall-clock "
          f"seconds, the fastest of {args.repeat} runs of the command and one of each phase; CPU = user + system seconds "
          "of the report process and its workers)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
