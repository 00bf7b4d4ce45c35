"""`ddpbench` / `python -m bench`: run, fingerprint, validate, report, predict, verify, compare, sign, suites, import, export."""

from __future__ import annotations

import argparse
import difflib
import gc
import json
import math
import re
import shlex
import subprocess
import sys
from pathlib import Path

from bench import suites
from bench.bundle import read_bundle
from bench.common import launch_time
from bench.common.escape import terminal
from bench.common.run import Run
from bench.controller.hosts import load_hosts
from bench.controller import stop_signals
from bench.controller.plans import load_plan, plan_names, smoke
from bench.docker.cli import add_image_commands
from bench.errors import UserError
from bench.judging import shared_machine
from bench.outputs import disk_problem, prepare_folder
from bench.yamlfile import load_yaml

def cmd_run(args) -> int:
    stop_signals.install()
    _check_max_hours(args.max_hours)
    inventory = load_hosts(args.hosts)
    from bench.controller.pricing import hold
    from bench.controller.run import execute, nothing_measured, priced
    from bench.controller.resume import load_previous
    from bench.judging.summary import summary_lines

    previous = None
    if args.resume:
        for given, flag in ((args.plan, f"--plan {args.plan}"), (args.smoke, "--smoke"), (args.dry_run, "--dry-run")):
            if given:
                raise UserError(f"--resume {args.resume} runs the plan of that run as it ran; leave out {flag}")
        previous = load_previous(args.resume)
        plan = previous.plan
        for line in previous.left_out:
            print(terminal(f"warning: --resume {args.resume}: {line}"), file=sys.stderr)
    else:
        plan = load_plan(args.plan or "quick")
        if args.smoke:
            plan = smoke(plan)
    if args.dry_run:
        return _dry_run(inventory, plan, args.out)

    def within_bound() -> None:
        cost = priced(inventory, plan, previous)
        for line in [f"run: {cost.text}", *(f"run: {line}" for line in cost.not_priced())]:
            print(terminal(line), flush=True)
        hold("run", cost, args.max_hours, args.yes, _ask if sys.stdin.isatty() else None)

    said = len(previous.left_out) if previous else 0
    path, bundle = execute(inventory, plan, args.out, previous, smoke=previous.smoke if previous else args.smoke,
                           approve=within_bound)
    for line in previous.left_out[said:] if previous else ():  # from the results a lost host kept, collected since
        print(terminal(f"warning: --resume {args.resume}: {line}"), file=sys.stderr)
    print(terminal(f"bundle: {path}"), flush=True)  # said before the report, which a full disk may stop
    report = _run_report(bundle, path)
    failed = [h for h in bundle["hosts"] if h["status"] != "ok"]
    for host in bundle["hosts"]:
        for mismatch in host.get("pin_mismatches", []):
            print(terminal(f"warning: host {host['name']}: {mismatch}"), file=sys.stderr)
        for run in map(Run, host["runs"]):
            for warning in run.warnings:
                print(terminal(f"warning: host {host['name']}: {run.launch_id}: {warning['code']}: {warning['message']} "
                               f"(likely: {warning['likely_cause']})"), file=sys.stderr)
    for line in shared_machine.warnings(bundle["hosts"]) + shared_machine.busy_warnings(bundle["hosts"]):
        print(terminal(f"warning: {line}"), file=sys.stderr)
    for line in summary_lines(bundle) + launch_time.summary_lines(bundle):
        print(terminal(line), file=sys.stderr)
    if bundle.get("smoke"):
        print(terminal("smoke run: every configuration ran once at its least work; its figures are not measurements"), file=sys.stderr)
    for host in failed:
        print(terminal(f"error: host {host['name']}: {host['status']}: {host['error']}"), file=sys.stderr)
    empty = nothing_measured(bundle)
    if empty:
        print(terminal(f"error: {empty}"), file=sys.stderr)
    if report:
        print(terminal(f"report: {report}"))
    if not bundle["complete"]:
        print(terminal(f"{stop_signals.reason()}: the bundle holds what finished and is marked incomplete; run the rest into "
                       f"the same folder with: {resume_command(args.hosts, path.parent)}"), file=sys.stderr)
        return stop_signals.exit_status()
    return 1 if failed or empty or report is None else 0


