"""Agent command line: `python -m bench.agent run|fingerprint`.

Progress goes to stdout as one JSON object per line, for the controller to stream; results
go to files in --out. Exit status: 0 all launches ran, 1 some failed, 2 the plan cannot run here.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from pathlib import Path

from bench.agent.fingerprint import collect
from bench.agent.runner import Nodes, PlanError, run_plan
from bench.common.concerns import health_warnings


def _emit(event: dict) -> None:
    print(json.dumps(event), flush=True)


def _terminate(signum, frame):
    raise SystemExit(128 + signum)  # unwinds through run_launch, which ends the ranks


def _stop_when_stdin_closes() -> None:
    """Over SSH, stdin closes when the connection does (controller gone, host's sshd ended):
    then nobody can read our results or end our ranks, so end them ourselves."""

    def watch() -> None:
        while os.read(sys.stdin.fileno(), 65536):  # the fd, not sys.stdin: its buffer's lock aborts the interpreter at exit
            pass
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, daemon=True, name="stdin-watch").start()


def main(argv: "list[str] | None" = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.agent", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a resolved plan (JSON) on this host")
    run.add_argument("--plan", required=True, type=Path, help="the plan as JSON, validated by the controller")
    run.add_argument("--out", required=True, type=Path, help="folder for raw.json, launch logs and results")
    run.add_argument("--env", default="{}", help="JSON object of environment overrides for the ranks")
    run.add_argument("--nnodes", type=int, default=1)
    run.add_argument("--node-rank", type=int, default=0)
    run.add_argument("--rendezvous", default="", help="HOST:PORT of the c10d rendezvous (multi-node)")
    run.add_argument("--job-id", default="ddpbench")
    run.add_argument("--skip", default="", help="comma-separated launch ids already finished (resume)")
    run.add_argument("--history", default="null", help="JSON: launch durations of an earlier run of this plan (bench/common/history.py)")
    run.add_argument("--stop-on-stdin-eof", action="store_true", help="end the run when stdin closes (the SSH connection is gone)")
    sub.add_parser("fingerprint", help="print this machine's fingerprint as JSON")
    args = parser.parse_args(argv)

    if args.command == "fingerprint":
        print(json.dumps(collect(), indent=1))
        return 0
    signal.signal(signal.SIGTERM, _terminate)
    if args.stop_on_stdin_eof:
        _stop_when_stdin_closes()
    plan = json.loads(args.plan.read_text())
    nodes = Nodes(count=args.nnodes, rank=args.node_rank, rendezvous=args.rendezvous, job_id=args.job_id)
    _emit({"event": "fingerprint"})
    fingerprint = collect()
    for line in health_warnings(fingerprint):
        _emit({"event": "warning", "message": line})
    try:
        raw = run_plan(
            plan, args.out, fingerprint, nodes=nodes, host_env=json.loads(args.env),
            done_launch_ids=frozenset(filter(None, args.skip.split(","))), progress=_emit, history=json.loads(args.history),
        )
    except PlanError as err:
        _emit({"event": "error", "message": str(err)})
        print(f"error: {err}", file=sys.stderr)
        return 2
    failed = [l for l in raw["launches"] if l["status"] not in ("ok", "skipped")]
    failed_runs = [r for r in raw["runs"] if r["status"] != "ok"]
    return 1 if failed or failed_runs else 0


if __name__ == "__main__":
    sys.exit(main())
