"""A plan entry's axes beside its parameters, as one host reads them: transports, NCCL's algorithms
and protocols, the nodes its ranks are split into, the nodes of a multi-node job it spans, the GPUs it
uses (or every pair of them), and
how each launch of the entry says which of them it ran (its id's variant: "tree", "ll128", "n2",
"g0.2"). The entry's gpu: or cpu: override may set any of them for hosts with or without a GPU.
Standard library only: the agent plans with it, the controller reads launch ids with it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bench.common.algorithms import ALGORITHM_NAMES, DEFAULT, PROTOCOL_NAMES

# What an entry's gpu: or cpu: block may hold beside the suite's parameters.
ENTRY_AXES = ("transports", "launch_repeats", "algorithms", "protocols", "nodes", "span", "gpus", "pairs", "ranks_per_core")
ALL_NODES, FIRST_NODE = "all_nodes", "first_node"  # span: one job over every node of a group, or its first node alone


@dataclass(frozen=True)
class Side:
    """An entry on a host with a GPU or without: its axes (the override's where it sets them) and params."""

    transports: list
    launch_repeats: int
    algorithms: list
    protocols: list
    nodes: int  # emulated nodes on this host: its ranks split into this many, each with its own NCCL host id
    span: str  # ALL_NODES or FIRST_NODE: the nodes of a multi-node job (a group, a slurm job) each launch runs on
    gpus: "tuple | None"  # the GPUs its ranks use, by nvidia-smi index; None: the first ones
    pairs: bool  # a 2-GPU launch on every pair of GPUs
    ranks_per_core: int  # on a host without a GPU: the ranks a core may hold
    params: dict

    @property
    def selects_gpus(self) -> bool:
        return self.gpus is not None or self.pairs

    def job_nodes(self, nodes: int) -> int:
        """The nodes each launch spans where this host is one of a job's `nodes`."""
        return 1 if self.span == FIRST_NODE else nodes


def side_of(entry: dict, cuda: bool) -> Side:
    override = dict(entry.get("gpu" if cuda else "cpu", {}))
    axes = {key: override.pop(key) if key in override else entry.get(key) for key in ENTRY_AXES}
    return Side(
        transports=axes["transports"], launch_repeats=axes["launch_repeats"],
        algorithms=axes["algorithms"] or [DEFAULT], protocols=axes["protocols"] or [DEFAULT], nodes=axes["nodes"] or 1,
        span=axes["span"] or ALL_NODES,
        gpus=tuple(axes["gpus"]) if axes["gpus"] is not None else None, pairs=axes["pairs"] == "all",
        ranks_per_core=axes["ranks_per_core"] or 1, params={**entry["params"], **override},
    )


def gpu_sets(side: Side, gpu_count: int, world_size: int) -> list:
    """The GPUs of each launch at one world size: [None] (the first ones), the entry's first
    `world_size` GPUs, or every pair of this host's GPUs."""
    if side.pairs:
        return [(a, b) for a in range(gpu_count) for b in range(a + 1, gpu_count)]
    if side.gpus is not None:
        return [side.gpus[:world_size]]
    return [None]


def variant(algorithm: str, protocol: str, nodes: int, gpus: "tuple | None") -> tuple:
    """A launch's id parts beside its preset and world size (none for the defaults, so that the ids of
    entries without these axes stay what they were)."""
    parts = [value for value in (algorithm, protocol) if value != DEFAULT]
    if nodes > 1:
        parts.append(f"n{nodes}")
    if gpus is not None:
        parts.append("g" + ".".join(map(str, gpus)))
    return tuple(parts)


def parse_variant(parts: tuple) -> "tuple[str, str, int, tuple | None]":
    """(algorithm, protocol, nodes, gpus) that variant() wrote as these id parts; a part it never
    writes counts for nothing."""
    algorithm = protocol = DEFAULT
    nodes, gpus = 1, None
    for part in parts:
        if part in ALGORITHM_NAMES:
            algorithm = part
        elif part in PROTOCOL_NAMES:
            protocol = part
        elif re.fullmatch(r"n[0-9]{1,7}", part):
            nodes = int(part[1:])
        elif re.fullmatch(r"g[0-9]{1,4}(\.[0-9]{1,4})*", part):
            gpus = tuple(int(gpu) for gpu in part[1:].split("."))
    return algorithm, protocol, nodes, gpus


def variant_parts(sides: list) -> set:
    """Every id part the entry's sides (the entry, its gpu: and cpu:) could give a launch; pairs give
    one per pair of a host's GPUs, which only that host knows."""
    parts = set()
    for side in sides:
        parts |= {value for value in side.get("algorithms", []) + side.get("protocols", []) if value != DEFAULT}
        if side.get("nodes", 1) > 1:
            parts.add(f"n{side['nodes']}")
        if side.get("gpus"):
            gpus = side["gpus"]
            parts |= {"g" + ".".join(map(str, gpus[:count])) for count in range(1, len(gpus) + 1)}
    return parts