def _dry_run(inventory, plan: dict, out: Path) -> int:
    """`run --dry-run`: every host's agent plans, checks and prices the plan; its launches and their
    estimates are printed, a line each. Nothing is launched and nothing is written."""
    from bench.controller.run import dry_run

    hosts = dry_run(inventory, plan, out)
    for name, (_, listing) in hosts.items():
        for line in listing[:1]:
            print(terminal(f"host {name}: {line}"))
        for line in listing[1:]:
            print(terminal(line))
    failed = {name: error for name, (error, _) in hosts.items() if error}
    for name, error in failed.items():
        print(terminal(f"error: host {name}: {error}"), file=sys.stderr)
    hosts = len(inventory.hosts)
    print(terminal(f"dry run: the plan {'fails on ' + str(len(failed)) + ' of' if failed else 'checks on'} "
                   f"{hosts} host{'s' * (hosts > 1)}; nothing was launched"))
    return 1 if failed else 0


def _run_report(bundle: dict, path: Path) -> "Path | None":
    """The run's report beside its bundle; where the report fails on it (a bug of ours), one line
    and None: the bundle is written, and the rest of the run's output still follows."""
    from bench.report import write_report

    try:
        return write_report([bundle], path.parent)
    except (UserError, OSError):
        raise
    except Exception as err:
        print(terminal(f"error: the report fails on this bundle ({err!r:.300}), a bug of ddpbench: please report it; "
                       f"the bundle is kept: {path}"), file=sys.stderr)
        return None


def resume_command(hosts: Path, run_dir: Path) -> str:
    """The command that finishes a stopped run, as this Python runs the tool."""
    return f"{shlex.quote(sys.executable)} -m bench run --hosts {shlex.quote(str(hosts))} --resume {shlex.quote(str(run_dir))}"


def cmd_fingerprint(args) -> int:
    # The agent collects it: the controller side never imports torch.
    return subprocess.call([sys.executable, "-m", "bench.agent", "fingerprint"])


def cmd_validate(args) -> int:
    """Every file checked, one line each (`ok` or its `error:`); exit 2 where any failed."""
    failed = 0
    for path in args.files:
        try:
            print(terminal(_validated(path, args.allowed_signers)), flush=True)  # in order with the error lines of stderr
        except UserError as err:
            print(terminal(f"error: {err}"), file=sys.stderr)
            failed += 1
    return UserError.exit_status if failed else 0


def _validated(path: Path, allowed_signers: "Path | None") -> str:
    """What `validate` says of an in-toto Statement, bundle, hosts file, plan file or shipped plan's name that passes."""
    from bench.formats import intoto
    from bench.verify.signing import check_signature

    if intoto.is_statement(path):
        statement = intoto.read(path)
        signed = check_signature(path, allowed_signers, False).describe()
        return (f"{path}: ok: in-toto Statement, {statement.get('predicate', {}).get('result', 'no result')} of "
                f"{', '.join(subject.get('name', '?') for subject in statement['subject'])}; {signed}")
    if path.name.endswith((".json", ".json.gz")):
        bundle = read_bundle(path)
        return f"{path}: ok: bundle {bundle['run_id']}, {len(bundle['hosts'])} host(s), sha256 {bundle['sha256'][:12]}"
    if not path.exists() and str(path) in plan_names():  # the name `run --plan` takes
        load_plan(str(path))
        return f"{path}: ok: shipped plan"
    kind = _yaml_kind(path, load_yaml(path, "plan or hosts file"))
    if kind == "hosts":
        load_hosts(path)
    else:
        load_plan(str(path))
    return f"{path}: ok: {kind} file"


HOSTS_KEYS = {"hosts", "defaults", "groups"}  # top-level keys of schema/hosts.schema.json; a plan has none of them


