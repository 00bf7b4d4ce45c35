"""Write the launch-to-launch floor (bench/common/launch_floor.json) from this project's bundles.

A configuration measured by several launches on one machine (a plan entry's launch_repeats, or the
same plan run again: bundles whose GPUs, or CPU and host, are the same) shows how far its median
moves from one launch to the next beyond what its samples show: the model's between-launch spread
(bench/common/stats.py), from each configuration's launch medians, pooled over the configurations of
one kind of run (device, transport preset, nodes, the metric it is judged by, and for a figure of
a size, below or from SIZE_EDGE_BYTES) with their degrees of freedom, one entry per kind and machine.
Figures this project measured whose bundles were not kept (REPORTED) are entries too; the lookup
pools the entries of a kind (bench/common/launch_floor.py). No floor is written below LEAST: a
floor of 0 would let one launch a side judge as if launches never differed.

    .venv/bin/python benchmarks/launch_floor.py                      # every bundle in benchmarks/results/bundles/
    .venv/bin/python benchmarks/launch_floor.py more/*.json --print  # with other bundles; print, write nothing
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks._venv import imports_of_the_venv  # noqa: E402

with imports_of_the_venv():
    from bench import suites  # noqa: E402 - after the repository is importable
    from bench.bundle import read_bundle  # noqa: E402
    from bench.judging import shared_machine  # noqa: E402
    from bench.common.launch_floor import TABLE, kind_of  # noqa: E402
    from bench.common.run import Run  # noqa: E402
    from bench.common.stats import Floor, Launches  # noqa: E402
    from bench.suites.training import TrainingSuite, pacing  # noqa: E402
    from bench.verify.compare import configurations  # noqa: E402

BUNDLES = REPO / "benchmarks" / "results" / "bundles"
SIZE_EDGE_BYTES = 64 << 20  # small messages move by a few percent between launches on NVLink, large ones by under one
LEAST = 0.005  # the 2-GPU DDP step on 2x H200: launch medians 0.4-0.7% apart over 5 launches
MiB = 1 << 20

REPORTED = [
    {"match": {"device": "gpu", "preset": "default", "nodes": "one", "metric": "busbw_gbps", "size_bytes_below": SIZE_EDGE_BYTES},
     "spread_fraction": 0.015, "df": 12,
     "source": {"kind": "reported", "where": "benchmarks/results/verify_reruns_h200x2.md", "machine": "2x H200 NV18",
                "dates": ["2026-11-26"], "launches": 15, "configurations": 3,
                "says": "1.5%: all_reduce 1, 4 and 16 MiB over 5 launches of quick on 2x H200 NV18 (launch medians 4.7-5.1% "
                        "apart; 1 MiB's no further apart than its samples), benchmarks/results/verify_reruns_h200x2.md, 2026-11-26"}},
    {"match": {"device": "gpu", "preset": "default", "nodes": "one", "metric": "busbw_gbps", "size_bytes_from": SIZE_EDGE_BYTES},
     "spread_fraction": 0.006, "df": 12,
     "source": {"kind": "reported", "where": "benchmarks/results/verify_reruns_h200x2.md", "machine": "2x H200 NV18",
                "dates": ["2026-11-26"], "launches": 15, "configurations": 3,
                "says": "0.6%: all_reduce 64 MiB to 1 GiB over 5 launches of quick on 2x H200 NV18 (launch medians 0.2-1.4% "
                        "apart), benchmarks/results/verify_reruns_h200x2.md, 2026-11-26"}},
    {"match": {"device": "gpu", "preset": "default", "nodes": "one", "metric": "step_time_s", "pacing": "gpu-bound"},
     "spread_fraction": LEAST, "df": 8,
     "source": {"kind": "reported", "where": "benchmarks/results/verify_reruns_h200x2.md", "machine": "2x H200 NV18",
                "dates": ["2026-11-26"], "launches": 10, "configurations": 2,
                "says": "0.5%: GPT-2 DDP step on 1 and 2 GPUs over 5 launches of quick on 2x H200 NV18 (launch medians "
                        "0.4-0.7% apart), benchmarks/results/verify_reruns_h200x2.md, 2026-11-26"}},
    {"match": {"device": "gpu", "preset": "default", "nodes": "one", "metric": "step_time_s", "pacing": "host-paced"},
     "spread_fraction": 0.15, "df": 4,
     "source": {"kind": "reported", "where": "benchmarks/results/pacing_h100.md", "machine": "1x H200",
                "dates": ["2026-11-27"], "launches": 10, "configurations": 5,
                "says": "15%: host-paced GPT-2 Large, Llama 3.2 1B (DDP and FSDP) steps at micro-batch 2-4, 2 launches a "
                        "side minutes apart on 1x H200 (launch medians 14-25% apart), benchmarks/results/pacing_h100.md"}},
    {"match": {"device": "cpu", "preset": "default", "nodes": "one", "metric": "step_time_s"},
     "spread_fraction": 0.065, "df": 20,
     "source": {"kind": "reported", "where": "benchmarks/results/verdict_stability_cpu2.md", "machine": "2-core AMD EPYC VM (shared)",
                "dates": ["2026-11-24"], "launches": 22, "configurations": 2,
                "says": "6.5%: the tiny GPT's DDP step on 1 and 2 processes over 11 runs of quick on an otherwise idle 2-core "
                        "machine (launch medians 26.2-31.5 and 31.4-39.4 ms), benchmarks/results/verdict_stability_cpu2.md, 2026-11-24"}},
    {"match": {"device": "gpu", "preset": "socket", "nodes": "emulated", "metric": "busbw_gbps"},
     "spread_fraction": 0.064, "df": 4,
     "source": {"kind": "reported", "where": "ddpbench verify of a 4-GPU plan, twice", "machine": "4x H200 NV18",
                "dates": ["2026-11-27"], "launches": 8, "configurations": 2,
                "says": "6.4%: all_reduce 64 and 512 MiB over sockets between 2 emulated nodes of 2 GPUs (tree) on 4x H200 "
                        "NV18, one launch against one in two reruns (ratios 0.887, 0.922, 0.907, 0.956), 2026-11-27"}},
]
DEFAULTS = {
    "gpu": {"spread_fraction": 0.05, "df": 4,
            "why": "5%, about the widest a GPU configuration's launches were seen apart on one node (all_reduce below 64 MiB "
                   "on 2x H200, 4.7-5.1%), worth 4 launches: a plan's own launches soon outweigh it"},
    "cpu": {"spread_fraction": 0.2, "df": 4,
            "why": "20%, about the widest a CPU configuration's launches were seen apart on an idle 2-core machine (the tiny "
                   "DDP step, 20% over 11 runs; gloo all-reduces of 4-64 KiB moved further, by 2-16x), worth 4 launches"},
}


def machine(host: dict) -> "tuple[str, str] | None":
    """(identity, name) of the machine a host ran on: its GPUs (their hashed UUIDs), else its CPU and host name."""
    fingerprint = host.get("fingerprint")
    if not fingerprint:
        return None
    gpus = fingerprint.get("gpus") or []
    if gpus:
        return ",".join(sorted(g["uuid_sha256"] for g in gpus)), f"{len(gpus)}x {gpus[0]['name'].removeprefix('NVIDIA ')}"
    cpu, host_name = fingerprint.get("cpu") or {}, (fingerprint.get("host") or {}).get("hostname_sha256")
    return f"{cpu.get('model')}|{host_name}", f"{cpu.get('model')} ({cpu.get('logical_cpus', '?')} logical CPUs)"


def pacing_of(runs: "list[Run]") -> "str | None":
    """A GPU training configuration's pacing (its floor is kept apart by it), else None."""
    if not isinstance(suites.get(runs[0].suite), TrainingSuite) or not runs[0].on_gpu:
        return None
    return pacing.of_runs(runs).verdict


