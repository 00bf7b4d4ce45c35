"""What NCCL's own log says it did, beyond the transport (bench/common/transports.py reads the "via"
lines): the algorithm and protocol of each collective (NCCL_DEBUG_SUBSYS TUNING) and the nodes each
communicator spans (INIT).

Read from the formats in NCCL's source, tolerant of the changes between versions:
- src/enqueue.cc, 2.24 and later: "AllReduce: 4194304 Bytes -> Algo RING proto LL128 channel{Lo..Hi}={0..23}";
  2.22-2.23: "AllReduce: 4194304 Bytes -> Algo 1 proto 2 time 12.345" (indices into NCCL's tables);
  2.21: the same without the function's name. Only rank 0 of each communicator prints them.
- src/init.cc: "comm 0x55d1 rank 0 nRanks 4 nNodes 2 localRanks 2 localRank 0 MNNVL 0".
Standard library only: the agent ships it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# NCCL's tables, in its order: a log of 2.22-2.23 names them by index.
ALGORITHMS = ("TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT")
PROTOCOLS = ("LL", "LL128", "SIMPLE")

_TUNING = re.compile(r"NCCL INFO (?:(\w+): )?(\d+) Bytes -> Algo (\w+) proto (\w+)")
_COMM = re.compile(r"NCCL INFO comm \S+ rank (\d+) nRanks (\d+) nNodes (\d+) localRanks (\d+) localRank (\d+)")


@dataclass(frozen=True)
class Choice:
    """One collective as NCCL scheduled it: its function ("AllReduce"; None where this NCCL does not
    say), the bytes it moved per rank as NCCL counts them (count x type size), algorithm and protocol."""

    function: "str | None"
    bytes: int
    algorithm: str
    protocol: str


def _named(token: str, table: tuple) -> str:
    """"RING", "Ring" or an index into NCCL's table -> the upper-case name NCCL 2.24+ prints."""
    if token.isdigit():
        index = int(token)
        return table[index] if index < len(table) else token
    return token.upper()


def tuning_choices(text: str) -> list[Choice]:
    """Every TUNING line of a log, in order."""
    return [Choice(function or None, int(size), _named(algorithm, ALGORITHMS), _named(protocol, PROTOCOLS))
            for function, size, algorithm, protocol in _TUNING.findall(text)]


def tuning_summary(choices: list[Choice]) -> list[dict]:
    """{"function", "algorithm", "protocol", "calls", "min_bytes", "max_bytes"} per distinct
    (function, algorithm, protocol), in the order first seen: what the bundle records."""
    found: dict = {}
    for choice in choices:
        key = (choice.function, choice.algorithm, choice.protocol)
        entry = found.setdefault(key, {"function": choice.function, "algorithm": choice.algorithm, "protocol": choice.protocol,
                                       "calls": 0, "min_bytes": choice.bytes, "max_bytes": choice.bytes})
        entry["calls"] += 1
        entry["min_bytes"] = min(entry["min_bytes"], choice.bytes)
        entry["max_bytes"] = max(entry["max_bytes"], choice.bytes)
    return list(found.values())


@dataclass(frozen=True)
class CommRank:
    """One rank of one communicator as NCCL's INIT line describes it."""

    rank: int
    ranks: int
    nodes: int
    local_ranks: int
    local_rank: int


def communicators(text: str) -> list[CommRank]:
    return [CommRank(*map(int, found)) for found in _COMM.findall(text)]


def seen_nodes(text: str, world_size: int) -> "tuple[int | None, int | None, bool]":
    """(nodes, ranks per node, grouping as planned) of the communicators over every rank, as NCCL saw
    them: None where no such INIT line was printed, or where they disagree. The grouping is as planned
    when every rank is local rank `rank mod ranks per node` (torchrun numbers each node's ranks in a block)."""
    world = [comm for comm in communicators(text) if comm.ranks == world_size]
    nodes = {comm.nodes for comm in world}
    per_node = {comm.local_ranks for comm in world}
    if len(nodes) != 1 or len(per_node) != 1:
        return None, None, False
    (count,), (local,) = nodes, per_node
    return count, local, all(comm.local_rank == comm.rank % local for comm in world)


def version_text(code: int) -> str:
    """'2.28.9' of NCCL's version code (ncclGetVersion, NCCL_VERSION_CODE): 22809 from 2.9 on,
    2708 (major x 1000 + minor x 100 + patch) before."""
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def minor_version(version: "str | None") -> "str | None":
    """'2.28' of '2.28.9': what NCCL changes its choice of algorithm between (its cost model)."""
    return ".".join(version.split(".")[:2]) if version else None
