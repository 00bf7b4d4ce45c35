"""The collectives suite's part of a report: bus bandwidth against message size (plot and table),
the point-to-point bandwidth matrices, and every GPU pair's (an entry's pairs: all) with the slowest named."""

from __future__ import annotations

from bench.common.links import CPU_ONLY, pair_label, pair_path
from bench.common.units import human_bytes
from bench.report import plots as P
from bench.report import tables as T
from bench.report.document import Heading, Paragraph, Table
from bench.report.merge import Comparison
from bench.suites.collectives.report import plots as CP
from bench.suites.collectives.report import series as CS


def section(comparison: Comparison, plot, colours: dict) -> list:
    """The collectives' part of a report: busbw plot and table, the point-to-point matrices."""
    blocks = []
    lines = CS.busbw_lines(comparison)
    table = collectives_table(comparison)
    if lines:
        blocks.append(Heading(3, "Bus bandwidth"))
        parts = CS.figures(lines)
        if len(parts) > 1:
            blocks.append(Paragraph(f"{len(lines)} lines, more than a figure can hold apart ({P.MAX_SERIES}): a figure for each "
                                    f"{', then '.join(CS.DETAILS[:2])} where needed."))
        for shared, part in parts:
            peaks = CS.link_peaks(comparison, part)
            note = " Horizontal lines: the links' theoretical peaks from the fingerprint." if peaks else ""
            blocks.append(plot(CP.busbw_figure, (part, peaks, colours), "-".join(["busbw", *([P.slug(shared)] if shared else [])]),
                               "Bus bandwidth against message size" + (f", {shared}" if shared else ""),
                               "busbw as nccl-tests defines it (algbw x 2(n-1)/n for all-reduce). " + P.SPREAD_CAPTION + note))
    if table:
        blocks += [table, *T.warnings_blocks(comparison, "collectives")]
    blocks += pairs_blocks(comparison)
    largest = {}  # a figure per machine kind, transport, ranks and dtype: its largest message; the table has all
    for matrix in CS.p2p_matrices(comparison):
        largest[(matrix.series, matrix.world_size, matrix.dtype)] = matrix
    if largest:
        blocks.append(Heading(3, "Point-to-point bandwidth"))
        for i, matrix in enumerate(largest.values()):
            stem = f"p2p-{i + 1}-{P.slug(matrix.series.label)}"
            blocks.append(plot(CP.p2p_figure, (matrix,), stem, f"Point-to-point bandwidth, {matrix.series.label}",
                               CP.CPU_P2P_CAPTION if matrix.series.hardware == CPU_ONLY else CP.P2P_CAPTION))
        blocks.append(p2p_table(comparison))
        blocks += [Paragraph(line, warning=True) for line in asymmetric_pairs(CS.p2p_matrices(comparison))]
    return [Heading(2, "Collectives"), *blocks] if blocks else []


def collectives_table(comparison: Comparison) -> "Table | None":
    entries = [e for e in comparison.runs if e.run.suite == "collectives" and e.params["op"] != "sendrecv"]
    rows = []
    groups = T.grouped(entries, lambda e: (e.params["op"], e.params["dtype"], e.params["in_place"], e.run.world_size,
                                            e.params["size_bytes"]))
    # Sizes ascending within each line; its largest message's row is the one HTML shows above the fold: the
    # bandwidth a link reaches, what a reader sets against its peak.
    largest = {}
    for key, _ in groups:
        largest[key[:-1]] = max(largest.get(key[:-1], 0), key[-1])
    for key, group in groups:
        _, op, dtype, in_place, ws, size = key
        time = T.pooled_spread(group, "time_s")
        rows.append([*T.series_cells(group), op, dtype, "in" if in_place else "out", str(ws), human_bytes(size),
                     T.spread(T.pooled_spread(group, "busbw_gbps")) + T.flags(group), T.spread(T.pooled_spread(group, "algbw_gbps")),
                     T.time_spread(time) if time else "-", T.bundles_cell(group)])
    if not rows:
        return None
    return Table(["host", T.hardware_header(comparison), "transport", "op", "dtype", "place", "ranks", "size",
                  "busbw GB/s median [p5, p95]", "algbw GB/s median [p5, p95]", "time median [p5, p95]", "bundles"], rows,
                 lead=tuple(i for i, (key, _) in enumerate(groups) if key[-1] == largest[key[:-1]]))


