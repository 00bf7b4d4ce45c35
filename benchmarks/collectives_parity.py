"""Collectives suite against nccl-tests (GPU) and against a bare loop of dist.all_reduce (CPU).

On a GPU host, with nccl-tests built there (its build/ folder given by --nccl-tests): each op at each
world size and NCCL algorithm, 1 MiB to 4 GiB by 4, fp32, out of place, the suite's busbw beside
nccl-tests' (`OP_perf -g N`, threads in one process) measured in the same call, and their ratio; an
algorithm is asked in NCCL's per-collective form (`NCCL_ALGO=allreduce:tree`) for both.
Without --nccl-tests: the suite's sweep under each transport preset beside the nccl-tests figures of
the lent 2x H200 (DESIGN.md).
On a CPU host: gloo with 2 processes, the suite beside a bare timing loop, to show the
harness's own overhead.

    python benchmarks/collectives_parity.py [--out DIR] [--nccl-tests DIR --world-sizes 2,4 --algorithms default,ring,tree]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common.algorithms import FUNCTION_ALGORITHMS, env_for  # noqa: E402
from bench.common.transports import BASE_NCCL_ENV  # noqa: E402
from benchmarks._agent import REPO, median, plan_entry, run_plan, table  # noqa: E402

MIB = 1 << 20
# nccl-tests all_reduce_perf -g 2, fp32, out-of-place busbw (GB/s) on the lent 2x H200 (DESIGN.md).
NCCL_TESTS_H200X2 = {
    "default": {1: 67.5, 4: 119.1, 16: 205.0, 64: 264.2, 256: 300.3, 1024: 325.4, 4096: 343.3},
    "p2p_off": {1: 16.4, 4: 24.0, 16: 26.5, 64: 27.1, 256: 26.9, 1024: 27.0, 4096: 27.0},
    "socket": {1: 2.35, 4: 2.67, 16: 3.28, 64: 3.78, 256: 3.62, 1024: 3.33, 4096: 3.01},
}
OPS = {"all_reduce": "AllReduce", "all_gather": "AllGather", "reduce_scatter": "ReduceScatter", "broadcast": "Broadcast"}
TIMING = {"warmup_iters": 5, "iters": 20, "repetitions": 10}
PARITY_FROM_BYTES = 64 * MIB  # the target: at least 0.97 of nccl-tests from here up


def entry(transport: str, begin: int, end: int, timing: dict, ops: "list | None" = None, world_sizes: "list | None" = None,
          in_place: bool = True) -> dict:
    return plan_entry("collectives", {"ops": ops or ["all_reduce"], "dtypes": ["float32"], "in_place": [in_place], "begin_bytes": begin,
                                      "end_bytes": end, "factor": 4, "cuda_graph": True, "cv_target": None,
                                      "sampling_cap_s": 30, **timing}, [transport], world_sizes or ["all"])


# nccl-tests times 20 calls after 5 warm-ups; the slow links get fewer repetitions so the sweep ends.
GPU_TIMING = {
    "default": {"warmup_iters": 5, "iters": 20, "repetitions": 20},
    "p2p_off": {"warmup_iters": 5, "iters": 20, "repetitions": 10},
    "socket": {"warmup_iters": 2, "iters": 5, "repetitions": 5},
}


def gpu_count() -> int:
    out = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.device_count())"], capture_output=True, text=True)
    return int(out.stdout.strip() or 0)


def gpu(out: Path) -> None:
    suites = [entry(preset, MIB, 4096 * MIB, timing) for preset, timing in GPU_TIMING.items()]
    raw = run_plan({"name": "collectives-parity", "timeout_s": 900, "suites": suites}, out / "gpu")
    rows, used = [], {}
    for run in raw["runs"]:
        preset, size_mib = run["transport"]["preset"], run["params"]["size_bytes"] // MIB
        used[preset] = run["transport"]["nccl_via"]
        ref = NCCL_TESTS_H200X2[preset].get(size_mib)
        busbw = median(run, "busbw_gbps")
        cv = run["metrics"]["busbw_gbps"]["summary"]["cv"]
        rows.append([preset, f"{size_mib} MiB", f"{busbw:.2f}", f"{ref:.2f}" if ref else "-",
                     f"{busbw / ref:.3f}" if ref else "-", f"{cv:.2%}"])
    print(table(["preset", "size", "suite busbw GB/s", "nccl-tests busbw GB/s", "ratio", "CV"], rows))
    print()
    print(table(["preset", "NCCL used (via)"], [[p, ", ".join(v)] for p, v in used.items()]))
    failed = [l for l in raw["launches"] if l["status"] != "ok"]
    for launch in failed:
        print(f"launch {launch['id']} {launch['status']}: {launch['error']}")


def algorithms_of(op: str, asked: list[str]) -> list[str]:
    """The asked algorithms NCCL runs `op` with (tree is all-reduce's alone), NCCL's own choice always."""
    return [a for a in asked if a == "default" or a in FUNCTION_ALGORITHMS[OPS[op]]]


_ROW = re.compile(r"^\s*(\d+)\s+\d+\s+\w+\s+\S+\s+-?\d+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S+)")


def nccl_tests(binaries: Path, op: str, world_size: int, algorithm: str, log: Path) -> dict:
    """size_bytes -> out-of-place busbw (GB/s) of `OP_perf -g N`, 1 MiB to 4 GiB by 4, as the suite's timing."""
    env = {**os.environ, **BASE_NCCL_ENV, "NCCL_DEBUG": "WARN", **env_for([OPS[op]], algorithm, "default")}
    done = subprocess.run([str(binaries / f"{op}_perf"), "-b", "1M", "-e", "4G", "-f", "4", "-g", str(world_size), "-d", "float",
                           "-w", str(TIMING["warmup_iters"]), "-n", str(TIMING["iters"]), "-c", "1"],
                          capture_output=True, text=True, env=env)
    log.write_text(done.stdout + done.stderr)
    found = {}
    for line in done.stdout.splitlines():
        row = _ROW.match(line)
        if row and row.group(5) == "0":  # #wrong 0: the result checked
            found[int(row.group(1))] = float(row.group(4))
    return found


def nccl_tests_parity(binaries: Path, out: Path, world_sizes: list[int], algorithms: list[str], ops: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    theirs = {(op, ws, a): nccl_tests(binaries, op, ws, a, out / f"nccl-tests-{op}-g{ws}-{a}.log")
              for ws in world_sizes for op in ops for a in algorithms_of(op, algorithms)}
    suites = []
    for algorithm in algorithms:
        chosen = [op for op in ops if algorithm in algorithms_of(op, [algorithm])]
        if chosen:
            suite = entry("default", MIB, 4096 * MIB, TIMING, chosen, world_sizes, in_place=False)
            suite["algorithms"] = [algorithm]
            suites.append(suite)
    raw = run_plan({"name": "collectives-nccl-tests-parity", "timeout_s": 900, "suites": suites}, out / "suite")
    rows, least = [], {}
    for run in raw["runs"]:
        op, ws, size = run["params"]["op"], run["world_size"], run["params"]["size_bytes"]
        algorithm = run["transport"].get("algorithm") or "default"
        ref, busbw = theirs.get((op, ws, algorithm), {}).get(size), median(run, "busbw_gbps")
        ran = sorted({f"{t['algorithm']}/{t['protocol']}" for t in run["transport"].get("nccl_tuning") or []})
        ratio = busbw / ref if ref and busbw else None
        if ratio is not None and size >= PARITY_FROM_BYTES:
            least[op, ws, algorithm] = min(least.get((op, ws, algorithm), 9.0), ratio)
        rows.append([op, str(ws), algorithm, f"{size // MIB} MiB", f"{busbw:.2f}" if busbw else "-", f"{ref:.2f}" if ref else "-",
                     f"{ratio:.3f}" if ratio else "-", f"{run['metrics']['busbw_gbps']['summary']['cv']:.2%}", ", ".join(ran)])
    print(table(["op", "GPUs", "algorithm", "size", "suite busbw GB/s", "nccl-tests busbw GB/s", "ratio", "CV", "NCCL ran"], rows))
    print()
    print(f"least ratio from {PARITY_FROM_BYTES // MIB} MiB up (target 0.97):")
    print(table(["op", "GPUs", "algorithm", "least ratio"], [[op, str(ws), a, f"{r:.3f}"] for (op, ws, a), r in sorted(least.items())]))
    for launch in raw["launches"]:
        if launch["status"] != "ok":
            print(f"launch {launch['id']} {launch['status']}: {launch['error']}")


BARE_LOOP = r"""
import json, os, sys, time, torch, torch.distributed as dist
dist.init_process_group("gloo")
sizes, iters, reps = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
out = {}
for size in sizes:
    t = torch.ones(size // 4)
    for _ in range(2):
        dist.all_reduce(t)
    samples = []
    for _ in range(reps):
        begin = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(t)
        samples.append((time.perf_counter() - begin) / iters)
    out[size] = sorted(samples)[len(samples) // 2]
if dist.get_rank() == 0:
    print("BARE " + json.dumps(out))
dist.destroy_process_group()
"""


def bare_loop(out: Path, sizes: list[int], timing: dict) -> dict:
    script = out / "bare_allreduce.py"
    script.write_text(BARE_LOOP)
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", str(script),
         json.dumps(sizes), str(timing["iters"]), str(timing["repetitions"])],
        capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}, cwd=REPO,
    )
    return {int(k): v for k, v in json.loads(next(l for l in done.stdout.splitlines() if l.startswith("BARE "))[5:]).items()}


