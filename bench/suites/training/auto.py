"""`micro_batch: auto`, resolved on the host that trains: the largest micro-batch the GPU's memory holds
by the estimate (bench/suites/training/memory.py) that divides every global batch at every world size
of the entry. A larger micro-batch gives the GPU more work per kernel the host launches, so the step
measures the GPU and its link rather than the CPU (bench/suites/training/pacing.py)."""

from __future__ import annotations

from dataclasses import replace

from bench.common.host import Capabilities
from bench.common.units import human_bytes
from bench.errors import PlanError
from bench.models.shapes import TRANSFORMER_PRESETS
from bench.suites.training import memory

AUTO = "auto"
CANDIDATES = (64, 32, 16, 8, 4, 2, 1)
RESOLVED_KEY = "micro_batch_auto"  # the run's params say what auto became, and why


def resolve(suite, params: dict, host: Capabilities, world_sizes: "list[int]", nodes: int) -> dict:
    """The entry's params with micro_batch resolved for this host, and RESOLVED_KEY saying why."""
    if params.get("micro_batch") != AUTO:
        return params
    if params.get("model") not in TRANSFORMER_PRESETS:
        raise PlanError(f"{suite.name}: micro_batch auto needs a GPT or Llama model, whose memory the estimate knows; "
                        f"give {params.get('model')!r} a micro_batch")
    room = host.gpu_memory_free_bytes or host.gpu_memory_bytes
    if not host.cuda or not room:
        raise PlanError(f"{suite.name}: micro_batch auto is resolved from a GPU's memory, and this host shows none; "
                        "set micro_batch in the entry's cpu: override")
    for micro_batch in CANDIDATES:
        typed = replace(suite.params({**params, "micro_batch": 1}), micro_batch=micro_batch)
        if all(_fits(suite, typed, host, size, nodes, room) for size in world_sizes):
            why = (f"{micro_batch}: the largest of {', '.join(map(str, CANDIDATES))} that {human_bytes(room)} of GPU "
                   f"memory holds by the estimate and that divides every global batch at world sizes "
                   f"{', '.join(map(str, world_sizes))}")
            return {**params, "micro_batch": micro_batch, RESOLVED_KEY: why}
    raise PlanError(f"{suite.name}: micro_batch auto: no micro-batch of {', '.join(map(str, CANDIDATES))} fits this GPU's "
                    f"{human_bytes(room)} and divides every global batch; choose global batches and a micro_batch")


def _fits(suite, typed, host: Capabilities, world_size: int, nodes: int, room: float) -> bool:
    try:
        suite.check_plan(typed, host, world_size=world_size, transport="default", nodes=nodes)
    except PlanError:
        return False
    return memory.fits(memory.estimate(suite.memory_setup(typed, world_size, nodes)).total_bytes, room)
