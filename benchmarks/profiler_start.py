"""How long torch.profiler takes to start in a fresh process, however long after CUDA's start it comes.

    python3 benchmarks/profiler_start.py [WAIT_S]

One GPU. It prints CUDA's start, the profiler's entry (CUPTI's set-up), ten tiny kernels and the exit.
"""

from __future__ import annotations

import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile


def main() -> None:
    wait_s = float(sys.argv[1]) if len(sys.argv) > 1 else 0.0
    if not torch.cuda.is_available():
        sys.exit("error: profiler_start.py needs a GPU (torch.cuda.is_available() is False)")
    began = time.perf_counter()
    x = torch.ones(1 << 20, device="cuda")
    torch.cuda.synchronize()
    cuda_s = time.perf_counter() - began
    time.sleep(wait_s)
    entering = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
        entered = time.perf_counter()
        for _ in range(10):
            x = x * 1.0001
        torch.cuda.synchronize()
        ran = time.perf_counter()
    print(f"wait {wait_s} s: CUDA's start {cuda_s:.2f} s, profiler entry {entered - entering:.2f} s, "
          f"kernels {ran - entered:.3f} s, exit {time.perf_counter() - ran:.2f} s")


if __name__ == "__main__":
    main()
