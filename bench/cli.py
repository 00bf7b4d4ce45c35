"""`ddpbench` / `python -m bench`: run, fingerprint, validate, report."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from bench.bundle import read_bundle
from bench.controller.hosts import load_hosts
from bench.controller.plans import load_plan, plan_names
from bench.errors import UserError
from bench.yamlfile import load_yaml

EXIT_INTERRUPTED = 130


def cmd_run(args) -> int:
    inventory = load_hosts(args.hosts)
    plan = load_plan(args.plan)
    from bench.controller.run import execute
    from bench.report import write_report

    path, bundle = execute(inventory, plan, args.out)
    report = write_report([bundle], path.parent)
    failed = [h for h in bundle["hosts"] if h["status"] != "ok"]
    for host in failed:
        print(f"error: host {host['name']}: {host['status']}: {host['error']}", file=sys.stderr)
    print(f"bundle: {path}\nreport: {report}")
    if not bundle["complete"]:
        print(f"interrupted: the bundle holds what finished and is marked incomplete", file=sys.stderr)
        return EXIT_INTERRUPTED
    return 1 if failed else 0


def cmd_fingerprint(args) -> int:
    # The agent collects it: the controller side never imports torch.
    return subprocess.call([sys.executable, "-m", "bench.agent", "fingerprint"])


def cmd_validate(args) -> int:
    from bench import schemas

    for path in args.files:
        if path.suffix == ".json":
            bundle = read_bundle(path)
            print(f"{path}: ok: bundle {bundle['run_id']}, {len(bundle['hosts'])} host(s), sha256 {bundle['sha256'][:12]}")
            continue
        document = load_yaml(path, "file")
        kind = "hosts" if isinstance(document, dict) and "hosts" in document else "plan"
        if kind == "hosts":
            load_hosts(path)
        else:
            load_plan(str(path))
        print(f"{path}: ok: {kind} file")
    return 0


def cmd_report(args) -> int:
    from bench.report import write_report
    from bench.report.inputs import expand, load

    loaded, skipped = load(expand(args.bundles), args.strict, lambda line: print(line, file=sys.stderr))
    path = write_report([item.bundle for item in loaded], args.out, skipped, args.group_by)
    print(f"report: {path} and {path.with_suffix('.html').name}, from {len(loaded)} bundle(s)")
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="ddpbench", description="Does my GPU interconnect slow my training?")
    sub = top.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a plan on the hosts of a hosts file; write a bundle and a report")
    run.add_argument("--hosts", type=Path, default=Path("hosts/local.yaml"), help="hosts file (default: hosts/local.yaml)")
    run.add_argument("--plan", default="quick", help=f"plan name ({', '.join(plan_names())}) or file (default: quick)")
    run.add_argument("--out", type=Path, default=Path("results"), help="results folder (default: results)")
    run.set_defaults(func=cmd_run)

    fingerprint = sub.add_parser("fingerprint", help="print this machine's fingerprint as JSON")
    fingerprint.set_defaults(func=cmd_fingerprint)

    validate = sub.add_parser("validate", help="check bundles (.json), hosts files and plans (.yaml)")
    validate.add_argument("files", nargs="+", type=Path)
    validate.set_defaults(func=cmd_validate)

    report = sub.add_parser("report", help="merge bundles into report.md, report.html and plots (PNG and SVG)")
    report.add_argument("bundles", nargs="+", metavar="BUNDLE", help="bundle files or glob patterns (quoted globs are expanded here)")
    report.add_argument("--out", type=Path, required=True, help="folder for report.md, report.html and the plots")
    report.add_argument("--strict", action="store_true", help="stop (exit 2) at the first bundle that fails validation instead of skipping it")
    report.add_argument("--group-by", choices=["auto", "host", "hardware"], default="auto",
                        help="one series per host, or per GPUs and link with samples pooled (auto: per host up to 12 series)")
    report.set_defaults(func=cmd_report)
    return top


def main(argv: "list[str] | None" = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return err.exit_status
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
