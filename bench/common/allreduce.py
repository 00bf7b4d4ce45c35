"""How long an all-reduce takes: on a link (a measured curve or a row of the link table,
bench/common/reference.py) at any number of ranks, and on a topology of nodes.

A link's own figures are for its `ranks` GPUs (2 in the table; a bundle's sweep, the ranks it ran):
its time of an all-reduce of S bytes is a latency (the time of a small one) plus the time its
bandwidth takes, bf(r) x S bytes over each GPU's link (bf(n) = 2(n-1)/n, nccl-tests' bus factor).
Split that way, a link carries any other volume V within an all-reduce of S bytes in
V / (bf(r) x S) of the bandwidth part, read off its curve at S (a large all-reduce gets more
bandwidth than a small one), and each step of an algorithm costs a hop, its latency / (2(r-1)).

A topology is `nodes` nodes of `gpus_per_node` GPUs: one link within a node, another between
nodes (a node's network, one NIC). An all-reduce of S bytes over its n = nodes x gpus_per_node
ranks takes, as NCCL's tuning model counts it (src/graph/tuning.cc: time = latency + bytes /
algorithm bandwidth; https://github.com/NVIDIA/nccl/blob/master/src/graph/tuning.cc):
- ring, over every rank: each link of the ring carries bf(n) x S, so the slowest level sets the
  pace; latency: 2(n-1) steps, 2(nodes-1) of them across the network (NCCL's nInterSteps) and
  the others within a node;
- tree, NCCL's hierarchical form: within a node a chain (reduce up, broadcast down), between
  nodes a double binary tree (NVIDIA's "Massively Scale Your Deep Learning Training with NCCL
  2.4"), pipelined, so again the slower level sets the pace. A chain's inner GPUs send 2 x S (S up,
  S down; S with two GPUs a node); a node's NIC carries 2 x S (S with two nodes, where each node
  is the root of one tree and a leaf of the other: why at two nodes the tree can pass the NIC's
  ring bandwidth, nccl-tests issue 196); NCCL's own model counts 2 x S for both (algorithm
  bandwidth = bus bandwidth / 2). Latency: 2 x (gpus_per_node - 1) hops within a node and
  2 x ceil(log2 nodes) between;
- NCCL's tuner picks the faster per size, and so does this without an algorithm named.
One node is a flat ring over its GPUs; one GPU a node, a flat ring or tree over the network. A
curve measured on the topology itself (a bundle's sweep at that world size and node count) wins
over the model.
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
    transport: str = ""  # the path NCCL takes on it, as the link rows name it (net_socket, nvlink ...); "" unknown

    @property
    def between_nodes(self) -> bool:
        """A link that can join nodes: a network's, or the user's own."""
        return self.level == "inter_node" or self.transport in NETWORK_TRANSPORTS or self.basis == "user"

    @property
    def latency_s(self) -> float:
        """A small all-reduce's time at `ranks`: no more than the sweep's smallest point takes."""
        return min(self.latency_us * 1e-6, self.points[0][1]) if self.points else self.latency_us * 1e-6

    @property
    def hop_s(self) -> float:
        """One step of a ring or tree: the latency over the 2(r-1) steps of a ring at `ranks`."""
        return self.latency_s / (2 * (self.ranks - 1))

    def bandwidth_s(self, nbytes: float) -> float:
        """The part of an all-reduce of nbytes at `ranks` that its bandwidth takes: the curve's time
        less the latency (below the sweep, the line from the latency to its smallest point), else
        bf(ranks) x nbytes at busbw_gbps."""
        if not self.points:
            return bus_factor(self.ranks) * nbytes / (self.busbw_gbps * 1e9)
        smallest, smallest_s = self.points[0]
        if nbytes < smallest:
            # Below the sweep: not the smallest point's time (a 100 MB bucket is no 1 GiB all-reduce).
            return (smallest_s - self.latency_s) * nbytes / smallest
        seconds, _ = curve_time(self.points, nbytes)
        return max(seconds - self.latency_s, 0.0)

    def carry_s(self, volume: float, nbytes: float) -> float:
        """Seconds to carry `volume` bytes over each GPU's link within an all-reduce of nbytes."""
        if nbytes <= 0 or volume <= 0:
            return 0.0
        return self.bandwidth_s(nbytes) * volume / (bus_factor(self.ranks) * nbytes)

    def own_s(self, nbytes: float) -> float:
        """An all-reduce of nbytes at the link's own `ranks`, as measured or stated."""
        return self.latency_s + self.bandwidth_s(nbytes) if nbytes > 0 else 0.0

    def time_s(self, nbytes: float, ranks: int) -> float:
        """Seconds of one all-reduce of nbytes between `ranks` GPUs over this link alone."""
        return Topology.flat(self, ranks).time_s(nbytes)

    @classmethod
    def of_row(cls, row: dict) -> "Link":
        points = tuple((size, size * bus_factor(row["ranks"]) / (gbps * 1e9)) for size, gbps in row.get("curve", ()))
        return cls(row["name"], row["title"], row["busbw_gbps"], row["latency_us"], row["level"], row["ranks"], points, row["basis"],
                   row["transport"])

    @classmethod
    def of_curve(cls, name: str, title: str, curve: list, ranks: int, transport: str = "") -> "Link":
        """A bundle's measured all_reduce sweep: (size_bytes, median seconds) at `ranks`, at least one
        point, each with a positive size and time (usable_curve)."""
        size, seconds = curve[-1]
        return cls(name, title, size * bus_factor(ranks) / seconds / 1e9, reference.P2P_LATENCY_US, "intra_node", ranks,
                   tuple(curve), "measured", transport)


