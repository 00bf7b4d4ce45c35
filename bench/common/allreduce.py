"""How long an all-reduce takes on a link: a measured curve or a row of the link table
(bench/common/reference.py), at any number of ranks and on one or two levels.

On one level, for n ranks, NCCL moves 2(n-1)/n of the bytes over each GPU's link (ring and
double binary tree alike: the NCCL 2.4 trees keep the ring's bandwidth) and pays a latency per hop:
2(n-1) hops around a ring, 2 ceil(log2 n) up and down a tree; it takes the faster. A row's figures
are for its `ranks` (2: 2 hops), so a hop costs latency_us / 2.

On two levels (several nodes of several GPUs), the bytes are reduce-scattered and all-gathered
within each node over the intra-node link (an all-reduce's worth of traffic there) and all-reduced
between the nodes over the network, where the node's one NIC carries all of its GPUs' shards:
the network moves the whole gradient per node. The two run one after the other here; NCCL
pipelines them, so this is the slow end.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from bench.common import reference


def curve_time(curve: "list | tuple", nbytes: float) -> tuple[float, bool]:
    """Seconds of one collective call of nbytes on a measured curve of (size_bytes, seconds), by size (an
    all-reduce's here; fsdp reads its all-gather and reduce-scatter curves with it too), and whether
    it was extrapolated past its end: log-size interpolation of the bandwidth between the measured
    sizes around nbytes; below the smallest size, that size's time; past the largest, its bandwidth."""
    if nbytes <= curve[0][0]:
        return curve[0][1], False
    if nbytes > curve[-1][0]:
        size, seconds = curve[-1]
        return nbytes * seconds / size, True
    for (low, low_s), (high, high_s) in zip(curve, curve[1:]):
        if low < nbytes <= high:
            low_bw, high_bw = low / low_s, high / high_s
            where = math.log(nbytes / low) / math.log(high / low)
            return nbytes / (low_bw + (high_bw - low_bw) * where), False
    raise AssertionError("unreachable: the curve is sorted and brackets nbytes")


def bus_factor(ranks: int) -> float:
    """busbw / algbw of an all-reduce: the share of the bytes each GPU's link carries (nccl-tests)."""
    return 2 * (ranks - 1) / ranks


def hops(ranks: int) -> int:
    """Latency hops of the faster of NCCL's ring (2(n-1)) and double binary tree (2 ceil(log2 n))."""
    return min(2 * (ranks - 1), 2 * math.ceil(math.log2(ranks))) if ranks > 1 else 0


@dataclass(frozen=True)
class Link:
    """One link as the predictor uses it. `points` (size_bytes, seconds at `ranks`) where measured,
    which win over busbw_gbps and latency_us."""

    name: str
    title: str
    busbw_gbps: float
    latency_us: float
    level: str = "intra_node"
    ranks: int = 2
    points: tuple = ()
    basis: str = "derived"

    def time_s(self, nbytes: float, ranks: int) -> float:
        """Seconds of one all-reduce of nbytes between `ranks` GPUs over this link."""
        if ranks < 2 or nbytes <= 0:
            return 0.0
        hop_s = self.latency_us * 1e-6 / hops(self.ranks)
        if self.points:
            smallest, smallest_s = self.points[0]
            if nbytes < smallest:
                # Below the sweep: the alpha-beta line through the link's latency and the sweep's smallest
                # point, not that point's time (a 100 MB gradient bucket is no 1 GiB all-reduce).
                latency_s = min(self.latency_us * 1e-6, smallest_s)
                at_own = latency_s + (smallest_s - latency_s) * nbytes / smallest
            else:
                at_own, _ = curve_time(self.points, nbytes)
            # The curve's bandwidth, carried to `ranks`: its bytes share and its latency hops change.
            return at_own * bus_factor(ranks) / bus_factor(self.ranks) + hop_s * (hops(ranks) - hops(self.ranks))
        return hop_s * hops(ranks) + nbytes * bus_factor(ranks) / (self.busbw_gbps * 1e9)

    @classmethod
    def of_row(cls, row: dict) -> "Link":
        points = tuple((size, size * bus_factor(row["ranks"]) / (gbps * 1e9)) for size, gbps in row.get("curve", ()))
        return cls(row["name"], row["title"], row["busbw_gbps"], row["latency_us"], row["level"], row["ranks"], points, row["basis"])

    @classmethod
    def of_curve(cls, name: str, title: str, curve: list, ranks: int) -> "Link":
        """A bundle's measured all_reduce sweep: (size_bytes, median seconds) at `ranks`."""
        size, seconds = curve[-1]
        return cls(name, title, size * bus_factor(ranks) / seconds / 1e9, reference.P2P_LATENCY_US, "intra_node", ranks,
                   tuple(curve), "measured")


TABLE = {row["name"]: Link.of_row(row) for row in reference.LINKS}


def link(spec: str) -> Link:
    """A link by its name in the table, or the user's own as GBPS,LATENCY_US (bus bandwidth in GB/s,
    a small all-reduce's time in microseconds, between 2 GPUs). ValueError, one line that says the
    fix, for anything else."""
    if spec in TABLE:
        return TABLE[spec]
    if "," not in spec:
        raise ValueError(f"link {spec!r} is not in the link table; name one of {', '.join(TABLE)}, "
                        "or give your own as GBPS,LATENCY_US (e.g. 12.5,20)")
    gbps_text, _, latency_text = spec.partition(",")
    values = []
    for what, text in (("bandwidth", gbps_text), ("latency", latency_text)):
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value <= 0:
            raise ValueError(f"link {spec!r}: the {what} {text.strip()!r} is not a positive finite number; "
                            "give GBPS,LATENCY_US, e.g. 12.5,20")
        values.append(value)
    return Link(spec, f"your link: {values[0]:g} GB/s bus bandwidth, {values[1]:g} us latency", values[0], values[1],
                basis="user")


@dataclass(frozen=True)
class Fabric:
    """Where a step's all-reduces run: `gpus_per_node` GPUs on `intra` in each of `nodes` nodes joined by
    `network` (None on one node)."""

    intra: "Link | None"
    gpus_per_node: int
    nodes: int = 1
    network: "Link | None" = None

    @property
    def ranks(self) -> int:
        return self.gpus_per_node * self.nodes

    def time_s(self, nbytes: float) -> float:
        within = self.intra.time_s(nbytes, self.gpus_per_node) if self.intra is not None and self.gpus_per_node > 1 else 0.0
        between = self.network.time_s(nbytes, self.nodes) if self.network is not None and self.nodes > 1 else 0.0
        return within + between
