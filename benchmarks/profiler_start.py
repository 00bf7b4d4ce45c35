"""What a profiler costs a fresh process: its start, and the kernel launches after it stopped.

    python3 benchmarks/profiler_start.py [--runs 3]

torch.profiler.profile imports torch._inductor as it starts. torch.autograd's profiler, which
bench/agent/kernel_time.py enters, does not. Kineto keeps CUPTI attached after a profile unless
TEARDOWN_CUPTI=1, which releases it from a thread that waits for a later CUDA call; its callbacks slow
every later kernel launch. Each run is a fresh interpreter that imports torch, times a launch of a small
op, profiles three marked steps, times the launch right after and 2 s later, then profiles and times
again (an agent profiles each configuration of a launch). It prints the first profile's seconds, the
launch's µs at each point, and whether torch._inductor was loaded: per profiler, and for the agent's
with CUPTI kept (TEARDOWN_CUPTI=0) and released without Kineto's lazy re-attach
(DISABLE_CUPTI_LAZY_REINIT=1). Standard library, torch and the repository only.
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

def profile():
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

figures = {"device": device, "before_us": launch_us()}
began = time.perf_counter()
profile()
figures["profile_s"] = time.perf_counter() - began
figures["after_us"] = launch_us()
time.sleep(2)
figures["later_us"] = launch_us()
profile()
time.sleep(2)
figures["second_us"] = launch_us()
figures["inductor"] = "torch._inductor" in sys.modules
print(json.dumps(figures))
"""

# (row, profiler, its environment beside the caller's, which loses TEARDOWN_CUPTI and DISABLE_CUPTI_LAZY_REINIT)
VARIANTS = (
    ("torch.profiler", "torch.profiler", {}),
    ("torch.autograd.profiler", "torch.autograd.profiler", {}),
    ("the agent's", "bench.agent.kernel_time", {}),
    ("the agent's, TEARDOWN_CUPTI=0", "bench.agent.kernel_time", {"TEARDOWN_CUPTI": "0"}),
    ("the agent's, DISABLE_CUPTI_LAZY_REINIT=1", "bench.agent.kernel_time", {"DISABLE_CUPTI_LAZY_REINIT": "1"}),
)
CUPTI_SWITCHES = ("TEARDOWN_CUPTI", "DISABLE_CUPTI_LAZY_REINIT")


def one_run(profiler: str, switches: dict) -> dict:
    env = {**{k: v for k, v in os.environ.items() if k not in CUPTI_SWITCHES}, **switches,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", ONE_RUN, profiler], capture_output=True, text=True, timeout=300, env=env)
    if done.returncode != 0:
        sys.exit(f"error: a run of {profiler} failed: {done.stderr.strip().splitlines()[-1]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="fresh processes per profiler")
    args = parser.parse_args()
    keys = ("profile_s", "before_us", "after_us", "later_us", "second_us")
    print("| profiler | device | profile s | a launch before, µs | right after | 2 s later | after a second profile "
          "| torch._inductor loaded |")
    print("|---|---|---|---|---|---|---|---|")
    for row, profiler, switches in VARIANTS:
        runs = [one_run(profiler, switches) for _ in range(args.runs)]
        median = {key: statistics.median(run[key] for run in runs) for key in keys}
        print(f"| {row} | {runs[0]['device']} | {median['profile_s']:.2f} | "
              + " | ".join(f"{median[key]:.1f}" for key in keys[1:])
              + f" | {'yes' if all(run['inductor'] for run in runs) else 'no'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