def band(kind) -> dict:
    if kind.size_bytes is None:
        return {}
    return {"size_bytes_below": SIZE_EDGE_BYTES} if kind.size_bytes < SIZE_EDGE_BYTES else {"size_bytes_from": SIZE_EDGE_BYTES}


def launches_by_configuration(paths: "list[Path]") -> dict:
    """(machine, configuration) -> [(bundle id, date, Run)], every ok run of the bundles measured while no other
    process took more than shared_machine.BUSY_ABOVE_FRACTION of the machine's CPU: verify never judges a run
    of a busy machine slower or faster, so the floor is an otherwise idle machine's."""
    found = defaultdict(list)
    for path in paths:
        bundle = read_bundle(path)
        for host in bundle["hosts"]:
            who = machine(host)
            if who is None:
                continue
            shares = {launch["id"]: launch.get("cpu_taken_by_others_fraction") for launch in host["launches"]}
            for key, runs in configurations(host["runs"]).items():
                found[(who, key)] += [(bundle["run_id"], bundle["started_at"][:10], run)
                                      for run in runs if run.ok and not shared_machine.busy(shares.get(run.launch_id))]
    return found


def measured_floors(paths: "list[Path]") -> list[dict]:
    """One floor per kind of run and machine where some configuration was measured in two launches or more."""
    kinds = defaultdict(list)
    for (who, _), launches in launches_by_configuration(paths).items():
        if len(launches) < 2:
            continue
        run = launches[0][2]
        metric = suites.get(run.suite).headline_metric
        runs = [r for _, _, r in launches if r.samples(metric)]
        fit = Launches.of([r.samples(metric) for r in runs], Floor(LEAST, 1, "")).fit()
        if fit is None or fit.launches < 2:
            continue
        kind = kind_of(run, metric, pacing_of(runs))
        match = {"device": kind.device, "preset": kind.preset, "nodes": kind.nodes, "metric": metric, **band(kind),
                 **({"pacing": kind.pacing} if kind.pacing else {})}
        kinds[(json.dumps(match, sort_keys=True), who[1])].append((who[1], fit, launches))
    return [floor_of(json.loads(match), measured) for (match, _), measured in sorted(kinds.items())]


