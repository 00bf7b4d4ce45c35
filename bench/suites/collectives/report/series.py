"""What the collectives suite's plots and tables show, from the samples of the merged runs: busbw
against message size per series, and the point-to-point matrices."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field

from bench.common.stats import Spread
from bench.report import plots as P
from bench.report import series as S
from bench.report.merge import Comparison, Series
from bench.report.series import Line


def busbw_lines(comparison: Comparison) -> list[Line]:
    """busbw (GB/s) against message size (bytes), one line per series, op, dtype, placement and ranks."""
    groups = defaultdict(lambda: defaultdict(list))
    for entry in comparison.runs:
        p = entry.params
        if entry.run.suite == "collectives" and p["op"] != "sendrecv":
            key = (entry.series, p["op"], p["dtype"], "in-place" if p["in_place"] else "out-of-place", entry.run.world_size)
            groups[key][p["size_bytes"]] += entry.samples("busbw_gbps")
    return named(S.lines_of(groups, lambda key, points: Line(key[0], key[0].label, points, detail=key[1:])))


DETAILS = ("op", "dtype", "placement", "ranks")  # what Line.detail holds, in order: a crowded figure splits by these


def named(lines: list[Line]) -> list[Line]:
    """The lines labelled for one figure: op, dtype, placement and ranks named only where its lines differ in them."""
    varying = [i for i in range(len(DETAILS)) if len({line.detail[i] for line in lines}) > 1]
    for line in lines:
        extra = [f"{line.detail[i]} ranks" if i == 3 else str(line.detail[i]) for i in varying]
        line.label = " · ".join([line.series.label, *extra])
    return lines


def figures(lines: list[Line]) -> "list[tuple[str, list[Line]]]":
    """The busbw lines in figures a reader can follow (bench.report.plots.MAX_SERIES lines at most): split
    by op, then dtype, placement and ranks; each (what its lines share, its lines labelled for it)."""
    keys = [lambda line, i=i: line.detail[i] for i in range(len(DETAILS))]
    return [(" · ".join(f"{value} ranks" if isinstance(value, int) else str(value) for value in shared), named(part))
            for shared, part in P.split(lines, keys)]


def link_peaks(comparison: Comparison, lines: list[Line]) -> dict[str, float]:
    """hardware label -> theoretical link peak (GB/s) for the machines drawn, where the fingerprint gives it."""
    drawn = {line.series.hardware for line in lines}
    peaks = {}
    for host in comparison.hosts:
        peak = host.link.get("link_peak_gbps")
        if peak and host.hardware in drawn:
            peaks.setdefault(host.hardware, peak)
    return peaks


@dataclass
class P2PMatrix:
    series: Series  # host names joined ("3 hosts" beyond three), hardware, transport
    world_size: int
    dtype: str
    size_bytes: int
    cells: dict = field(default_factory=dict)  # (src, dst) -> Spread of busbw, GB/s
    topology: "dict | None" = None  # fingerprint.topology.matrix shared by these hosts


def _hosts(names: set) -> str:
    return ", ".join(sorted(names)) if len(names) <= 3 else f"{len(names)} hosts"


def p2p_matrices(comparison: Comparison) -> list[P2PMatrix]:
    """Point-to-point busbw per rank pair: one matrix per machine kind (GPUs, link and topology
    matrix alike), transport, ranks, dtype and message size; hosts of one kind pool their samples."""
    groups = defaultdict(lambda: defaultdict(list))
    hosts, topologies = defaultdict(set), {}
    for entry in comparison.runs:
        p = entry.params
        if entry.run.suite == "collectives" and p["op"] == "sendrecv" and entry.samples("busbw_gbps"):
            topology = (entry.host.fingerprint.get("topology") or {}).get("matrix")
            kind = (entry.series.hardware, entry.series.transport, entry.series.mismatch,
                    json.dumps(topology, sort_keys=True), entry.series.busy)
            key = (kind, entry.run.world_size, p["dtype"], p["size_bytes"])
            groups[key][(p["src_rank"], p["dst_rank"])] += entry.samples("busbw_gbps")
            hosts[kind].add(entry.host.name)
            topologies[kind] = topology
    return [
        P2PMatrix(Series(_hosts(hosts[kind]), kind[0], kind[1], kind[2], kind[4]), ws, dtype, size,
                  {pair: Spread.of(s) for pair, s in cells.items()}, topologies[kind])
        for (kind, ws, dtype, size), cells in sorted(groups.items(), key=lambda item: item[0])
    ]
