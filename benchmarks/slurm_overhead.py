"""The controller's overhead per Slurm job: a trivial plan through runtime slurm on the test cluster.

    python benchmarks/slurm_overhead.py [--repeats 3] [--plan tests/plans/ssh-tiny.yaml] [--poll-s 0.5]

Starts the tests' Slurm cluster (tests/support/slurm_cluster.py: munged, slurmctld, two slurmd on this
machine) and a loopback sshd as its login node, runs `python -m bench run` with runtime slurm
on 1 and on 2 nodes, and prints, as medians over the repeats:

  wall_s      the whole invocation, as the user waits for it
  queued_s    submission to start, as the controller polled it (scheduler_job.queued_s)
  job_s       the job's own run time, Slurm's EndTime - StartTime (whole seconds)
  overhead_s  wall_s - job_s: SSH, the sbatch --test-only check, copying, submission, the
              queue wait, polling, fetching, clean-up, the bundle and the report
  agent_s     node 0's agent from its first launch's start to its end (inside job_s), for scale

The queue wait of the test cluster is Slurm's scheduling interval (sched_interval=1) plus the
controller's poll interval: a real cluster's queue adds its own.
"""

from __future__ import annotations

import argparse
import datetime
import getpass
import json
import os
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
    from tests.support.slurm_cluster import SlurmCluster  # noqa: E402


def seconds(stamp: str) -> float:
    return datetime.datetime.fromisoformat(stamp.rstrip("Z")).timestamp()


def one_invocation(cluster: SlurmCluster, hosts_path: Path, plan: Path, out: Path) -> dict:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "bench", "run", "--hosts", str(hosts_path), "--plan", str(plan), "--out", str(out)],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"the run failed:\n{done.stderr}")
    bundle_path = Path(next(l for l in done.stdout.splitlines() if l.startswith("bundle: ")).split(": ", 1)[1])
    entry = read_bundle(bundle_path)["hosts"][0]
    job = cluster.scontrol_job(entry["scheduler_job"]["job_id"])
    job_s = seconds(job["EndTime"]) - seconds(job["StartTime"])
    raw = json.loads((bundle_path.parent / "hosts" / entry["name"] / "raw.json").read_text())
    return {"wall_s": wall, "queued_s": entry["scheduler_job"]["queued_s"], "job_s": job_s, "overhead_s": wall - job_s,
            "agent_s": seconds(raw["finished_at"]) - seconds(raw["started_at"])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--plan", type=Path, default=REPO / "tests" / "plans" / "ssh-tiny.yaml")
    parser.add_argument("--poll-s", type=float, default=0.5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="slurm-overhead-") as tmp:
        folder = Path(tmp)
        cluster = SlurmCluster(folder / "cluster").start()
        login = LoopbackHosts(folder / "login", count=1, first_octet=40, extra_config=f"SetEnv SLURM_CONF={cluster.conf}\n").start()
        try:
            print(f"plan {args.plan.name}, poll_s {args.poll_s:g}, median of {args.repeats}")
            print(f"{'nodes':>5} {'wall_s':>8} {'queued_s':>8} {'job_s':>7} {'overhead_s':>10} {'agent_s':>8}")
            for nodes in (1, 2):
                host = login.hosts[0]
                hosts_path = folder / f"hosts-{nodes}.yaml"
                hosts_path.write_text(yaml.safe_dump({"hosts": [{
                    "name": "cluster", "runtime": "slurm", "address": host.address, "port": host.port, "user": getpass.getuser(),
                    "identity_file": str(login.user_key), "known_hosts_file": str(login.known_hosts), "python": sys.executable,
                    "workdir": str(folder / "shared"), "socket_ifname": "lo",
                    "slurm": {"partition": "debug", "account": "physics", "nodes": nodes, "poll_s": args.poll_s},
                }]}))
                rows = [one_invocation(cluster, hosts_path, args.plan, folder / "results") for _ in range(args.repeats)]
                median = {key: statistics.median(row[key] for row in rows) for key in rows[0]}
                print(f"{nodes:>5} {median['wall_s']:>8.1f} {median['queued_s']:>8.1f} {median['job_s']:>7.0f} "
                      f"{median['overhead_s']:>10.1f} {median['agent_s']:>8.1f}")
        finally:
            login.stop()
            cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
