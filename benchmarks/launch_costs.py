"""Measure the cost model's fixed costs from bundles: where their launches' time went (each launch
record's phases), as the figures of bench/common/launch_costs.py.

    python3 benchmarks/launch_costs.py BUNDLE.json [BUNDLE.json ...]           # print the figures
    python3 benchmarks/launch_costs.py --write BUNDLE.json [BUNDLE.json ...]   # and rewrite launch_costs.py

The bundles' hosts are taken by kind (with GPUs or without): per kind, the median over the jobs of a
job's start-up (spawn, imports, device and process group: its first launch's) and of its exit (its last
launch's teardown), and the median over the launches of a launch's own cost beside its suite's work
(other_s: records written, ranks agreeing, memory freed), per training model, of a training launch's
set-up (build_s: the model built and wrapped, its optimizer), and of an arm of the P2P gate. A CPU
host's figures are scaled to an idle machine by the share of the CPU other processes took during each
launch. On a GPU host, per eager training setup (bench.suites.training.cost.eager_setup), its 1-GPU runs
at the least micro-batch measured: the median seconds of one micro-batch (a step's median, less the cost
model's step overhead, over its micro-batches); and over its profiled runs, the seconds its profile's
trace took to read per micro-batch (profile_s beyond its steps). --write keeps the other kind's figures as they are, and names the bundles, machines and how
busy they were.
"""

from __future__ import annotations

import argparse
import gzip
import json
import pprint
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import launch_costs  # noqa: E402
from bench.common.protocol import START_PHASES  # noqa: E402
from bench.suites.training.cost import STEP_OVERHEAD_S, eager_setup  # noqa: E402

MODULE = Path(launch_costs.__file__)
HEADER = '''"""What a job and a launch cost beside each suite's own work (its cost model), as measured: a job's
start-up (its processes, their imports, the devices, the process group) and exit, a launch's own cost,
a training launch's set-up per model, and on a GPU what a small eager micro-batch of each training setup
takes and how long its profiled steps' traces take to read, each per kind of host with where it was
measured.

Written by benchmarks/launch_costs.py from the phases that bundles' launch records hold (bench.common.
launch_time); rerun it on new bundles rather than edit the figures by hand.
"""

'''


def _median(values: list) -> "float | None":
    return round(statistics.median(values), 3) if values else None


def _kind(host: dict) -> str:
    return "gpu" if (host.get("fingerprint") or {}).get("gpus") else "cpu"


def _machine(host: dict) -> str:
    """"2x NVIDIA H200" or "2 CPUs (AMD EPYC ...)": what the figures were measured on."""
    fingerprint = host.get("fingerprint") or {}
    gpus = fingerprint.get("gpus") or []
    if gpus:
        return f"{len(gpus)}x {gpus[0].get('name')}"
    cpu = fingerprint.get("cpu") or {}
    return f"{cpu.get('logical_cpus')} CPUs ({cpu.get('model') or 'CPU model unknown'})"


def _quiet(host: dict, launch: "dict | None", ranks: int) -> float:
    """On a CPU host, what a second measured there would be on an idle machine: the cores the launch's
    ranks use (`ranks` of them, its threads each) over the cores they got while other processes took
    the launch's cpu_taken_by_others_fraction (the launch: None, the host's median). The cost model's CPU
    figures are an idle machine's, stretched by the load it finds (bench.agent.estimate.cpu_slowdown)."""
    if _kind(host) != "cpu":
        return 1.0
    launches = host.get("launches") or []
    shares = sorted(l["cpu_taken_by_others_fraction"] for l in launches if l.get("cpu_taken_by_others_fraction") is not None)
    share = launch.get("cpu_taken_by_others_fraction") if launch else (statistics.median(shares) if shares else None)
    cores = ((host.get("fingerprint") or {}).get("cpu") or {}).get("logical_cpus") or 1
    threads = ((launch or {}).get("resources") or {}).get("threads_per_rank") or 1
    if share is None or share >= 1:
        return 1.0
    return min(1.0, (1.0 - share) * cores / min(cores, ranks * threads))


def eager_runs(host: dict) -> "dict[str, list[tuple[int, float, float | None]]]":
    """eager setup -> (micro-batch, seconds of one micro-batch, seconds its profile's trace took to read
    per micro-batch, None where it profiled none) of each ok 1-GPU eager training run on this GPU host:
    one GPU keeps communication out of the figure."""
    found: dict = {}
    for run in host.get("runs") or []:
        params, metrics = run["params"], run.get("metrics") or {}
        samples = (metrics.get("step_time_s") or {}).get("samples")
        key = eager_setup(run["suite"], params) if run["suite"] in ("ddp", "fsdp") else None
        if key is None or run["status"] != "ok" or run["world_size"] != 1 or not samples:
            continue
        step_s, accum = statistics.median(samples), params["grad_accum"]
        profiled, profile_s = params.get("profile_steps", 0), (metrics.get("profile_s") or {}).get("samples", [0.0])[0]
        trace_s = (profile_s - profiled * step_s) / (profiled * accum) if profiled and not run.get("profiled_in") and profile_s else None
        found.setdefault(key, []).append((params["micro_batch"], (step_s - STEP_OVERHEAD_S["gpu"]) / accum, trace_s))
    return found


