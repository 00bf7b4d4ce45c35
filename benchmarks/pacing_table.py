"""Is each shipped training entry GPU-bound? Every training entry of the shipped plans, at 1 GPU, in one
plan run by ddpbench itself, then a table of what paced each step.

    python3 benchmarks/pacing_table.py plan --out /tmp/pacing.yaml [--plans scaling quick] [--also FILE]
    python3 -m bench run --hosts hosts/local.yaml --plan /tmp/pacing.yaml --out OUT [--resume]
    python3 benchmarks/pacing_table.py table OUT/*/bundle.json

`plan` writes one plan: each training entry of the named shipped plans (all by default) at 1 GPU over
the default transport, its first global batch, in 2 launches for the plans named by --twice (their
spread is the launch-to-launch figure) and 1 for the rest, entries the same at 1 GPU given once; `--also` adds the entries of another plan file as they
are (the micro-batches a plan shipped before, say). `table` prints, per entry: the step's median and
its CV within a launch, how far the launches' medians lay apart, the GPU's busy share of the step, its
power against the limit, MFU, the pacing verdict and whether sampling met its target.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.bundle import read_bundle  # noqa: E402 - after the repository is importable
from bench.common.run import Run  # noqa: E402
from bench.suites.training import pacing  # noqa: E402

PLANS = REPO / "bench" / "plans"
TRAINING = ("ddp", "fsdp")
AXES = ("algorithms", "protocols", "transports", "world_sizes", "nodes")  # what a 1-GPU launch on the default link drops


def one_gpu_entry(entry: dict, source: str, launches: int) -> dict:
    """The entry's GPU form at 1 GPU over the default transport, its first global batch."""
    params = {**entry.get("params", {}), **{k: v for k, v in (entry.get("gpu") or {}).items() if k not in AXES}}
    for sweep in ("global_batches", "grad_accums"):
        if params.get(sweep):
            params[sweep] = params[sweep][:1]
    return {"suite": entry["suite"], "transports": ["default"], "world_sizes": [1], "launch_repeats": launches, "params": params,
            **({"cpu": entry["cpu"]} if "cpu" in entry else {}), "_from": source}


def training_entries(path: Path, twice: "list[str]") -> list[dict]:
    plan = yaml.safe_load(path.read_text())
    launches = 2 if plan["name"] in twice else 1
    return [one_gpu_entry(e, f"{plan['name']}[{i}]", launches) for i, e in enumerate(plan["suites"]) if e["suite"] in TRAINING]


def write_plan(names: "list[str]", also: "list[Path]", twice: "list[str]", out: Path) -> None:
    entries, seen = [], set()
    for path in [PLANS / f"{name}.yaml" for name in names] + also:
        for entry in training_entries(path, twice):
            key = json.dumps([entry["suite"], entry["params"]], sort_keys=True)
            if key not in seen:
                seen.add(key)
                entries.append(entry)
    sources = "; ".join(f"{i}: {e.pop('_from')}" for i, e in enumerate(entries))
    plan = {"name": "pacing-table", "description": f"Each shipped training entry at 1 GPU ({sources}).",
            "timeout_s": 600, "precision": {}, "suites": entries}
    out.write_text(yaml.safe_dump(plan, sort_keys=False, width=120))
    print(f"wrote {out}: {len(entries)} entries, {sum(e['launch_repeats'] for e in entries)} launches")


def _percent(value: "float | None") -> str:
    return "-" if value is None else f"{value:.1%}"


def table(paths: "list[Path]") -> str:
    configurations: dict = {}
    for path in paths:
        for host in read_bundle(path)["hosts"]:
            for record in host["runs"]:
                run = Run(record)
                if run.suite in TRAINING and run.ok and not run.params.get("baseline_for"):
                    key = (run.suite, run.params["model"], run.params["micro_batch"], bool(run.params.get("cuda_graphs")),
                           run.params.get("sharding", ""), run.params.get("global_batch"))
                    configurations.setdefault(key, []).append(run)
    lines = ["| suite | model | micro-batch | CUDA graphs | global batch | step ms | CV within | launches apart | "
             "GPU busy | power / limit | MFU | paced | target met |", "|" + "---|" * 13]
    for (suite, model, micro_batch, graphs, sharding, batch), runs in sorted(configurations.items()):
        medians = [run.median("step_time_s") for run in runs]
        judged = [pacing.of_run(run) for run in runs]
        apart = (max(medians) / min(medians) - 1) if len(medians) > 1 else None
        met = sum(bool((run.sampling or {}).get("met")) for run in runs)
        cvs = [p.step_cv for p in judged if p.step_cv is not None]
        lines.append(
            f"| {suite}{' ' + sharding if sharding else ''} | {model} | {micro_batch} | {'yes' if graphs else 'no'} | {batch} | "
            f"{statistics.median(medians) * 1e3:.1f} | {_percent(max(cvs) if cvs else None)} | {_percent(apart)} | "
            f"{', '.join(_percent(p.gpu_busy_fraction) for p in judged)} | {_percent(judged[0].power_fraction)} | "
            f"{_percent(judged[0].mfu_fraction)} | {pacing.of_runs(runs).short()} | {met} of {len(runs)} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    planning = sub.add_parser("plan", help="write the plan of every shipped training entry at 1 GPU")
    planning.add_argument("--out", type=Path, required=True)
    planning.add_argument("--plans", nargs="*", default=sorted(p.stem for p in PLANS.glob("*.yaml")))
    planning.add_argument("--also", nargs="*", type=Path, default=[])
    planning.add_argument("--twice", nargs="*", default=["scaling", "pacing-before"],
                          help="plans whose entries run 2 launches (their spread between launches); the rest run 1")
    tabling = sub.add_parser("table", help="print the table of the plan's bundles")
    tabling.add_argument("bundles", nargs="+", type=Path)
    args = parser.parse_args()
    if args.command == "plan":
        write_plan(args.plans, args.also, args.twice, args.out)
    else:
        print(table(args.bundles))
    return 0


if __name__ == "__main__":
    sys.exit(main())
