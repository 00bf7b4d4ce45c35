"""Do honest reruns on this machine get honest verdicts, and are its scaling efficiencies plausible?

Runs the `quick` plan (what `make bench` runs) --runs times on this host, compares every later
bundle with the first (`ddpbench compare`), and prints: the verdicts (an honest rerun must never
be judged slower or faster: reproduced or inconclusive only), the share of inconclusive ones and
the median interval width; then, over the first --bench-runs bundles, every scaling efficiency,
each within [0.5, 1.05] or flagged with a warning. With --planted, each rerun is also copied with
the step times of its last DDP configuration (every repeat of it) x1.10, then x1.05, re-sealed
and compared with the first at the default tolerance and at 0.02: that configuration must be
"slower", the others as in the honest comparison (the check that verify tells a regression).

    .venv/bin/python benchmarks/verdict_stability.py --runs 11 --bench-runs 5 [--planted]
    .venv/bin/python benchmarks/verdict_stability.py --bundles first/bundle.json rerun*/bundle.json [--planted]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.bundle import seal  # noqa: E402 - after the repository is importable
from bench.common.stats import summarize  # noqa: E402
from bench.verify.compare import measured, run_key  # noqa: E402
from bench.common.run import Run  # noqa: E402
PLAUSIBLE = (0.5, 1.05)


def ddpbench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=REPO, capture_output=True, text=True)


def run_bundles(count: int, plan: str, hosts: str, out: Path) -> list[Path]:
    bundles = []
    for i in range(count):
        began = time.monotonic()
        done = ddpbench("run", "--hosts", hosts, "--plan", plan, "--out", str(out / f"run{i:02d}"))
        found = sorted((out / f"run{i:02d}").glob("*/bundle.json"))
        print(f"run {i + 1}/{count}: exit {done.returncode}, {time.monotonic() - began:.0f} s", file=sys.stderr)
        if found:
            bundles.append(found[-1])
    return bundles


def compare_with_first(bundles: list[Path], out: Path) -> list[dict]:
    verdicts = []
    for i, bundle in enumerate(bundles[1:], 1):
        folder = out / f"verdict{i:02d}"
        done = ddpbench("compare", str(bundles[0]), str(bundle), "--out", str(folder))
        doc = json.loads((folder / "verdict.json").read_text())
        verdicts.append({"rerun": i, "exit": done.returncode, "outcome": doc["outcome"], "runs": doc["runs"]})
    return verdicts


PLANTED = ((1.10, None), (1.05, "0.02"))  # (step-time factor, --tolerance)


def planted_copy(bundle: Path, factor: float, out: Path) -> "tuple[Path, tuple] | None":
    """The bundle with its last DDP configuration's step times x factor, re-sealed, and that
    configuration's key; None when no DDP run succeeded."""
    doc = json.loads(bundle.read_text())
    runs = doc["hosts"][0]["runs"]
    ddp = [r for r in runs if r["suite"] == "ddp" and r["status"] == "ok"]
    if not ddp:
        return None
    target = run_key(Run(ddp[-1]))
    for run in runs:
        if run_key(Run(run)) == target:
            metric = run["metrics"]["step_time_s"]
            metric["samples"] = [x * factor for x in metric["samples"]]
            metric["summary"] = summarize(metric["samples"])
    out.mkdir(parents=True, exist_ok=True)
    path = out / "bundle.json"
    path.write_text(json.dumps(seal(doc), indent=1))
    return path, target


def planted_table(bundles: list[Path], out: Path) -> list[str]:
    lines = ["| rerun | planted | tolerance | planted run's verdict (ratio [CI]) | others reproduced | others inconclusive | others slower/faster |",
             "|---|---|---|---|---|---|---|"]
    caught = total = clean = 0
    for i, bundle in enumerate(bundles[1:], 1):
        for factor, tolerance in PLANTED:
            folder = out / f"planted{i:02d}-x{factor:.2f}"
            planted = planted_copy(bundle, factor, folder)
            if planted is None:
                return lines + ["", f"- rerun {i} has no DDP run that succeeded: nothing to plant a regression in"]
            path, target = planted
            ddpbench("compare", str(bundles[0]), str(path), "--out", str(folder), *(["--tolerance", tolerance] if tolerance else []))
            runs = json.loads((folder / "verdict.json").read_text())["runs"]
            hit = next(r for r in runs if (r["suite"], json.dumps(measured(r["params"]), sort_keys=True), r["transport"], r["world_size"]) == target)
            others = Counter(r["verdict"] for r in runs if r is not hit)
            total += 1
            caught += hit["verdict"] == "slower"
            clean += not others["slower"] and not others["faster"]
            lines.append(f"| {i} | x{factor:.2f} | {tolerance or '0.05'} | {hit['verdict']} ({hit['ratio']:.3f} "
                         f"[{hit['ci_low']:.3f}, {hit['ci_high']:.3f}]) | {others['reproduced']} | {others['inconclusive']} | "
                         f"{others['slower'] + others['faster']} |")
    return lines + ["", f"- planted regressions caught (\"slower\"): {caught} of {total}; comparisons with no other run slower or faster: {clean} of {total}"]


