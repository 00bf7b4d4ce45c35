"""Modelled: where N GPUs all-reduce on a link a user names (bench/common/allreduce.py's Topology):
one node of them on a link within a node, one GPU a node on a network, or nodes of GPUs on an
INTRA+NETWORK pair; a table row this host measured replaced by its sweep; and each topology's
all-reduce time per size, computed once."""

from __future__ import annotations

import math

from bench.common.allreduce import Link, Topology, link, shown
from bench.errors import UserError

# PCIe 4.0 x1/x4/x8/x16 boxes of RTX 4090s (no P2P, so through host memory) and the RTX 3090
# bridge, a datacenter NVLink, and two networks between 1-GPU nodes.
REPORT_LINKS = ("pcie4-x1-host", "pcie4-x4-host", "pcie4-x8-host", "pcie4-x16-host", "rtx3090-nvlink-bridge",
                "nvlink4", "ib-hdr", "eth-25g")


def _link(spec: str) -> Link:
    try:
        return link(spec)
    except ValueError as err:
        raise UserError(str(err)) from None


def link_specs(names: "list[str] | None") -> list:
    """Links by name, GBPS,LATENCY_US, or INTRA+NETWORK for several nodes (two levels); the report's
    default set without names."""
    specs = []
    for name in names or REPORT_LINKS:
        if "+" in name:
            intra, _, network = name.partition("+")
            pair = (_link(intra), _link(network))
            if pair[0].level != "intra_node" or not pair[1].between_nodes:
                raise UserError(f"link {shown(name)}: two levels are INTRA+NETWORK, a link within a node then one between "
                                f"nodes (e.g. nvlink4+ib-hdr)")
            specs.append(pair)
        else:
            specs.append(_link(name))
    return specs


def spec_topology(spec: "Link | tuple", gpus: int, gpus_per_node: "int | None", algorithm: "str | None") -> "Topology | None":
    """Where N GPUs all-reduce over a link (one node of them, or one GPU a node on a network), or
    over an intra-node link and a network in nodes of gpus_per_node (default 1); None where the GPUs
    do not fill those nodes."""
    if isinstance(spec, tuple):
        intra, network = spec
        per_node = gpus_per_node or 1
        if gpus % per_node:
            return None
        return Topology(per_node, gpus // per_node, intra, network, algorithm)
    return Topology.flat(spec, gpus, algorithm)


def spec_name(spec) -> tuple[str, str, str]:
    """(name, title, basis) of a link or an INTRA+NETWORK pair."""
    if isinstance(spec, tuple):
        return f"{spec[0].name}+{spec[1].name}", f"{spec[0].title}, nodes joined by {spec[1].title}", "derived"
    return spec.name, spec.title, spec.basis


def swept(spec: "Link | tuple", gpus: int, gpus_per_node: "int | None", sweeps: dict) -> "Link | tuple":
    """The spec with each table row this host measured (sweeps.sweeps_of_rows) replaced by its sweep
    at the nearest ranks."""
    def part(row: Link, ranks: int) -> Link:
        found = sweeps.get(row.name)
        return found[min(found, key=lambda r: (abs(r - ranks), r))] if found else row
    if isinstance(spec, tuple):
        per_node = gpus_per_node or 1
        return part(spec[0], per_node), part(spec[1], max(gpus // per_node, 1))
    return part(spec, gpus)


# Distinct bucket sizes timed exactly on one topology; past them (a timeline of many thousands of
# sizes) a size's time is interpolated between the nearest of GRID_STEPS sizes a doubling, within
# about 1e-5 of its own (the times are affine in the size on a row, smooth on a curve).
EXACT_SIZES = 4096
GRID_STEPS = 64


class Durations:
    """Each topology's all-reduce time per size, computed once: a replay asks for every bucket, and
    the same buckets are replayed on the same topology many times."""

    def __init__(self) -> None:
        self._took: dict = {}

    def of(self, topology: Topology):
        took, grid = self._took.setdefault(topology, ({}, {}))

        def on_grid(step: int) -> float:
            if step not in grid:
                grid[step] = topology.time_s(2 ** (step / GRID_STEPS))
            return grid[step]

        def seconds(nbytes: float) -> float:
            found = took.get(nbytes)
            if found is None:
                if len(took) < EXACT_SIZES or nbytes < 1:
                    found = topology.time_s(nbytes)
                else:
                    step = math.floor(math.log2(nbytes) * GRID_STEPS)
                    low, high = 2 ** (step / GRID_STEPS), 2 ** ((step + 1) / GRID_STEPS)
                    found = on_grid(step) + (on_grid(step + 1) - on_grid(step)) * (nbytes - low) / (high - low)
                took[nbytes] = found
            return found
        return seconds