def p2p_table(comparison: Comparison) -> "Table | None":
    entries = [e for e in comparison.runs if e.run.suite == "collectives" and e.params["op"] == "sendrecv"]
    rows = []
    for key, group in T.grouped(entries, lambda e: (e.run.world_size, e.params["dtype"], e.params["size_bytes"],
                                                   e.params["src_rank"], e.params["dst_rank"])):
        _, ws, dtype, size, src, dst = key
        rows.append([*T.series_cells(group), str(ws), dtype, human_bytes(size), f"{src} → {dst}",
                     T.spread(T.pooled_spread(group, "busbw_gbps")), T.bundles_cell(group)])
    if not rows:
        return None
    return Table(["host", T.hardware_header(comparison), "transport", "ranks", "dtype", "size", "source → destination",
                  "busbw GB/s median [p5, p95]", "bundles"], rows)


# A link carries the same bytes either way: a pair this many times slower one way than the other
# is worth a reader's look (a one-way PCIe switch setting, a NUMA split), or a rerun where the samples are few.
ASYMMETRIC_AT = 2.0


def asymmetric_pairs(matrices: list) -> list[str]:
    """One line per rank pair whose send/recv one way is ASYMMETRIC_AT times slower than the other way,
    with the samples each way (n) and whether their p5-p95 overlap."""
    lines = []
    for matrix in matrices:
        for (src, dst), slow in sorted(matrix.cells.items()):
            fast = matrix.cells.get((dst, src))
            if fast is None or not slow.median > 0 or fast.median < ASYMMETRIC_AT * slow.median:
                continue
            overlap = None not in (slow.high, fast.low) and slow.high >= fast.low
            settle = ("their p5-p95 overlap, so more samples (the entry's repetitions) tell whether it holds" if overlap
                      else "their p5-p95 do not overlap")
            lines.append(f"{matrix.series.label}, {matrix.dtype} {human_bytes(matrix.size_bytes)}: {src} → {dst} at "
                         f"{slow.median:.3g} GB/s is {fast.median / slow.median:.1f}x slower than {dst} → {src} at "
                         f"{fast.median:.3g} GB/s (n={slow.n} and n={fast.n} samples); {settle}.")
    return lines


def pairs_blocks(comparison: Comparison) -> list:
    """Per host, op and dtype, each GPU pair's busbw at the largest size its runs share, with the pair's
    path and NUMA nodes from the fingerprint, and the slowest pair named."""
    entries = [e for e in comparison.runs if e.run.suite == "collectives" and len(e.run.gpus or []) == 2
               and e.params["op"] != "sendrecv"]
    by_kind = {}
    for e in entries:
        by_kind.setdefault((e.host.name, e.params["op"], e.params["dtype"]), []).append(e)
    rows, lines = [], []
    for (host, op, dtype), group in sorted(by_kind.items()):
        sizes = {}
        for e in group:
            sizes.setdefault(tuple(e.run.gpus), set()).add(e.params["size_bytes"])
        size = max(set.intersection(*sizes.values()), default=None)
        pairs = {}
        for e in group:
            if e.params["size_bytes"] == size:
                pairs.setdefault(tuple(e.run.gpus), []).append(e)
        spreads = {pair: T.pooled_spread(members, "busbw_gbps") for pair, members in pairs.items()}
        spreads = {pair: value for pair, value in spreads.items() if value is not None}
        if not spreads:
            continue
        fingerprint = group[0].host.fingerprint
        for (a, b), value in sorted(spreads.items()):
            path, (node_a, node_b) = pair_path(fingerprint, a, b)
            rows.append([host, op, dtype, human_bytes(size), f"{a} – {b}", path or "-",
                         f"{node_a if node_a is not None else '-'}, {node_b if node_b is not None else '-'}", T.spread(value)])
        slowest, fastest = min(spreads, key=lambda pair: spreads[pair].median), max(spreads, key=lambda pair: spreads[pair].median)
        if len(spreads) > 1:
            lines.append(f"{host}, {op} {dtype} {human_bytes(size)}: the slowest pair is {pair_label(fingerprint, *slowest)} at "
                         f"{spreads[slowest].median:.3g} GB/s busbw, {spreads[slowest].median / spreads[fastest].median:.0%} of the "
                         f"fastest, {pair_label(fingerprint, *fastest)} at {spreads[fastest].median:.3g} GB/s.")
    if not rows:
        return []
    return [Heading(3, "GPU pairs"), *(Paragraph(line) for line in lines),
            Table(["host", "op", "dtype", "size", "GPUs", "path (topo -m)", "NUMA nodes", "busbw GB/s median [p5, p95]"], rows)]
