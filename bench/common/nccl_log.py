"""What NCCL's own log says it did, beyond the transport (bench/common/transports.py reads the "via"
lines): the algorithm and protocol of each collective (NCCL_DEBUG_SUBSYS TUNING) and the nodes each
communicator spans (INIT).

Read from the formats in NCCL's source, tolerant of the changes between versions:
- src/enqueue.cc, 2.24 and later: "AllReduce: 4194304 Bytes -> Algo RING proto LL128 channel{Lo..Hi}={0..23}";
  2.22-2.23: "AllReduce: 4194304 Bytes -> Algo 1 proto 2 time 12.345" (indices into NCCL's tables);
  2.21: the same without the function's name. Only rank 0 of each communicator prints them.
- src/init.cc: "comm 0x55d1 rank 0 nRanks 4 nNodes 2 localRanks 2 localRank 0 MNNVL 0".
- 2.31 and later, with NCCL_RUN_DIAGNOSTICS=1: its active diagnostics' report (diagnostics_report).
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


# The report of NCCL's active diagnostics (NCCL_RUN_DIAGNOSTICS=1, 2.31 and later): rank 0 of each
# communicator prints it on standard output at the communicator's start, each line
# "<host>:<pid> NCCL DIAG <body>". The shapes are those of NCCL's troubleshooting guide
# (troubleshooting/diagnostics.rst) and of the lines its unit tests pin (src/diagnostics/p2p.cc);
# none was captured here, the lent GPUs carrying NCCL 2.28:
#   [OK]   p2p: verified P2P access in both directions between every GPU pair (56 peer accesses)
#   [INFO] p2p: only 52/56 GPU-to-GPU peer accesses passed verification
#   [INFO] p2p: write mismatch srcRank=4 srcCudaDev=4 srcNvmlDev=14 dstRank=1 dstCudaDev=1 dstNvmlDev=11
#          path=PIX handle=LEGACY_CUDA_IPC expected=0x... got=0x...; check the affected pair with ...
DIAG_MARK = "NCCL DIAG "
MAX_DIAG_LINES = 64
MAX_DIAG_CHARS = 1024
_DIAG_OK = re.compile(r"^\[OK\]\s+p2p: .*?(\d+) (?:peer accesses|directed)")
_DIAG_PARTIAL = re.compile(r"^\[INFO\]\s+p2p: only (\d+)/(\d+) ")
_DIAG_EDGE = re.compile(
    r"^\[INFO\]\s+p2p: (?P<kind>[A-Za-z0-9 /-]{1,64}?) srcRank=(?P<src_rank>\d{1,9}) srcCudaDev=(?P<src_cuda_dev>\d{1,9}) "
    r"srcNvmlDev=(?P<src_nvml_dev>\d{1,9}) dstRank=(?P<dst_rank>\d{1,9}) dstCudaDev=(?P<dst_cuda_dev>\d{1,9}) "
    r"dstNvmlDev=(?P<dst_nvml_dev>\d{1,9}) path=(?P<path>[A-Z0-9_]{1,16}) handle=(?P<handle>[A-Z0-9_]{1,32})[^;]*(?:; (?P<advice>.*))?$")
_DIAG_EDGE_NUMBERS = ("src_rank", "src_cuda_dev", "src_nvml_dev", "dst_rank", "dst_cuda_dev", "dst_nvml_dev")
_DIAG_DONE = re.compile(r"NCCL diagnostics completed in (\d+(?:\.\d+)?) ms")
# One process driving several GPUs: NCCL opens peer access for the check and says so; no finding.
_DIAG_EXPECTED = "p2p: temporarily enabled"


def diagnostics_report(text: str) -> "dict | None":
    """What NCCL's active diagnostics found, from a log holding their report; None where it holds no
    NCCL DIAG line. status "failed" where a GPU pair failed (each in failed_pairs, as NCCL named it:
    ranks, CUDA and NVML device indices, the path between them, how the memory was shared, NCCL's
    advice), "passed" where every peer access NCCL tested passed, "inconclusive" with the reason where
    it tested none (no pair NCCL would join directly) or said why it could not. The lines are kept
    without their "<host>:<pid>" prefix: the fingerprint never holds the host's name. Several reports
    (one per communicator): their failed pairs together, the counts of the one that failed most, or
    else tested most."""
    bodies = [line.split(DIAG_MARK, 1)[1].strip() for line in text.splitlines() if DIAG_MARK in line]
    if not bodies:
        return None
    pairs, counts, notes, took_ms = [], [], [], None
    for body in bodies:
        if edge := _DIAG_EDGE.match(body):
            pair = {"kind": edge["kind"], **{field: int(edge[field]) for field in _DIAG_EDGE_NUMBERS},
                    "path": edge["path"], "handle": edge["handle"],
                    "advice": (edge["advice"] or "").strip()[:MAX_DIAG_CHARS] or None}
            if pair not in pairs:
                pairs.append(pair)
        elif partial := _DIAG_PARTIAL.match(body):
            counts.append((int(partial[1]), int(partial[2])))
        elif ok := _DIAG_OK.match(body):
            counts.append((int(ok[1]), int(ok[1])))
        elif done := _DIAG_DONE.search(body):
            took_ms = (took_ms or 0.0) + float(done[1])
        elif body.startswith("[INFO]") and _DIAG_EXPECTED not in body:
            notes.append(body)
    passed, tested = max(counts, key=lambda count: (count[1] - count[0], count[1])) if counts else (None, None)
    if pairs or any(p < t for p, t in counts):
        status, reason = "failed", None
    elif counts:
        status, reason = "passed", None
    else:
        status = "inconclusive"
        reason = (f"NCCL said: {notes[0]}" if notes else
                  "NCCL tested no GPU pair: none would go peer to peer here (P2P off, or not possible between these GPUs)")
    return {"status": status, "reason": reason and reason[:MAX_DIAG_CHARS], "peer_accesses_passed": passed,
            "peer_accesses_tested": tested, "failed_pairs": pairs[:MAX_DIAG_LINES], "nccl_duration_ms": took_ms,
            "lines": [body[:MAX_DIAG_CHARS] for body in bodies[:MAX_DIAG_LINES]]}