def floor_of(match: dict, measured: list) -> dict:
    df = sum(fit.launches - 1 for _, fit, _ in measured)
    pooled = math.sqrt(sum((fit.launches - 1) * fit.measured_between ** 2 for _, fit, _ in measured) / df)
    spread = max(pooled, LEAST)
    bundles = sorted({bundle for _, _, launches in measured for bundle, _, _ in launches})
    dates = sorted({date for _, _, launches in measured for _, date, _ in launches})
    machines = ", ".join(sorted({name for name, _, _ in measured}))
    count = sum(fit.launches for _, fit, _ in measured)
    least = f" (measured {pooled:.2%}, raised to the least floor {LEAST:.1%})" if pooled < LEAST else ""
    what = f"{len(measured)} configuration{'s' if len(measured) > 1 else ''} in {count} launches"
    return {"match": match, "spread_fraction": round(spread, 5), "df": df,
            "source": {"kind": "bundles", "bundles": bundles, "machine": machines, "dates": dates, "launches": count,
                       "configurations": len(measured),
                       "says": f"{spread:.1%}{least}: {what} on {machines}, bundles {', '.join(bundles)} ({', '.join(dates)})"}}


def document(paths: "list[Path]") -> dict:
    return {
        "description": "How far a configuration's median moves from one launch to the next beyond what its samples show "
                       "(the standard deviation of a launch's log median), per kind of run; the interval of a side that "
                       "one launch measured takes it (bench/common/stats.py).",
        "written_by": "benchmarks/launch_floor.py",
        "floors": measured_floors(paths) + REPORTED,
        "defaults": DEFAULTS,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundles", nargs="*", type=Path, help="bundles to read beside benchmarks/results/bundles/")
    parser.add_argument("--print", action="store_true", help="print the floors, write nothing")
    args = parser.parse_args()
    paths = sorted(BUNDLES.glob("*.json*")) + args.bundles
    doc = document(paths)
    for floor in doc["floors"]:
        print(f"{json.dumps(floor['match'], sort_keys=True)}: {floor['spread_fraction']:.2%} df {floor['df']:g} "
              f"({floor['source']['kind']}: {floor['source']['says']})")
    if not args.print:
        TABLE.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"wrote {TABLE.relative_to(REPO)} from {len(paths)} bundles")
    return 0


if __name__ == "__main__":
    sys.exit(main())