def eager_micro_batches(runs: "dict[str, list[tuple[int, float, float | None]]]") -> dict:
    """eager setup -> its least micro-batch measured and the median seconds of one, over the runs at that
    micro-batch; and the median seconds a profiled step's trace takes to read per micro-batch, over every
    profiled run (it follows the kernels a micro-batch launches, not its size)."""
    figures = {}
    for key, found in sorted(runs.items()):
        least = min(micro_batch for micro_batch, _, _ in found)
        at_least = [seconds for micro_batch, seconds, _ in found if micro_batch == least]
        traces = [trace for _, _, trace in found if trace is not None]
        figures[key] = {"micro_batch": least, "micro_batch_s": round(statistics.median(at_least), 4), "runs": len(at_least),
                        **({"trace_s": round(max(0.0, statistics.median(traces)), 4), "profiled_runs": len(traces)} if traces else {})}
    return figures


def measured(bundles: "list[dict]") -> dict:
    """kind -> the figures these bundles measure (those of launches that recorded their phases, and the P2P
    gate's arms, which every bundle since the gate records), each with the bundles it came from."""
    found: dict = {}
    for bundle in bundles:
        for host in bundle["hosts"]:
            kind = _kind(host)
            mine = found.setdefault(kind, {"start": [], "teardown": [], "launch": [], "build": {}, "gate": [], "phased": [], "gated": [],
                                           "busy": [], "eager": {}})
            if kind == "gpu":
                for key, runs in eager_runs(host).items():
                    mine["eager"].setdefault(key, []).extend(runs)
            launches = [l for l in host.get("launches") or [] if l.get("phases") and l["status"] == "ok"]
            model_of = {r["launch_id"]: r["params"]["model"] for r in host.get("runs") or [] if "model" in r["params"]}
            shares = [l["cpu_taken_by_others_fraction"] for l in host.get("launches") or [] if l.get("cpu_taken_by_others_fraction") is not None]
            gate = (host.get("fingerprint") or {}).get("gate")
            for launch in launches:
                phases, quiet = launch["phases"], _quiet(host, launch, launch["world_size"] // launch.get("nodes", 1))
                if launch.get("job", launch["id"]) == launch["id"]:
                    mine["start"].append(quiet * sum(phases.get(f"{name}_s", 0.0) for name in START_PHASES))
                if phases["teardown_s"] > 0:
                    mine["teardown"].append(quiet * phases["teardown_s"])
                mine["launch"].append(quiet * phases["other_s"])
                if launch["id"] in model_of:
                    mine["build"].setdefault(model_of[launch["id"]], []).append(quiet * phases["build_s"])
            source = f"bundle {bundle['run_id']} ({bundle['plan']['name']} on host {host['name']}: {_machine(host)})"
            if gate and gate.get("arms") and gate.get("planted_fault") is None:
                mine["gate"].append(_quiet(host, None, gate["ranks"]) * gate["duration_s"] / len(gate["arms"]))
                mine["gated"].append(source)
            if launches:
                mine["busy"] += shares
                mine["phased"].append(source)
    figures = {}
    for kind, mine in found.items():
        busy = (f"; other processes took a median {statistics.median(mine['busy']):.0%} of the CPU, the figures are scaled to an "
                "idle one" if kind == "cpu" and mine["busy"] else "")
        figures[kind] = {**({"start_s": _median(mine["start"]), "teardown_s": _median(mine["teardown"]) or 0.0,
                             "launch_s": _median(mine["launch"]),
                             "training_build_s": {model: _median(values) for model, values in sorted(mine["build"].items())},
                             **({"eager_micro_batches": eager_micro_batches(mine["eager"])} if mine["eager"] else {}),
                             "jobs": len(mine["start"]), "launches": len(mine["launch"]),
                             "source": "; ".join(mine["phased"]) + busy} if mine["start"] else {}),
                         **({"gate_arm_s": _median(mine["gate"]), "gate_source": "; ".join(mine["gated"])} if mine["gate"] else {})}
    return {kind: mine for kind, mine in figures.items() if mine}


def main(argv: "list[str]") -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundles", nargs="+", type=Path)
    parser.add_argument("--write", action="store_true", help=f"rewrite {MODULE.name} with the figures")
    args = parser.parse_args(argv)
    figures = measured([json.loads(gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_text())
                        for path in args.bundles])
    if not figures:
        sys.exit("error: these bundles hold neither a launch that recorded its phases nor a P2P gate's record "
                 "(bundles from before they were recorded?); give bundles made by this version")
    pprint.pprint(figures, sort_dicts=False, width=120)
    if args.write:
        merged = {kind: {**launch_costs.MEASURED.get(kind, {}), **figures.get(kind, {})} for kind in dict.fromkeys([*launch_costs.MEASURED, *figures])}
        MODULE.write_text(HEADER + "MEASURED = " + pprint.pformat(merged, sort_dicts=False, width=120) + "\n")
        print(f"wrote {MODULE}")


if __name__ == "__main__":
    main(sys.argv[1:])