def _yaml_kind(path: Path, document) -> str:
    """"hosts" or "plan", by the file's top-level keys; a file that is neither is named so."""
    keys = set(document) if isinstance(document, dict) else set()
    if keys & HOSTS_KEYS:
        return "hosts"
    if keys & {"name", "suites"}:
        return "plan"
    guesses = [f"{match[0]!r} for {key!r}" for key in sorted(map(str, keys))
               for match in [difflib.get_close_matches(key, [*HOSTS_KEYS, "suites"], n=1, cutoff=0.75)] if match]
    found = (f"its keys: {', '.join(sorted(map(str, keys)))}" if keys else "it holds no mapping") + (
        f" (did you mean {', '.join(guesses)}?)" if guesses else "")
    raise UserError(f"{path}: neither a plan (it has no suites:) nor a hosts file (no hosts:); {found}; "
                    "see schema/plan.schema.json and schema/hosts.schema.json")


def cmd_report(args) -> int:
    # matplotlib's import makes some 70,000 objects that live until exit: collecting them as they
    # come is a tenth of the import time.
    gc.disable()
    from bench.report import write_report
    from bench.report.inputs import expand, load, write_without_failing

    gc.enable()

    def warn(line: str) -> None:
        print(terminal(line), file=sys.stderr)

    loaded, skipped = load(expand(args.bundles, warn), args.strict, warn)
    path, count = write_without_failing(
        loaded, args.out, lambda bundles, noted, out: write_report(bundles, out, noted, args.group_by), skipped, args.strict, warn)
    print(terminal(f"report: {path} and {path.with_suffix('.html').name}, from {count} bundle(s)"))
    gc.freeze()  # the process ends here: the collection at exit then skips all of the above (a tenth of a second)
    return 0


# verify/compare: one exit status per outcome (docs/verify.md).
EXIT_OF_OUTCOME = {"passed": 0, "same bundle": 0, "failed": 1, "inconclusive": 3, "not comparable": 4, "incomplete": 5}
MAX_HOURS = 2.0  # run and verify: a plan priced past it waits for a yes


def _finish_verdict(outcome: str, text: str, paths, args, original: Path, new: Path) -> int:
    print(terminal(text))
    print(terminal(f"verdict: {paths[0]} and {paths[1].name}"))
    _verdict_exports(args, paths[1], original, new)
    return EXIT_OF_OUTCOME[outcome]


def _verdict_exports(args, verdict_path: Path, original: Path, new: Path) -> None:
    """--junit and --in-toto: the verdict just written, as JUnit XML and as an in-toto Statement."""
    from bench.common.files import write_text
    from bench.formats import intoto, junit

    verdict = json.loads(verdict_path.read_text())
    if args.junit:
        write_text(args.junit, junit.text(verdict))
        print(terminal(f"junit: {args.junit}"))
    if args.in_toto:
        write_text(args.in_toto, intoto.text(intoto.statement(verdict, verdict_path, original, new)))
        print(terminal(f"in-toto: {args.in_toto} (sign it: ddpbench sign {args.in_toto} --key KEY)"))


def _ask(question: str) -> bool:
    """A yes from the reader at the terminal."""
    try:
        return input(terminal(question)).strip().lower() in ("y", "yes")
    except EOFError:
        return False


def cmd_verify(args) -> int:
    from bench.verify.compare import parse_host_map, parse_tolerances
    from bench.verify.rerun import verify

    stop_signals.install()
    _check_max_hours(args.max_hours)
    done = verify(
        args.bundle, args.hosts, args.out, image=args.image, tolerances=parse_tolerances(args.tolerance),
        host_map=parse_host_map(args.host_map), allowed_signers=args.allowed_signers,
        require_signature=args.require_signature, max_hours=args.max_hours, assume_yes=args.yes,
        key=args.key.expanduser() if args.key else None,
        ask=_ask if sys.stdin.isatty() else None,
    )
    if done.bundle_path is None:  # nothing could be compared: nothing ran, nothing was written
        print(terminal(done.text))
        return EXIT_OF_OUTCOME[done.outcome]
    print(terminal(f"bundle: {done.bundle_path}"))
    status = _finish_verdict(done.outcome, done.text, done.verdict_paths, args, args.bundle, done.bundle_path)
    if not done.bundle["complete"]:
        print(terminal(f"{stop_signals.reason()}: the new bundle holds what finished, and the verdict judges only that; "
                       "verify again to judge the rest"), file=sys.stderr)
        return stop_signals.exit_status()
    return status


