"""How long torch.profiler takes to start in a fresh process, however long after CUDA's start it comes;
or (--thread) whether CUPTI's set-up can run beside the work, in a thread or ahead of time.

    python3 benchmarks/profiler_start.py [WAIT_S]
    python3 benchmarks/profiler_start.py --thread

One GPU. The first prints CUDA's start, the profiler's entry (CUPTI's set-up), ten tiny kernels and the
exit. The second prepares the profiler (prepare_trace, where CUPTI is set up) in a thread while the main
thread spins, and times a matmul and a tiny kernel's launch before, prepared, recording and after.
"""

from __future__ import annotations

import sys
import threading
import time

import torch
from torch.profiler import ProfilerActivity, profile


def main() -> None:
    if not torch.cuda.is_available():
        sys.exit("error: profiler_start.py needs a GPU (torch.cuda.is_available() is False)")
    if sys.argv[1:] == ["--thread"]:
        in_a_thread()
        return
    wait_s = float(sys.argv[1]) if len(sys.argv) > 1 else 0.0
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


def in_a_thread() -> None:
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    costs(a)
    print(f"before: {costs(a)}; the main thread alone spins {spin(1.0)} times a second")
    profiler = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
    began = time.perf_counter()
    thread = threading.Thread(target=profiler.prepare_trace)
    thread.start()
    spun = spin(1.0)
    thread.join()
    print(f"prepare_trace in a thread: {time.perf_counter() - began:.2f} s; the main thread spun {spun} times in its first second")
    print(f"prepared, not started: {costs(a)}")
    profiler.start_trace()
    print(f"recording: {costs(a)}")
    profiler.stop_trace()
    print(f"after: {costs(a)}")


def spin(seconds: float) -> int:
    count, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        count += 1
    return count


def costs(a: torch.Tensor) -> str:
    """A 4096² bf16 matmul's time, and a tiny kernel's launch (the host's time per launch)."""
    torch.cuda.synchronize()
    began = time.perf_counter()
    for _ in range(200):
        a @ a
    torch.cuda.synchronize()
    matmul_us = (time.perf_counter() - began) / 200 * 1e6
    x = torch.ones(16, device="cuda")
    torch.cuda.synchronize()
    began = time.perf_counter()
    for _ in range(5000):
        x.add_(1.0)
    torch.cuda.synchronize()
    return f"matmul {matmul_us:.1f} us, tiny kernel launch {(time.perf_counter() - began) / 5000 * 1e6:.2f} us"


if __name__ == "__main__":
    main()