def cpu(out: Path, rounds: int = 3) -> None:
    """Suite and bare loop alternate; each keeps its fastest round, the one least disturbed by
    whatever else the machine runs."""
    timing = {"warmup_iters": 2, "iters": 10, "repetitions": 10}
    suite_s, bare_s = {}, {}
    for round_index in range(rounds):
        plan = {"name": "collectives-parity", "timeout_s": 900, "suites": [entry("default", 4096, 16 * MIB, timing)]}
        raw = run_plan(plan, out / f"cpu-{round_index}")
        for run in raw["runs"]:
            size = run["params"]["size_bytes"]
            suite_s[size] = min(suite_s.get(size, float("inf")), median(run, "time_s"))
        for size, seconds in bare_loop(out, sorted(suite_s), timing).items():
            bare_s[size] = min(bare_s.get(size, float("inf")), seconds)
    rows = [[f"{size // 1024} KiB", f"{size / suite_s[size] / 1e9:.3f}", f"{size / bare_s[size] / 1e9:.3f}",
             f"{suite_s[size] * 1e6:.0f}", f"{bare_s[size] * 1e6:.0f}", f"{suite_s[size] / bare_s[size]:.2f}"]
            for size in sorted(suite_s)]
    print(f"gloo, 2 processes, fastest of {rounds} alternating rounds (busbw = algbw for 2 ranks)")
    print(table(["size", "suite busbw GB/s", "bare busbw GB/s", "suite us/call", "bare us/call", "suite/bare"], rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("/tmp/ddpbench-parity"))
    parser.add_argument("--nccl-tests", type=Path, help="nccl-tests' build/ folder on this GPU host")
    parser.add_argument("--world-sizes", default="2", help="with --nccl-tests: GPUs per run, e.g. 2,4")
    parser.add_argument("--algorithms", default="default", help="with --nccl-tests: default, ring, tree (each op takes those NCCL has)")
    parser.add_argument("--ops", default=",".join(OPS), help="with --nccl-tests: " + ", ".join(OPS))
    args = parser.parse_args()
    if args.nccl_tests:
        nccl_tests_parity(args.nccl_tests, args.out, [int(w) for w in args.world_sizes.split(",")], args.algorithms.split(","),
                          args.ops.split(","))
    else:
        (gpu if gpu_count() >= 2 else cpu)(args.out)


if __name__ == "__main__":
    main()