def verdict_table(verdicts: list[dict]) -> list[str]:
    counts = Counter(r["verdict"] for v in verdicts for r in v["runs"])
    widths = [(r["ci_high"] - r["ci_low"]) / r["ratio"] for v in verdicts for r in v["runs"] if r["ci_low"] is not None]
    total = sum(counts.values())
    lines = ["| rerun | outcome (exit) | reproduced | inconclusive | slower | faster | other |", "|---|---|---|---|---|---|---|"]
    for v in verdicts:
        c = Counter(r["verdict"] for r in v["runs"])
        other = sum(n for k, n in c.items() if k not in ("reproduced", "inconclusive", "slower", "faster"))
        lines.append(f"| {v['rerun']} | {v['outcome']} ({v['exit']}) | {c['reproduced']} | {c['inconclusive']} | {c['slower']} | {c['faster']} | {other} |")
    lines += [
        "",
        f"- compared runs: {total}; reproduced {counts['reproduced']}, inconclusive {counts['inconclusive']} "
        f"({counts['inconclusive'] / total:.0%}), slower {counts['slower']}, faster {counts['faster']}" if total else "- no run compared",
        f"- median interval width (high - low) / ratio: {statistics.median(widths):.1%}" if widths else "- no interval",
        f"- target (none slower or faster): {'met' if not counts['slower'] and not counts['faster'] else 'NOT met'}",
    ]
    return lines


def efficiency_table(bundles: list[Path]) -> list[str]:
    lines = ["| bundle | global batch | ranks | scaling efficiency | warnings | within [0.5, 1.05] or flagged |", "|---|---|---|---|---|---|"]
    met = True
    for i, path in enumerate(bundles):
        doc = json.loads(path.read_text())
        for run in doc["hosts"][0]["runs"]:
            if run["suite"] != "ddp" or run["world_size"] < 2 or run["status"] != "ok":
                continue
            eff = (run.get("derived") or {}).get("scaling_efficiency_fraction")
            codes = [w["code"] for w in run.get("warnings", [])]
            ok = eff is not None and (PLAUSIBLE[0] <= eff <= PLAUSIBLE[1] or bool(codes))
            met &= ok
            lines.append(f"| {i + 1} | {run['params']['global_batch']} | {run['world_size']} | "
                         f"{'-' if eff is None else f'{eff:.3f}'} | {', '.join(codes) or '-'} | {'yes' if ok else 'NO'} |")
    return lines + ["", f"- target (every efficiency within [0.5, 1.05] or flagged): {'met' if met else 'NOT met'}"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11, help="bundles of the plan: the first and the reruns compared with it")
    parser.add_argument("--bench-runs", type=int, default=5, help="of those, how many the scaling-efficiency table reads")
    parser.add_argument("--plan", default="quick")
    parser.add_argument("--hosts", default="hosts/local.yaml")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--planted", action="store_true", help="also plant a x1.10 and a x1.05 regression in each rerun")
    parser.add_argument("--bundles", nargs="+", type=Path, default=None,
                        help="judge these bundles (the first, then the reruns) instead of running the plan: runs taken "
                             "on a lent machine over several calls, judged elsewhere")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="verdict-stability-"))
    began = time.monotonic()
    bundles = args.bundles or run_bundles(args.runs, args.plan, args.hosts, out)
    verdicts = compare_with_first(bundles, out)
    print(f"## Honest reruns of `{args.plan}` compared with the first ({len(bundles) - 1} reruns)\n")
    print("\n".join(verdict_table(verdicts)))
    if args.planted:
        print("\n## Planted regressions in each rerun, compared with the first\n")
        print("\n".join(planted_table(bundles, out)))
    print(f"\n## Scaling efficiency of the first {min(args.bench_runs, len(bundles))} bundles (`make bench`)\n")
    print("\n".join(efficiency_table(bundles[:args.bench_runs])))
    print(f"\n({time.monotonic() - began:.0f} s in all; bundles and verdicts under {out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
