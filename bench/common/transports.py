"""The name of the link a run's bytes crossed, read from the transport record the agent writes
(bench/agent/transports.py): the report's series and the benchmarks' tables on a GPU host label
runs with it."""

from __future__ import annotations


def link_name(run: dict) -> str:
    """The link a run's bytes crossed, for tables and legends: its preset and the transport NCCL
    used ("default via P2P"), gloo's runs marked, or the copy engines that carry a ddp run's
    gradients under allreduce copy_engine instead of NCCL."""
    transport = run["transport"]
    if run["suite"] == "ddp" and run["params"].get("allreduce") == "copy_engine":
        return f"{transport['preset']} via copy engines"
    name = transport["preset"] if transport["backend"] == "nccl" else f"{transport['preset']} (gloo)"
    if transport["nccl_used"]:
        name += " via " + "+".join(transport["nccl_used"])
    return name