def usable_curve(curve: "list | tuple") -> list:
    """A sweep's points that can time an all-reduce: a positive, finite size and time, by size."""
    return sorted((size, seconds) for size, seconds in curve
                  if 0 < size < math.inf and 0 < seconds < math.inf)


ALGORITHMS = ("ring", "tree")
NETWORK_TRANSPORTS = ("net_ib", "net_socket")


@dataclass(frozen=True)
class Topology:
    """Where a step's all-reduces run: `nodes` nodes of `gpus_per_node` GPUs, `intra` within a node
    and `network` between nodes; `algorithm` ring or tree (None: the faster for each size, as NCCL's
    tuner picks); `measured`: a curve measured on this topology, which wins."""

    gpus_per_node: int
    nodes: int = 1
    intra: "Link | None" = None
    network: "Link | None" = None
    algorithm: "str | None" = None
    measured: "Link | None" = None

    @classmethod
    def flat(cls, link: Link, ranks: int, algorithm: "str | None" = None) -> "Topology":
        """A link alone: GPUs of one node on a link within a node, else one GPU a node on a network."""
        if link.level == "inter_node":
            return cls(1, ranks, network=link, algorithm=algorithm)
        return cls(ranks, 1, intra=link, algorithm=algorithm)

    @property
    def ranks(self) -> int:
        return self.gpus_per_node * self.nodes

    @property
    def shape(self) -> str:
        """'2 nodes x 2 GPUs'."""
        return f"{self.nodes} node{'s' if self.nodes > 1 else ''} x {self.gpus_per_node} GPU{'s' if self.gpus_per_node > 1 else ''}"

    def _levels(self, intra_volume: float, network_volume: float, nbytes: float) -> float:
        """The slower level's bandwidth time: each carries its volume at once (pipelined)."""
        within = self.intra.carry_s(intra_volume, nbytes) if self.intra is not None and self.gpus_per_node > 1 else 0.0
        between = self.network.carry_s(network_volume, nbytes) if self.network is not None and self.nodes > 1 else 0.0
        return max(within, between)

    def _hops(self, within: int, between: int) -> float:
        return (within * self.intra.hop_s if within and self.intra is not None else 0.0) + (
            between * self.network.hop_s if between and self.network is not None else 0.0)

    def ring_s(self, nbytes: float) -> float:
        n, nodes = self.ranks, self.nodes
        volume = bus_factor(n) * nbytes
        return self._hops(2 * (n - nodes), 2 * (nodes - 1)) + self._levels(volume, volume, nbytes)

    def tree_s(self, nbytes: float) -> float:
        per_node, nodes = self.gpus_per_node, self.nodes
        chain = nbytes if per_node == 2 else 2 * nbytes
        nic = nbytes if nodes == 2 else 2 * nbytes
        depth = math.ceil(math.log2(nodes)) if nodes > 1 else 0
        return self._hops(2 * (per_node - 1), 2 * depth) + self._levels(chain, nic, nbytes)

    def time_s(self, nbytes: float) -> float:
        """Seconds of one all-reduce of nbytes over every rank of the topology."""
        if self.ranks < 2 or nbytes <= 0:
            return 0.0
        if self.measured is not None:
            return self.measured.own_s(nbytes)
        if self.algorithm == "ring":
            return self.ring_s(nbytes)
        if self.algorithm == "tree":
            return self.tree_s(nbytes)
        return min(self.ring_s(nbytes), self.tree_s(nbytes))


TABLE = {row["name"]: Link.of_row(row) for row in reference.LINKS}


# A link of the user's own, within sense: 1 MB/s to 100 TB/s, 1 ns to 10 s.
GBPS_RANGE = (1e-3, 1e5)
LATENCY_US_RANGE = (1e-3, 1e7)
SHOWN_CHARS = 40  # of a link spec echoed in a message


def shown(spec: str) -> str:
    """A spec as a message quotes it: at most SHOWN_CHARS of it."""
    return repr(spec if len(spec) <= SHOWN_CHARS else spec[:SHOWN_CHARS] + "...")


def link(spec: str) -> Link:
    """A link by its name in the table, or the user's own as GBPS,LATENCY_US (bus bandwidth in GB/s,
    a small all-reduce's time in microseconds, between 2 GPUs). ValueError, one line that says the
    fix, for anything else."""
    if spec in TABLE:
        return TABLE[spec]
    if "," not in spec:
        raise ValueError(f"link {shown(spec)} is not in the link table; name one of {', '.join(TABLE)}, "
                         "or give your own as GBPS,LATENCY_US (e.g. 12.5,20)")
    gbps_text, _, latency_text = spec.partition(",")
    values = []
    for what, text, (low, high), unit in (("bandwidth", gbps_text, GBPS_RANGE, "GB/s"),
                                          ("latency", latency_text, LATENCY_US_RANGE, "us")):
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value <= 0:
            raise ValueError(f"link {shown(spec)}: the {what} {shown(text.strip())} is not a positive finite number; "
                             "give GBPS,LATENCY_US, e.g. 12.5,20")
        if not low <= value <= high:
            raise ValueError(f"link {shown(spec)}: the {what} {shown(text.strip())} is outside {low:g}-{high:g} {unit}, where "
                             "links are; give GBPS,LATENCY_US, e.g. 12.5,20")
        values.append(value)
    return Link(spec, f"your link: {values[0]:g} GB/s bus bandwidth, {values[1]:g} us latency", values[0], values[1],
                basis="user")
