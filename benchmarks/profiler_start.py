"""How long a profiler takes to start in a fresh process: torch.profiler.profile, which imports
torch._inductor as it starts, against torch.autograd's profiler, which bench/agent/kernel_time.py enters.

    python3 benchmarks/profiler_start.py [--runs 3]

Each run is a fresh interpreter that imports torch, starts one profiler, runs three marked steps of
small ops (on the GPU where there is one) and stops. It prints each profiler's entry, steps and exit
in seconds, and whether torch._inductor was loaded. Standard library and torch only.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

ONE_RUN = """
import json, sys, time, torch
device = "cuda" if torch.cuda.is_available() else "cpu"
x = torch.ones(1 << 16, device=device)
if device == "cuda":
    torch.cuda.synchronize()
began = time.perf_counter()
if sys.argv[1] == "torch.profiler":
    from torch.profiler import ProfilerActivity, profile, record_function
    profiler = profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else []))
else:
    from torch.autograd.profiler import profile, record_function
    profiler = profile(use_kineto=True, use_cpu=True, use_device="cuda" if device == "cuda" else None)
profiler.__enter__()
entered = time.perf_counter()
for _ in range(3):
    with record_function("step"):
        for _ in range(10):
            x = x * 1.0001
        if device == "cuda":
            torch.cuda.synchronize()
ran = time.perf_counter()
profiler.__exit__(None, None, None)
print(json.dumps({"device": device, "entry_s": entered - began, "steps_s": ran - entered,
                  "exit_s": time.perf_counter() - ran, "inductor": "torch._inductor" in sys.modules}))
"""

PROFILERS = ("torch.profiler", "torch.autograd.profiler")


def one_run(profiler: str) -> dict:
    done = subprocess.run([sys.executable, "-c", ONE_RUN, profiler], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        sys.exit(f"error: a run of {profiler} failed: {done.stderr.strip().splitlines()[-1]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="fresh processes per profiler")
    args = parser.parse_args()
    print("| profiler | device | entry s | steps s | exit s | torch._inductor loaded |")
    print("|---|---|---|---|---|---|")
    for profiler in PROFILERS:
        runs = [one_run(profiler) for _ in range(args.runs)]
        median = {key: statistics.median(run[key] for run in runs) for key in ("entry_s", "steps_s", "exit_s")}
        print(f"| {profiler} | {runs[0]['device']} | {median['entry_s']:.2f} | {median['steps_s']:.3f} | "
              f"{median['exit_s']:.2f} | {'yes' if all(run['inductor'] for run in runs) else 'no'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