def cmd_compare(args) -> int:
    from bench.verify import compare_files
    from bench.verify.compare import parse_host_map, parse_tolerances

    outcome, text, paths = compare_files(
        args.original, args.new, tolerances=parse_tolerances(args.tolerance), host_map=parse_host_map(args.host_map),
        allowed_signers=args.allowed_signers, require_signature=args.require_signature, out_dir=args.out,
    )
    return _finish_verdict(outcome, text, paths, args, args.original, args.new)


def cmd_predict(args) -> int:
    from bench.report.inputs import expand, load
    from bench.report.markdown import render

    predictors = {name: part.predict for name, suite in suites.registry().items()
                  if (part := suite.report_section()) is not None and hasattr(part, "predict")}

    def warn(line: str) -> None:
        print(terminal(line), file=sys.stderr)

    loaded, _ = load(expand(args.bundles, warn), False, warn)
    bundles = [item.bundle for item in loaded]
    blocks = [block for predict in predictors.values()
              for block in predict(bundles, args.link or None, args.gpus, args.gpus_per_node, args.algorithm, args.scaling)]
    if not blocks:
        names = _either(list(predictors))
        raise UserError(f"no {names} runs in {', '.join(args.bundles)}; predict reads bundles that ran the {names} suite (e.g. PLAN=quick)")
    print(terminal(render(blocks)))
    return 0


def _either(names: list, word: str = "or") -> str:
    """'a', 'a or b', 'a, b or c'."""
    return f"{', '.join(names[:-1])} {word} {names[-1]}" if len(names) > 1 else "".join(names)


def _compared_metrics() -> str:
    """'busbw_gbps for collectives, ...': the metric verify and compare judge each suite's runs by."""
    judged: dict = {}
    for name, suite in suites.registry().items():
        judged.setdefault(suite.headline_metric, []).append(name)
    return ", ".join(f"{metric} for {_either(names, 'and')}" for metric, names in judged.items())


LISTED_COLUMN_WIDTH = 32  # `ddpbench suites`: a cell past it does not widen its column


