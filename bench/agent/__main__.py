"""Agent command line: `python -m bench.agent run|fingerprint` (bench/common/protocol.py is its contract).

Progress goes to stdout as one JSON object per line, for the controller to stream; results
go to files in --out. Exit status: 0 all launches ran, 1 some failed, 2 the plan cannot run here.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from pathlib import Path

from bench.agent.fingerprint import begin, collect
from bench.agent.runner import run_plan
from bench.common import protocol
from bench.judging.health import health_warnings
from bench.errors import PlanError, UserError


def _emit(event: protocol.Event) -> None:
    print(event.line(), flush=True)


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
    parsed = protocol.agent_parser().parse_args(argv)
    if parsed.command == "fingerprint":
        print(json.dumps(collect(), indent=1))
        return 0
    args = protocol.parse_agent_args(parsed)
    signal.signal(signal.SIGTERM, _terminate)
    if args.stop_on_stdin_eof:
        _stop_when_stdin_closes()
    plan = json.loads(Path(args.plan).read_text())
    _emit(protocol.Fingerprinting())
    collecting = begin()  # its torch probes go on beside the planning and the first job's imports

    def fingerprinted() -> None:
        for line in health_warnings(collecting.finish()):
            _emit(protocol.Warned(line))

    try:
        raw = run_plan(
            plan, Path(args.out), collecting.fingerprint, nodes=args.placement, host_env=args.env,
            done_launch_ids=frozenset(args.skip), progress=_emit, history=args.history, dry_run=args.dry_run,
            finish_fingerprint=fingerprinted,
        )
    except (PlanError, UserError) as err:  # UserError: a suite this agent does not have
        _emit(protocol.Failed(str(err)))
        print(f"error: {err}", file=sys.stderr)
        return 2
    finally:
        collecting.stop()
    failed = [l for l in raw["launches"] if l["status"] not in ("ok", "skipped")]
    failed_runs = [r for r in raw["runs"] if r["status"] != "ok"]
    return 1 if failed or failed_runs else 0


if __name__ == "__main__":
    sys.exit(main())
