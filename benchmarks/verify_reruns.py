"""Does an honest rerun through `ddpbench verify` reproduce every run, in about the original's time?

Runs the plan once (`ddpbench run`: the original), then `ddpbench verify ORIGINAL` --reruns times on
the same hosts, and prints: each rerun's outcome and verdicts (inconclusive ones by their reason),
verify's wall time against the original's and against verify's own estimate, and per
configuration each launch's median over all the bundles with their spread (max - min) / median,
beside the original's measured window: whether a configuration moves more between launches than
its samples do within one, and whether it is the short ones.

Resumable: what is in --out already counts (the original, the reruns done), so a machine lent
with a per-command time limit runs it over several calls; --budget-s stops starting reruns once
the next would pass it.

    .venv/bin/python benchmarks/verify_reruns.py --plan quick --reruns 10 --out results/verify-reruns-quick
    .venv/bin/python benchmarks/verify_reruns.py --out results/verify-reruns-quick --report-only
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.controller.progress import describe_s  # noqa: E402
from bench.verify.compare import INCONCLUSIVE_BECAUSE, run_key  # noqa: E402
from bench.common.run import Run  # noqa: E402
from benchmarks.verdict_stability import ddpbench  # noqa: E402

TIMES = "times.json"  # {"original_s": ..., "reruns": {"rerun01": {"wall_s", "exit"}}}: what the bundles do not say


def _times(out: Path) -> dict:
    path = out / TIMES
    return json.loads(path.read_text()) if path.exists() else {"original_s": None, "reruns": {}}


def _save_times(out: Path, times: dict) -> None:
    (out / TIMES).write_text(json.dumps(times, indent=1))


def _bundle(folder: Path) -> "Path | None":
    found = sorted(folder.glob("*/bundle.json"))
    return found[-1] if found else None


def run_original(plan: str, hosts: str, out: Path, times: dict) -> Path:
    folder = out / "original"
    if _bundle(folder) is None:
        began = time.monotonic()
        done = ddpbench("run", "--plan", plan, "--hosts", hosts, "--out", str(folder))
        times["original_s"] = round(time.monotonic() - began, 1)
        _save_times(out, times)
        print(f"original: exit {done.returncode}, {times['original_s']:.0f} s", file=sys.stderr)
        if _bundle(folder) is None:
            sys.exit(f"error: the original run wrote no bundle (exit {done.returncode}): {done.stderr.strip()[-400:]}")
    return _bundle(folder)


def run_reruns(original: Path, hosts: str, out: Path, count: int, budget_s: float, times: dict) -> None:
    began = time.monotonic()
    for index in range(1, count + 1):
        name = f"rerun{index:02d}"
        if name in times["reruns"]:
            continue
        spent = time.monotonic() - began
        last = max((r["wall_s"] for r in times["reruns"].values()), default=times["original_s"] or 0)
        if spent + 1.2 * last > budget_s:
            print(f"stopping before {name}: {spent:.0f} s spent of --budget-s {budget_s:g}; run again to go on", file=sys.stderr)
            return
        start = time.monotonic()
        done = ddpbench("verify", str(original), "--hosts", hosts, "--out", str(out / name), "--yes")
        times["reruns"][name] = {"wall_s": round(time.monotonic() - start, 1), "exit": done.returncode}
        _save_times(out, times)
        print(f"{name}: exit {done.returncode}, {times['reruns'][name]['wall_s']:.0f} s", file=sys.stderr)


def verdict_rows(out: Path, times: dict) -> list[str]:
    columns = ["reproduced", *(f"inconclusive: {b}" for b in INCONCLUSIVE_BECAUSE), "slower", "faster", "not comparable", "failed", "incomplete"]
    lines = ["| rerun | outcome (exit) | " + " | ".join(columns) + " | verify s | estimate s | original s | verify / original |",
             "|---|---|" + "---|" * (len(columns) + 4)]
    totals: Counter = Counter()
    ratios = []
    for name, timing in sorted(times["reruns"].items()):
        bundle = _bundle(out / name)
        verdict = bundle.parent / "verdict.json" if bundle else None
        if verdict is None or not verdict.exists():
            lines.append(f"| {name} | no verdict (exit {timing['exit']}) |" + " |" * (len(columns) + 4))
            continue
        doc = json.loads(verdict.read_text())
        counts = Counter(r["verdict"] if r["verdict"] != "inconclusive" else f"inconclusive: {r.get('inconclusive_because')}"
                         for r in doc["runs"])
        totals.update(counts)
        estimate = json.loads(bundle.read_text())["verification"].get("estimated_s")
        ratio = timing["wall_s"] / times["original_s"] if times["original_s"] else None
        if ratio:
            ratios.append(ratio)
        lines.append(f"| {name} | {doc['outcome']} ({timing['exit']}) | " + " | ".join(str(counts[c]) for c in columns)
                     + f" | {timing['wall_s']:.0f} | {'-' if estimate is None else f'{estimate:.0f}'} | "
                     f"{times['original_s'] or 0:.0f} | {'-' if ratio is None else f'{ratio:.2f}'} |")
    compared = sum(n for k, n in totals.items() if k != "not comparable")
    lines += ["", f"- compared runs: {compared}; " + ", ".join(f"{k} {n}" for k, n in sorted(totals.items())),
              f"- verify's wall time / the original's: median {statistics.median(ratios):.2f}, max {max(ratios):.2f}" if ratios else "- no timing",
              f"- target (every compared run reproduced): {'met' if compared and totals['reproduced'] == compared else 'NOT met'}"]
    return lines


def launch_spread_rows(out: Path) -> list[str]:
    """Per configuration: each launch's median in every bundle, in order, and how far they spread."""
    bundles = [b for b in [_bundle(out / "original"), *(_bundle(f) for f in sorted(out.glob("rerun*")))] if b]
    medians: dict = {}
    windows: dict = {}
    cvs: dict = {}
    for path in bundles:
        for host in json.loads(path.read_text())["hosts"]:
            for run in host["runs"]:
                if run["status"] != "ok":
                    continue
                metric = next(iter(m for name, m in run["metrics"].items() if name in ("busbw_gbps", "step_time_s")), None)
                if metric is None or not metric["samples"]:
                    continue
                key = (host["name"], *run_key(Run(run)))
                medians.setdefault(key, []).append(statistics.median(metric["samples"]))
                cvs.setdefault(key, []).append(statistics.pstdev(metric["samples"]) / statistics.fmean(metric["samples"]))
                window = run.get("measured_window") or {}
                if path == bundles[0] and window.get("end_s") is not None:
                    windows[key] = (window["end_s"] - window["start_s"]) * 1e3
    lines = ["| host | suite | params | ranks | launches | launch medians | spread (max - min) / median | median CV within a launch | original's window ms |",
             "|---|---|---|---|---|---|---|---|---|"]
    for key, values in medians.items():
        host, suite, params, _, ranks = key
        shown = {k: v for k, v in json.loads(params).items() if k in ("size_bytes", "model", "global_batch", "strategy")}
        spread = (max(values) - min(values)) / statistics.median(values) if statistics.median(values) else 0.0
        lines.append(f"| {host} | {suite} | {shown} | {ranks} | {len(values)} | {', '.join(f'{v:.4g}' for v in values)} | "
                     f"{spread:.1%} | {statistics.median(cvs[key]):.2%} | {windows.get(key, float('nan')):.1f} |")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", default="quick")
    parser.add_argument("--hosts", default="hosts/local.yaml")
    parser.add_argument("--reruns", type=int, default=10)
    parser.add_argument("--out", type=Path, required=True, help="folder kept between calls: the original, the reruns, their times")
    parser.add_argument("--budget-s", type=float, default=540.0, help="start no rerun that would end past this many seconds of this call")
    parser.add_argument("--report-only", action="store_true", help="print the tables of what --out holds, run nothing")
    args = parser.parse_args()
    args.out = args.out.resolve()  # the commands run from the repository's root
    args.out.mkdir(parents=True, exist_ok=True)
    times = _times(args.out)
    if not args.report_only:
        original = run_original(args.plan, args.hosts, args.out, times)
        run_reruns(original, args.hosts, args.out, args.reruns, args.budget_s, times)
    print(f"## Honest reruns through `ddpbench verify`, each against the first ({len(times['reruns'])} of {args.reruns})\n")
    print("\n".join(verdict_rows(args.out, times)))
    print("\n## Each configuration's launch medians over the original and the reruns\n")
    print("\n".join(launch_spread_rows(args.out)))
    print(f"\n(original {describe_s(times['original_s'] or 0)}; bundles, verdicts and times under {args.out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
