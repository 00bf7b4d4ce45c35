"""What a profiler costs a fresh process: its start, and the kernel launches after it stopped.

    python3 benchmarks/profiler_start.py [--runs 3]

torch.profiler.profile imports torch._inductor as it starts. torch.autograd's profiler, which
bench/agent/kernel_time.py enters, does not; left as Kineto leaves it, CUPTI stays attached after the
profile and slows every later launch. The agent's profile_steps releases it (TEARDOWN_CUPTI=1).
Each run is a fresh interpreter that imports torch, times a launch of a small op, profiles three
marked steps, then times a launch again. It prints the profile's seconds (start, steps and stop),
the launch's µs before and after, and whether torch._inductor was loaded. Standard library, torch
and the repository only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

ONE_RUN = """
import json, sys, time, torch
device = "cuda" if torch.cuda.is_available() else "cpu"
x = torch.ones(1 << 10, device=device)

def launch_us():
    '''The median host time to launch one small op, over 20 rounds of 200.'''
    rounds = []
    for _ in range(20):
        if device == "cuda":
            torch.cuda.synchronize()
        began = time.perf_counter()
        for _ in range(200):
            x.mul_(1.0)
        rounds.append((time.perf_counter() - began) / 200 * 1e6)
    return sorted(rounds)[len(rounds) // 2]

def step():
    for _ in range(10):
        x.mul_(1.0001)

before = launch_us()
began = time.perf_counter()
if sys.argv[1] == "torch.profiler":
    from torch.profiler import ProfilerActivity, profile, record_function
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])):
        for _ in range(3):
            with record_function("step"):
                step()
                torch.cuda.synchronize() if device == "cuda" else None
elif sys.argv[1] == "torch.autograd.profiler":
    from torch.autograd.profiler import profile, record_function
    with profile(use_kineto=True, use_cpu=True, use_device="cuda" if device == "cuda" else None):
        for _ in range(3):
            with record_function("step"):
                step()
                torch.cuda.synchronize() if device == "cuda" else None
else:
    from bench.agent import kernel_time
    kernel_time.profile_steps(step, 3, torch.device(device))
profiled = time.perf_counter() - began
print(json.dumps({"device": device, "profile_s": profiled, "before_us": before, "after_us": launch_us(),
                  "inductor": "torch._inductor" in sys.modules}))
"""

PROFILERS = ("torch.profiler", "torch.autograd.profiler", "bench.agent.kernel_time")


def one_run(profiler: str) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    env.pop("TEARDOWN_CUPTI", None)  # each profiler as it comes
    done = subprocess.run([sys.executable, "-c", ONE_RUN, profiler], capture_output=True, text=True, timeout=300, env=env)
    if done.returncode != 0:
        sys.exit(f"error: a run of {profiler} failed: {done.stderr.strip().splitlines()[-1]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="fresh processes per profiler")
    args = parser.parse_args()
    print("| profiler | device | profile s | a launch before, µs | after, µs | torch._inductor loaded |")
    print("|---|---|---|---|---|---|")
    for profiler in PROFILERS:
        runs = [one_run(profiler) for _ in range(args.runs)]
        median = {key: statistics.median(run[key] for run in runs) for key in ("profile_s", "before_us", "after_us")}
        print(f"| {profiler} | {runs[0]['device']} | {median['profile_s']:.2f} | {median['before_us']:.1f} | "
              f"{median['after_us']:.1f} | {'yes' if all(run['inductor'] for run in runs) else 'no'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
