"""Do honest reruns on this machine get honest verdicts, and are its scaling efficiencies plausible?

Runs the `quick` plan (what `make bench` runs) --runs times on this host, compares every later
bundle with the first (`ddpbench compare`), and prints: the verdicts (an honest rerun must never
be judged slower or faster: reproduced or inconclusive only), the share of inconclusive ones and
the median interval width; then, over the first --bench-runs bundles, every scaling efficiency,
each within [0.5, 1.05] or flagged with a warning.

    .venv/bin/python benchmarks/verdict_stability.py --runs 11 --bench-runs 5
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
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="verdict-stability-"))
    began = time.monotonic()
    bundles = run_bundles(args.runs, args.plan, args.hosts, out)
    verdicts = compare_with_first(bundles, out)
    print(f"## Honest reruns of `{args.plan}` compared with the first ({len(bundles) - 1} reruns)\n")
    print("\n".join(verdict_table(verdicts)))
    print(f"\n## Scaling efficiency of the first {min(args.bench_runs, len(bundles))} bundles (`make bench`)\n")
    print("\n".join(efficiency_table(bundles[:args.bench_runs])))
    print(f"\n({time.monotonic() - began:.0f} s in all; bundles and verdicts under {out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
