"""The controller's own overhead over SSH: 1, 2 and 4 loopback hosts running the same small plan.

    python benchmarks/controller_overhead.py [--repeats 3] [--plan tests/plans/ssh-tiny.yaml]

Starts real sshd hosts on 127.0.0.2.. (tests/support/loopback_hosts.py), runs `python -m bench run`
against the first N of them (runtime native, this machine's Python) and prints, as medians
over the repeats:

  wall_s         the whole invocation, as the user waits for it
  suites_s       the longest host's time inside its launches (torchrun jobs), from the bundle
  overhead_s     wall_s - suites_s: SSH, checks, copying, the agent's start and fingerprint,
                 fetching, clean-up, the bundle and the report
  controller_cpu_s  CPU time of the controller process itself
  start_skew_s   between the first and the last host's agent starting: the fan-out is
                 parallel when this stays small as N grows
  wall / 1 host  wall_s against the one-host run over SSH

The first row runs the same plan with runtime local (no SSH) as the floor: the agent's own
start, fingerprint and exit are in its overhead_s too.

On a machine with few cores the hosts share its CPU with each other (each one starts Python,
imports torch and runs ranks), so wall_s grows with N for reasons that are not the
controller's; controller_cpu_s and overhead_s are the controller's part.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks._venv import imports_of_the_venv  # noqa: E402

with imports_of_the_venv():
    from bench.bundle import read_bundle  # noqa: E402
    from tests.support.loopback_hosts import LoopbackHosts  # noqa: E402


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one_invocation(hosts_path: Path, plan: Path, out: Path) -> dict:
    cpu_before, started = children_cpu_s(), time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "bench", "run", "--hosts", str(hosts_path), "--plan", str(plan), "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    agent_started = {}  # host -> when its agent's first event arrived
    for line in process.stderr:
        host, _, event = line.strip().partition("] ")
        if event == "fingerprint":
            agent_started[host] = time.monotonic()
    stdout = process.stdout.read()
    wall = time.monotonic() - started
    if process.wait() != 0:
        raise SystemExit(f"the run failed:\n{stdout}")
    bundle_line = next(l for l in stdout.splitlines() if l.startswith("bundle: "))
    bundle = read_bundle(Path(bundle_line.split(": ", 1)[1]))
    suites = max(sum(l["duration_s"] for l in h["launches"]) for h in bundle["hosts"])
    return {"wall_s": wall, "suites_s": suites, "overhead_s": wall - suites, "controller_cpu_s": children_cpu_s() - cpu_before,
            "start_skew_s": max(agent_started.values()) - min(agent_started.values())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--plan", type=Path, default=REPO / "tests" / "plans" / "ssh-tiny.yaml")
    parser.add_argument("--counts", default="1,2,4")
    args = parser.parse_args()
    counts = [int(c) for c in args.counts.split(",")]
    with tempfile.TemporaryDirectory(prefix="ddpbench-overhead-") as tmp:
        root = Path(tmp)
        with LoopbackHosts(root / "sshd", max(counts)).start() as cluster:
            document = cluster.hosts_document(sys.executable, root / "work")
            hosts_files = {"local": root / "hosts-local.yaml"}
            hosts_files["local"].write_text(yaml.safe_dump({"hosts": [{"name": "local", "runtime": "local"}]}))
            for count in counts:
                hosts_files[count] = root / f"hosts-{count}.yaml"
                hosts_files[count].write_text(yaml.safe_dump({**document, "hosts": document["hosts"][:count]}))
            rows = {}
            for repeat in range(args.repeats):
                for key, hosts_path in hosts_files.items():  # interleaved: a busy minute on a shared machine hits every row
                    rows.setdefault(key, []).append(one_invocation(hosts_path, args.plan, root / "results"))
    print(f"plan {args.plan.name}, {args.repeats} repeats, medians; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print(f"{'hosts':>14} {'wall_s':>8} {'suites_s':>9} {'overhead_s':>11} {'controller_cpu_s':>17} {'start_skew_s':>13} {'wall / 1 host':>14}")
    base = statistics.median(r["wall_s"] for r in rows[counts[0]])
    for key, label in [("local", "local (no SSH)"), *((c, f"{c} over SSH") for c in counts)]:
        med = {name: statistics.median(r[name] for r in rows[key]) for name in rows[key][0]}
        print(f"{label:>14} {med['wall_s']:>8.2f} {med['suites_s']:>9.2f} {med['overhead_s']:>11.2f} "
              f"{med['controller_cpu_s']:>17.2f} {med['start_skew_s']:>13.2f} {med['wall_s'] / base:>14.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
