"""How long a training launch warms up before timing: what the ranks do (ranks.py) and what the
cost model counts (cost.py)."""

from __future__ import annotations

WARMUP_WINDOW = 3  # consecutive warm-up steps that must agree before timing starts
# DDP's reducer times its first 10 iterations (its forward calls outside no_sync(): one a step)
# with CUDA events, and each next such forward waits for them: until then the CPU cannot run ahead
# of the GPU, and a step bound by launching kernels is slower at a level of its own (quick's gpt2
# on 2x H200: 28.5-32 ms, then 26.0 ms), steady enough to pass the warm-up's window.
DDP_SYNCED_STEPS = 11


def least_warmup_steps(warmup_steps: int, steps_taken: int, ddp_on_gpu: bool) -> int:
    """The plan's warm-up steps, and under DDP on a GPU enough to leave DDP's timed iterations behind
    (a launch's later global batches train the same DDP model, past them)."""
    return max(warmup_steps, DDP_SYNCED_STEPS - steps_taken) if ddp_on_gpu else warmup_steps