def cmd_suites(args) -> int:
    listed = [_listing(name, suite) for name, suite in suites.registry().items()]
    if args.json:
        print(terminal(json.dumps(listed, indent=2)))
        return 0
    for suite in listed:
        rows = [[p["name"], p["type"], "required" if p["required"] else _default_text(p),
                 p["description"]] for p in suite["params"]]
        # a long list of choices (the model presets) stands out of its column rather than widen it for every row
        widths = [max([len(row[column]) for row in rows if len(row[column]) <= LISTED_COLUMN_WIDTH], default=0) for column in range(3)]
        print(terminal(f"{suite['name']}: {suite['description']}"))
        for row in rows:
            print(terminal(("  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[3]).rstrip()))
    return 0


def _listing(name: str, suite) -> dict:
    """A suite as `ddpbench suites` lists it: its line and its parameters (name, type, default, a line), from its schema."""
    params = [{"name": key, "type": _type_of(spec), **({"default": spec["default"]} if "default" in spec else {}),
               "required": key in suite.required_params, "description": _first_sentence(spec.get("description", ""))}
              for key, spec in suite.schema["$defs"]["params"]["properties"].items()]
    return {"name": name, "description": suite.description, "params": params}


def _default_text(param: dict) -> str:
    """As a plan would write it: a text plain, anything else as JSON; `-` where there is none (absent is a value)."""
    if "default" not in param:
        return "-"
    return param["default"] if isinstance(param["default"], str) else json.dumps(param["default"])


def _first_sentence(text: str) -> str:
    return re.split(r"(?<=[^.]\.)\s", text, maxsplit=1)[0].rstrip(".")


def _type_of(spec: dict) -> str:
    """`integer`, `number or null`, `fp32|bf16`, `list of float32|bfloat16`."""
    if "enum" in spec:
        return "|".join(value if isinstance(value, str) else json.dumps(value) for value in spec["enum"])
    if spec.get("type") == "array":
        return f"list of {_type_of(spec.get('items', {}))}"
    kinds = spec.get("type", "any")
    return " or ".join(kinds) if isinstance(kinds, list) else kinds


def cmd_sign(args) -> int:
    from bench.verify.signing import sign

    print(terminal(f"signature: {sign(args.bundle, args.key.expanduser())}"))
    return 0


def cmd_import(args) -> int:
    from bench.formats.imported import import_file

    fingerprint = _fingerprint_here() if args.fingerprint else None
    path, bundle = import_file(args.result, args.out, fingerprint, args.nccl_log)
    runs = bundle["hosts"][0]["runs"]
    print(terminal(f"bundle: {path} (kind imported: {len(runs)} run(s) of {bundle['imported']['format']})"))
    for lack in bundle["imported"]["lacks"]:
        print(terminal(f"lacks: {lack}"), file=sys.stderr)
    return 0


def _fingerprint_here() -> dict:
    """This machine's fingerprint, which the agent takes (the controller side never imports torch)."""
    from bench.schemas import validate

    done = subprocess.run([sys.executable, "-m", "bench.agent", "fingerprint"], capture_output=True, text=True)
    try:
        fingerprint = json.loads(done.stdout) if done.returncode == 0 else None
    except ValueError:
        fingerprint = None
    if fingerprint is None:
        raise UserError(f"--fingerprint: the agent could not fingerprint this machine ({done.stderr.strip()[-300:] or 'no output'}); "
                        "run `ddpbench fingerprint` to see why, or import without --fingerprint")
    validate("fingerprint", fingerprint, "--fingerprint", "the agent's fingerprint does not follow its schema: a bug of ddpbench")
    return fingerprint


EXPORT_FORMATS = ("nccl-tests", "bmf", "prometheus")


def cmd_export(args) -> int:
    from bench.common.files import write_text
    from bench.formats import bmf, nccl_tests, prometheus

    bundle = read_bundle(args.bundle)
    if args.format == "nccl-tests":
        found = nccl_tests.files(bundle)
        if not found:
            raise UserError(f"{args.bundle}: no run times a collective nccl-tests has a program for "
                            f"({', '.join(nccl_tests.PROGRAMS)}); export a bundle of the collectives sweep (e.g. PLAN=quick)")
        out = prepare_folder(args.out or Path("export"), "exported nccl-tests files")
        for name, document in found.items():
            write_text(out / name, nccl_tests.dumps(document) + "\n")
            print(terminal(f"nccl-tests: {out / name}"))
        return 0
    text = (bmf if args.format == "bmf" else prometheus).text(bundle)
    if args.out:
        write_text(args.out, text)
        print(terminal(f"{args.format}: {args.out}"))
    else:
        print(terminal(text), end="")
    return 0


def _verdict_options(command: argparse.ArgumentParser) -> None:
    command.add_argument("--tolerance", action="append", default=[], metavar="[METRIC=]FRACTION",
                         help="reproduced when the ratio of medians is within a factor 1+FRACTION either way "
                              f"(default 0.05; {_compared_metrics()}); repeatable")
    command.add_argument("--host-map", action="append", default=[], metavar="ORIGINAL=NEW",
                         help="pair an original host with one of yours (default: by name, else by order); repeatable")
    command.add_argument("--allowed-signers", type=Path, help="ssh-keygen allowed signers file: the keys you trust")
    command.add_argument("--require-signature", action="store_true",
                         help="refuse an original bundle that is unsigned or not signed by an allowed signer")
    command.add_argument("--junit", type=Path, metavar="FILE", help="also write the verdict as JUnit XML, a testcase per run")
    command.add_argument("--in-toto", type=Path, metavar="NAME.intoto.json",
                         help="also write the verdict as an in-toto Statement (Test Result predicate) that `sign` signs")


def _check_max_hours(max_hours: float) -> None:
    if not 0 < max_hours < math.inf:
        raise UserError(f"--max-hours {max_hours:g}: give a positive number of hours, e.g. --max-hours 4")


def _bound_options(command: argparse.ArgumentParser, what: str) -> None:
    command.add_argument("--max-hours", type=float, default=MAX_HOURS,
                         help=f"refuse {what} the cost model prices past this many hours on these hosts unless --yes or a "
                              f"yes at the prompt (default {MAX_HOURS:g})")
    command.add_argument("--yes", action="store_true", help=f"run {what} priced past --max-hours without asking")


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="ddpbench", description="Does my GPU interconnect slow my training?")
    sub = top.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a plan on the hosts of a hosts file; write a bundle and a report")
    run.add_argument("--hosts", type=Path, default=Path("hosts/local.yaml"), help="hosts file (default: hosts/local.yaml)")
    run.add_argument("--plan", help=f"plan name ({', '.join(plan_names())}) or file (default: quick)")
    run.add_argument("--out", type=Path, default=Path("results"), help="results folder (default: results)")
    run.add_argument("--resume", type=Path, metavar="RUN_DIR",
                     help="a run folder (results/<run-id>) to finish: skip the launches that finished, merge old and new runs")
    run.add_argument("--dry-run", action="store_true",
                     help="plan and check every launch on the hosts, print the launches and the estimate; launch nothing")
    run.add_argument("--smoke", action="store_true",
                     help="every configuration once at its least work, no precision target: does the plan run? (its figures are no measurements)")
    _bound_options(run, "a plan")
    run.set_defaults(func=cmd_run)

    fingerprint = sub.add_parser("fingerprint", help="print this machine's fingerprint as JSON")
    fingerprint.set_defaults(func=cmd_fingerprint)

    validate = sub.add_parser("validate", help="check bundles (.json, .json.gz), in-toto Statements, hosts files and plans "
                                               "(.yaml, or a shipped plan's name)")
    validate.add_argument("files", nargs="+", type=Path, metavar="FILE",
                          help="a bundle, Statement, hosts file, plan file or shipped plan name; each is checked, a line each")
    validate.add_argument("--allowed-signers", type=Path, help="an in-toto Statement's signature (FILE.sig) must be of a key this file lists")
    validate.set_defaults(func=cmd_validate)

    report = sub.add_parser("report", help="merge bundles into report.md, report.html and plots (PNG and SVG)")
    report.add_argument("bundles", nargs="+", metavar="BUNDLE", help="bundle files or glob patterns (quoted globs are expanded here)")
    report.add_argument("--out", type=Path, default=Path("report"), help="folder for report.md, report.html and the plots (default: report)")
    report.add_argument("--strict", action="store_true", help="stop (exit 2) at the first bundle that fails validation instead of skipping it")
    report.add_argument("--group-by", choices=["auto", "host", "hardware"], default="auto",
                        help="one series per host, or per GPUs and link with samples pooled (auto: per host up to 12 series)")
    report.set_defaults(func=cmd_report)

    verify = sub.add_parser("verify", help="rerun a bundle's plan on your hosts and judge the numbers run by run")
    verify.add_argument("bundle", type=Path, help="the published bundle.json (its signature, if any, is BUNDLE.sig)")
    verify.add_argument("--hosts", type=Path, default=Path("hosts/local.yaml"), help="hosts file (default: hosts/local.yaml)")
    verify.add_argument("--out", type=Path, default=Path("results"), help="results folder; the new bundle goes to OUT/<run id>/ (default: results)")
    verify.add_argument("--image", help="run this image instead of the bundle's (recorded as a deviation)")
    _bound_options(verify, "a rerun")
    verify.add_argument("--key", type=Path, help="sign the new bundle with this SSH private key (as `sign` does); its "
                        "signature is then checked against --allowed-signers like the original's")
    _verdict_options(verify)
    verify.set_defaults(func=cmd_verify)

    compare = sub.add_parser("compare", help="judge bundle NEW against bundle ORIGINAL run by run, without rerunning")
    compare.add_argument("original", type=Path, metavar="ORIGINAL", help="the bundle judged against: a published one, or your earlier run")
    compare.add_argument("new", type=Path, metavar="NEW", help="the bundle judged: a rerun of ORIGINAL's plan")
    compare.add_argument("--out", type=Path, default=Path("results"),
                         help="folder for verdict.md and verdict.json (default: results); never the bundles' own folders, which compare only reads")
    _verdict_options(compare)
    compare.set_defaults(func=cmd_compare)

    predict = sub.add_parser("predict", help="a bundle's training step, scaling and samples/s predicted on other links (what link do I need?)")
    predict.add_argument("bundles", nargs="+", metavar="BUNDLE", help="bundle files or glob patterns")
    predict.add_argument("--link", action="append", metavar="NAME",
                         help="a link of the link table (bench/common/reference.py), your own as GBPS,LATENCY_US, or "
                              "INTRA+NETWORK for several nodes (e.g. nvlink4+ib-hdr); repeatable (default: the report's set)")
    predict.add_argument("--gpus", type=int, help="GPUs to predict for (default: the world sizes the bundle ran, else 2)")
    predict.add_argument("--scaling", choices=["weak", "strong"], default="weak",
                         help="weak: each GPU keeps the bundle's micro-batch and accumulation, the global batch grows with "
                              "the GPUs (default); strong: the bundle's global batches, split over the GPUs where they divide")
    predict.add_argument("--gpus-per-node", type=int, help="GPUs per node for INTRA+NETWORK links (default 1)")
    predict.add_argument("--algorithm", choices=["ring", "tree"],
                         help="NCCL's all-reduce algorithm on the links named (default: the faster for each bucket, as NCCL picks)")
    predict.set_defaults(func=cmd_predict)

    sign = sub.add_parser("sign", help="sign a bundle or an in-toto Statement with your SSH key (writes FILE.sig)")
    sign.add_argument("bundle", type=Path, help="the bundle.json or Statement to sign")
    sign.add_argument("--key", type=Path, required=True, help="your private SSH key, e.g. ~/.ssh/id_ed25519")
    sign.set_defaults(func=cmd_sign)

    imported = sub.add_parser("import", help="make a bundle of an nccl-tests (-J) or rccl-tests JSON result, for report and compare")
    imported.add_argument("result", type=Path, metavar="RESULT.json",
                          help="the result file: nccl-tests' -J output (file versions 2 and 3) or an rccl-tests JSON list")
    imported.add_argument("--out", type=Path, default=Path("results"), help="results folder; the bundle goes to OUT/<run id>/ (default: results)")
    imported.add_argument("--fingerprint", action="store_true",
                          help="take this machine's fingerprint into the bundle: only on the machine that ran the file")
    imported.add_argument("--nccl-log", type=Path, metavar="LOG",
                          help="the same run's output with NCCL_DEBUG=INFO, whose lines say which transport NCCL used")
    imported.set_defaults(func=cmd_import)

    export = sub.add_parser("export", help="a bundle's figures as nccl-tests JSON, Bencher BMF or Prometheus text")
    export.add_argument("bundle", type=Path, help="the bundle.json whose figures to write out")
    export.add_argument("--format", choices=EXPORT_FORMATS, required=True, help="the format to write: %(choices)s")
    export.add_argument("--out", type=Path, help="a file (bmf, prometheus; default: standard output) or a folder (nccl-tests; default: export)")
    export.set_defaults(func=cmd_export)

    listing = sub.add_parser("suites", help="list the suites (those on DDPBENCH_SUITES_PATH too), each with its parameters")
    listing.add_argument("--json", action="store_true", help="as JSON: each suite's name, description and parameters")
    listing.set_defaults(func=cmd_suites)
    add_image_commands(sub)
    return top


def main(argv: "list[str] | None" = None) -> int:
    try:  # the parser reads the suites (a suite folder of the user's may be broken: one line)
        args = parser().parse_args(argv)
        return args.func(args)
    except UserError as err:
        print(terminal(f"error: {err}"), file=sys.stderr)
        return err.exit_status
    except KeyboardInterrupt:
        print(terminal(stop_signals.reason()), file=sys.stderr)
        return stop_signals.exit_status()
    except OSError as err:
        problem = disk_problem(err)
        if problem is None:
            raise
        print(terminal(f"error: {problem}"), file=sys.stderr)
        return UserError.exit_status
