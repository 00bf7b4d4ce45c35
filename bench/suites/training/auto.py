"""A micro-batch resolved on the host that trains, among those its GPU's memory holds by the estimate
(bench/suites/training/memory.py) and that divide every global batch at every world size of the entry:

- `auto`: the largest. A larger micro-batch gives the GPU more work per kernel the host launches, so
  the step measures the GPU and its link rather than the CPU (bench/suites/training/pacing.py).
- `gpu-bound`: the smallest at which the cost model expects the GPU, not the host, to pace every
  `gpu-bound` entry of the plan, one micro-batch for them all so that their strategies compare at one
  size. A slower GPU then trains a smaller micro-batch, and, with `grad_accums`, a smaller global
  batch: the same accumulation, in less time."""

from __future__ import annotations

from dataclasses import dataclass, replace

from bench.common.host import Capabilities
from bench.common.units import human_bytes
from bench.errors import PlanError
from bench.models.shapes import TRANSFORMER_PRESETS
from bench.suites.training import memory

AUTO, GPU_BOUND = "auto", "gpu-bound"
CANDIDATES = (64, 32, 16, 8, 4, 2, 1)
RESOLVED_KEY = "micro_batch_auto"  # the run's params say what auto became, and why
# The GPU paces a micro-batch whose kernels run at least this many times as long as the host takes to
# launch them: on one H100, FSDP Llama 3.2 1B was host-paced at 1.0x (GPU busy 64% of the step) and
# GPU-bound at 2.0x (97%). A lent VM's CPU also ran the same launches at 1.1-1.7x their fitted time as
# its neighbours came and went (benchmarks/results/pacing_h100.md).
HOST_MARGIN = 2.0


@dataclass(frozen=True)
class GpuBound:
    """What the plan's `gpu-bound` entries ask of their one micro-batch, entry by entry."""

    allowed: tuple  # the micro-batches every entry holds and divides, largest first
    least: int = 0  # the smallest at which every entry whose host time is measured is GPU-bound
    unmeasured: tuple = ()  # entries whose host time no bundle measured on this kind of host
    room: float = 0.0  # the GPU memory held against

    def chosen(self) -> "tuple[int, str]":
        """(micro-batch, why)."""
        sizes = ", ".join(map(str, sorted(CANDIDATES)))
        unknown = (f"; the host's time launching {' and '.join(self.unmeasured)}'s kernels is not measured here"
                   if self.unmeasured else "")
        bound = [size for size in self.allowed if size >= self.least]
        if self.least and bound:
            size = min(bound)
            return size, (f"{size}: the smallest of {sizes} at which the cost model expects the GPU to pace every "
                          f"gpu-bound entry of the plan (a micro-batch's compute at least {HOST_MARGIN:g}x the host's "
                          f"time launching its kernels), which {human_bytes(self.room)} of GPU memory holds{unknown}")
        size = self.allowed[0]
        if self.least:
            return size, (f"{size}: the largest that {human_bytes(self.room)} of GPU memory holds for every gpu-bound "
                          f"entry; the cost model expects the GPU to pace them from {self.least}, so the host may pace these steps")
        return size, f"{size}: the largest that {human_bytes(self.room)} of GPU memory holds for every gpu-bound entry{unknown}"


def gathered(suite, params: dict, host: Capabilities, world_sizes: "list[int]", nodes: int,
             found: "GpuBound | None") -> "GpuBound | None":
    """`found` with this entry's part in the plan's `gpu-bound` micro-batch: its own where it asks for one."""
    if params.get("micro_batch") != GPU_BOUND:
        return found
    room = _room(suite, params, host, GPU_BOUND)
    typed = suite.params({**params, "micro_batch": 1})
    allowed = _held(suite, typed, host, world_sizes, nodes, room)
    if found is not None:
        allowed = tuple(size for size in allowed if size in found.allowed)
    if not allowed:
        raise PlanError(f"{suite.name}: micro_batch {GPU_BOUND}: no micro-batch of {', '.join(map(str, CANDIDATES))} fits this "
                        f"GPU's {human_bytes(room)} for every gpu-bound entry and divides their global batches; "
                        "choose a micro_batch")
    least = suite.least_gpu_bound(typed, host, world_sizes)
    return GpuBound(allowed, max(least or 0, found.least if found else 0),
                    (found.unmeasured if found else ()) + (() if least else (f"{suite.name} {params['model']}",)), room)


def resolve(suite, params: dict, host: Capabilities, world_sizes: "list[int]", nodes: int,
            plan_gpu_bound: "GpuBound | None" = None) -> dict:
    """The entry's params with micro_batch resolved for this host, and RESOLVED_KEY saying why;
    plan_gpu_bound: gathered(...) over every entry of the plan."""
    if params.get("micro_batch") == GPU_BOUND:
        size, why = plan_gpu_bound.chosen()
        return {**params, "micro_batch": size, RESOLVED_KEY: why}
    if params.get("micro_batch") != AUTO:
        return params
    room = _room(suite, params, host, AUTO)
    held = _held(suite, suite.params({**params, "micro_batch": 1}), host, world_sizes, nodes, room)
    if held:
        why = (f"{held[0]}: the largest of {', '.join(map(str, CANDIDATES))} that {human_bytes(room)} of GPU "
               f"memory holds by the estimate and that divides every global batch at world sizes "
               f"{', '.join(map(str, world_sizes))}")
        return {**params, "micro_batch": held[0], RESOLVED_KEY: why}
    raise PlanError(f"{suite.name}: micro_batch auto: no micro-batch of {', '.join(map(str, CANDIDATES))} fits this GPU's "
                    f"{human_bytes(room)} and divides every global batch; choose global batches and a micro_batch")


def _room(suite, params: dict, host: Capabilities, asked: str) -> float:
    if params.get("model") not in TRANSFORMER_PRESETS:
        raise PlanError(f"{suite.name}: micro_batch {asked} needs a GPT or Llama model, whose memory the estimate knows; "
                        f"give {params.get('model')!r} a micro_batch")
    room = host.gpu_memory_free_bytes or host.gpu_memory_bytes
    if not host.cuda or not room:
        raise PlanError(f"{suite.name}: micro_batch {asked} is resolved from a GPU's memory, and this host shows none; "
                        "set micro_batch in the entry's cpu: override")
    return room


def _held(suite, typed, host: Capabilities, world_sizes: "list[int]", nodes: int, room: float) -> tuple:
    """The CANDIDATES, largest first, that `room` holds and that divide every global batch at every world size."""
    return tuple(size for size in CANDIDATES
                 if all(_fits(suite, replace(typed, micro_batch=size), host, ranks, nodes, room) for ranks in world_sizes))


def _fits(suite, typed, host: Capabilities, world_size: int, nodes: int, room: float) -> bool:
    try:
        suite.check_plan(typed, host, world_size=world_size, transport="default", nodes=nodes)
    except PlanError:
        return False
    return memory.fits(memory.estimate(suite.memory_setup(typed, world_size, nodes)).total_bytes, room)
