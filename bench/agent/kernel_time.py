"""Where a training step's GPU time goes: kernel time by class, and communication left exposed.

A few steps run under torch's profiler before the timed ones, which it leaves untouched where it
can release CUPTI as it stops (releases_cupti); whether the host paces the step decides how long
they sample. Each kernel is classed by its name; per step the suite records the kernel time
of each class, how long some compute kernel was running (the union of their intervals), and
the communication time during which no compute kernel ran: the part of the all-reduce that
the backward pass did not hide. What that leaves out is what the timeline shows beside it:
compute kernels that run slower because communication shares the GPU with them.
"""

from __future__ import annotations

import os
from typing import Callable

import torch

# First match wins; names are matched lower-cased. NCCL's kernels are all "ncclDevKernel_*"/"ncclKernel_*".
CLASSES = (
    # NCCL's kernels; the copy-engine all-reduce's copies and its symmetric-memory signal kernels
    ("comm", ("nccl", "memcpy ptop", "memcpy dtod", "symmetric_memory")),
    ("attention", ("flash", "fmha", "sdpa", "attention", "dot_do_o", "convert_dq")),
    ("matmul", ("gemm", "nvjet", "xmma", "cutlass", "cublas", "wgmma", "conv")),  # convolutions too (the UNet)
    ("optimizer", ("adam", "multi_tensor_apply")),
)
METRICS = {  # class or figure -> metric name, seconds per step
    "matmul": "gpu_matmul_s",
    "attention": "gpu_attention_s",
    "optimizer": "gpu_optimizer_s",
    "other": "gpu_other_compute_s",
    "comm": "gpu_comm_s",
    "compute_busy": "gpu_compute_busy_s",
    "comm_exposed": "gpu_comm_exposed_s",
}
STEP_MARK = "ddpbench_profiled_step"


def kernel_class(name: str) -> str:
    lowered = name.lower()
    for kind, needles in CLASSES:
        if any(needle in lowered for needle in needles):
            return kind
    return "other"


def union(intervals: list) -> list:
    """Sorted, non-overlapping intervals covering the same time."""
    merged: list = []
    for begin, end in sorted(intervals):
        if merged and begin <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([begin, end])
    return merged


def covered(intervals: list, by: list) -> float:
    """Time of `intervals` (disjoint, sorted) that lies inside `by` (disjoint, sorted).

    One sweep over both: a graphed UNet step has some 100,000 kernels, and a scan of `by`
    from its start for every interval took half a minute per profiled configuration."""
    total, first = 0.0, 0
    for begin, end in intervals:
        while first < len(by) and by[first][1] <= begin:
            first += 1
        i = first
        while i < len(by) and by[i][0] < end:
            total += min(end, by[i][1]) - max(begin, by[i][0])
            i += 1
    return total


def step_breakdown(kernels: list) -> dict:
    """Seconds per class and figure for one step's kernels, each (name, begin_s, end_s)."""
    figures = {kind: 0.0 for kind in METRICS}
    spans: dict = {"compute": [], "comm": []}
    for name, begin, end in kernels:
        kind = kernel_class(name)
        figures[kind] += end - begin
        spans["comm" if kind == "comm" else "compute"].append((begin, end))
    compute, comm = union(spans["compute"]), union(spans["comm"])
    figures["compute_busy"] = sum(end - begin for begin, end in compute)
    figures["comm_exposed"] = sum(end - begin for begin, end in comm) - covered(comm, compute)
    return {METRICS[kind]: seconds for kind, seconds in figures.items()}


def kernels_by_step(events: list) -> list:
    """Each profiled step's kernels and copies (name, begin_s, end_s), from the profiler's own events.

    A step is the window of its CPU annotation; the step synchronises before the window closes,
    so every kernel it launched lies inside. Read in memory, with no Chrome trace written to disk and
    parsed back. Annotations mirrored on the GPU's timeline and memsets are not kernels."""
    from torch.autograd import DeviceType

    windows = sorted((e.start_ns(), e.end_ns()) for e in events
                     if e.device_type() == DeviceType.CPU and e.is_user_annotation() and e.name() == STEP_MARK)
    steps: list = [[] for _ in windows]
    for event in events:
        if event.device_type() != DeviceType.CUDA or event.is_user_annotation() or event.name().startswith("Memset"):
            continue
        begin = event.start_ns()
        for i, (first, last) in enumerate(windows):
            if first <= begin <= last:
                steps[i].append((event.name(), begin / 1e9, event.end_ns() / 1e9))
                break
    return steps


def releases_cupti(cuda_version: "str | None") -> bool:
    """Whether the profiler should release CUPTI as it stops (Kineto's TEARDOWN_CUPTI=1). Kineto keeps it
    attached by default, and its callbacks then slow every later kernel launch of the process: the later
    launches of a job, which a host-paced step shows. Before CUDA 12.6 attaching it again could crash
    beside CUDA graphs, so there it stays attached, as torch.profiler leaves it."""
    if not cuda_version:
        return False
    major, minor = (int(part) for part in cuda_version.split(".")[:2])
    return (major, minor) >= (12, 6)


def profile_steps(step: Callable[[], None], steps: int, device: torch.device) -> list:
    """Per-step breakdowns of `steps` runs of `step` (on a CPU device there are no kernels: all zero).

    torch.autograd's profiler, which torch.profiler.profile wraps: the wrapper imports torch._inductor as it
    starts (hasattr(torch, "_inductor")), 3-6 s of a launch that compiles nothing; CUPTI's own set-up took
    0.02 s on one H100. A TEARDOWN_CUPTI already in the environment wins over releases_cupti."""
    from torch.autograd.profiler import profile, record_function

    on_gpu = device.type == "cuda"
    if on_gpu and releases_cupti(torch.version.cuda):
        os.environ.setdefault("TEARDOWN_CUPTI", "1")  # Kineto reads it as the profile stops
    with profile(use_kineto=True, use_cpu=True, use_device="cuda" if on_gpu else None) as prof:
        for _ in range(steps):
            with record_function(STEP_MARK):
                step()
                if on_gpu:
                    torch.cuda.synchronize(device)
    return breakdowns(kernels_by_step(prof.kineto_results.events()), on_gpu)


def breakdowns(steps: list, on_gpu: bool) -> list:
    """Each step's breakdown (step_breakdown), or none where a GPU step recorded no kernel: a profile
    that caught no GPU activity (CUPTI not attached in time) would read as an idle GPU."""
    if on_gpu and not all(steps):
        return []
    return [step_breakdown(kernels) for kernels in steps]
