"""Measured: a host's all_reduce sweeps as links (bench/common/allreduce.py's Link), the algorithm a
run asked NCCL for, and the topology each measured DDP run's all-reduces crossed: the sweep at its
preset, world size and node count, else the sweeps (or the link table's rows) of the links inside and
between its nodes."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from bench import suites
from bench.common.allreduce import ALGORITHMS, TABLE, Link, Topology, usable_curve
from bench.common.links import link_summary
from bench.common.reference import nvlink_row
from bench.common.run import Run
from bench.common.units import human_bytes
from bench.suites.ddp.derived import REDUCE_DTYPES
from bench.suites.ddp.predict.runs import node_count, nodes_of
from bench.suites.training.derived import collective_curves, curve_key


def algorithm_of(run: Run) -> "str | None":
    """The all-reduce algorithm the run asked NCCL for: its plan entry's algorithm axis, else what its
    NCCL_ALGO allowed where it allowed one of ring and tree alone (Ring, Tree, ^Ring, or the
    per-collective allreduce:tree); None: NCCL's choice."""
    if run.transport.get("algorithm") in ALGORITHMS:
        return run.transport["algorithm"]
    said = str((run.transport.get("env") or {}).get("NCCL_ALGO") or "").lower().replace(" ", "")
    if ":" in said:  # per collective: "allreduce:tree;allgather:ring"
        said = next((part.partition(":")[2] for part in said.split(";") if part.partition(":")[0] == "allreduce"), "")
    names = [name for name in said.lstrip("^").split(",") if name]
    allowed = [a for a in ALGORITHMS if (a not in names) == said.startswith("^")]
    return allowed[0] if said and len(allowed) == 1 else None


def table_link_of(fingerprint: "dict | None", preset: str) -> "Link | None":
    """The link table's row for the path a preset takes on this host, where the table has one."""
    if not fingerprint:
        return None
    summary = link_summary(fingerprint)
    gpu = (summary.get("gpu") or "").upper()
    if preset == "default" and summary["link_class"] == "nvlink":
        name = nvlink_row(gpu)
        return TABLE[name] if name else None
    label = summary["link_label"]
    pcie = label.rsplit("PCIe ", 1)[-1].split(" x") if "PCIe " in label else None
    if preset == "socket":
        return TABLE["socket-loopback"]
    if pcie and len(pcie) == 2 and preset in ("default", "p2p_off"):
        gen, width = pcie[0].split(".")[0], pcie[1]
        return TABLE.get(f"pcie{gen}-x{width}-{'p2p' if preset == 'default' else 'host'}")
    return None


def ran_algorithm(run: Run) -> "str | None":
    """The algorithm NCCL's TUNING lines say it ran for the run's all-reduces, where they name one of ring
    and tree alone; None where they name none, or several."""
    ran = {row["algorithm"].lower() for row in run.transport.get("nccl_tuning") or [] if row["function"] in (None, "AllReduce")}
    return next(iter(ran)) if len(ran) == 1 and ran <= set(ALGORITHMS) else None


def _ran_by_size(runs: list[Run], nodes: dict) -> dict:
    """curve_key -> {size: the algorithm NCCL ran there (ran_algorithm)} of the runs that timed one all_reduce call."""
    found: dict = {}
    for run in runs:
        suite = suites.registry().get(run.suite)
        timed = suite.timed_collective(run) if suite is not None and run.ok else None
        if timed is not None and timed[0] == "all_reduce":
            found.setdefault(curve_key(run, nodes), {})[timed[2]] = ran_algorithm(run)
    return found


def _top(ran: dict) -> "tuple[str, int] | None":
    """(the algorithm NCCL's choice ran at a sweep's largest size, the least size from which it ran it at
    every size up), from its TUNING lines; None where they do not say ring or tree there."""
    sizes = sorted(ran, reverse=True)
    top = ran[sizes[0]] if sizes else None
    if top is None:
        return None
    least = sizes[0]
    for size in sizes:
        if ran[size] != top:
            break
        least = size
    return top, least


class Curves:
    """The host's all_reduce sweeps as links: (preset, world size, nodes, algorithm) -> the dtype the
    gradients are reduced in -> its usable points; the unusable ones said once (`note`). A sweep of
    NCCL's own choice also stands for the algorithm its TUNING lines say NCCL ran at its largest sizes,
    with those sizes' points, where no sweep asked for that algorithm (`chosen`: those keys, with
    the least size)."""

    def __init__(self, host: dict, note: Callable[[str], None]) -> None:
        nodes = nodes_of(host)
        sweeps = [Run(run) for run in host["runs"]]  # collective_curves keeps the runs that timed one all_reduce call
        self.found: dict = {}
        self.chosen: dict = {}
        upper: dict = {}
        for algorithm in (None, *ALGORITHMS):
            chosen = [r for r in sweeps if algorithm_of(r) == algorithm]
            ran = _ran_by_size(chosen, nodes) if algorithm is None else {}
            for key, dtypes in collective_curves(chosen, "all_reduce", nodes).items():
                preset, ranks, count, setting = key[0], key[1], key[2], dict((part[0], part[1:]) for part in key[3:])
                if "protocol" in setting or "gpus" in setting:  # a protocol forced, or one pair of GPUs: not the link's own curve
                    continue
                count = setting["nodes"][0] if "nodes" in setting else count
                kept = {dtype: usable_curve(curve) for dtype, curve in dtypes.items()}
                for dtype, curve in dtypes.items():
                    if len(kept[dtype]) < len(curve):
                        note(f"the all_reduce sweep of {preset} at {ranks} rank(s) ({dtype}): {len(curve) - len(kept[dtype])} "
                             "point(s) with a size or time of 0 left out")
                kept = {dtype: curve for dtype, curve in kept.items() if curve}
                if kept:
                    self.found[preset, ranks, count, algorithm] = kept
                top = _top(ran.get(key, {}))
                if kept and top is not None:
                    upper[preset, ranks, count, top[0]] = top[1], {dtype: [p for p in curve if p[0] >= top[1]]
                                                                  for dtype, curve in kept.items()}
        for key, (least, kept) in upper.items():
            if key not in self.found:  # a sweep that asked for the algorithm wins
                self.found[key], self.chosen[key] = kept, least

    def link(self, preset: str, ranks: int, nodes: int, algorithm: "str | None", run: Run, name: str, title: str) -> "Link | None":
        dtypes = self.found.get((preset, ranks, nodes, algorithm))
        if not dtypes:
            return None
        params = run.params
        reduced = "bfloat16" if params.get("weights_dtype") == "bfloat16" else REDUCE_DTYPES[params.get("grad_reduce_dtype", "fp32")]
        curve = dtypes.get(reduced) or max(dtypes.values(), key=lambda c: c[-1][0])
        least = self.chosen.get((preset, ranks, nodes, algorithm))
        if least is not None:
            said = f"NCCL's choice, which ran {algorithm} from {human_bytes(least)}"
            name, title = f"{name.removesuffix(')')}: {said})", f"{title} ({said})"
        return Link.of_curve(name, title, curve, ranks)

    def one_node(self, preset: str, ranks: int, algorithm: "str | None", run: Run) -> "Link | None":
        """The preset's sweep on one node at `ranks`, else at the nearest world size it ran (carried): of
        the algorithm asked for, else of NCCL's choice (a link's bandwidth either way)."""
        for chosen in dict.fromkeys((algorithm, None)):
            sizes = sorted((abs(r - ranks), r) for p, r, n, a in self.found if p == preset and n == 1 and a == chosen and r > 1)
            for _, r in sizes[:1]:
                at = "" if r == ranks else f" at {r} ranks"
                return self.link(preset, r, 1, chosen, run, f"{preset} (measured all_reduce{at})",
                                 f"{preset}, this bundle's all_reduce sweep{at}")
        return None


@dataclass(frozen=True)
class Crossed:
    """What a host's runs of one preset, world size, node count and algorithm crossed: the topology
    their all-reduces are replayed on, its name, and the table's row for that path on one node
    (which the bundle's measured curve replaces in the predictions of that row)."""

    topology: Topology
    name: str
    row: "Link | None" = None


def crossed_key(run: Run, nodes: dict) -> tuple:
    """(preset, world size, nodes, algorithm): what decides the path a run's all-reduces took."""
    return run.preset, run.world_size, node_count(run, nodes), algorithm_of(run)


def _network_preset(run: Run) -> "str | None":
    """The preset whose one-node path is the network between the run's nodes."""
    used, preset = set(run.transport["nccl_used"]), run.preset
    if preset == "socket" or "NET/Socket" in used:
        return "socket"
    if preset == "ib" or "NET/IB" in used:
        return "ib"
    return None


def _crossed(host: dict, run: Run, curves: Curves, nodes: int) -> "Crossed | None":
    """The topology a measured run's all-reduces crossed: the bundle's sweep at its preset, world size
    and node count; else, on one node, the preset's sweep at another world size or the table's row;
    on several, the sweeps (else rows) of the link within a node and of the network between them."""
    preset, ranks, algorithm = run.preset, run.world_size, algorithm_of(run)
    if ranks % nodes:
        return None  # its ranks do not fill its nodes: no topology to replay on
    fingerprint = host.get("fingerprint")
    here = f", {Topology(ranks // nodes, nodes).shape}" if nodes > 1 else ""
    exact = curves.link(preset, ranks, nodes, algorithm, run, f"{preset}{here} (measured all_reduce)",
                        f"{preset}{here}, this bundle's all_reduce sweep")
    if nodes == 1:
        row = table_link_of(fingerprint, preset)
        if exact is not None:
            return Crossed(Topology(ranks, measured=exact), exact.name, row)
        carried = curves.one_node(preset, ranks, algorithm, run)
        if carried is not None:
            return Crossed(Topology.flat(carried, ranks, algorithm), carried.name, row)
        return Crossed(Topology.flat(row, ranks, algorithm), row.name, row) if row is not None else None
    per_node = ranks // nodes
    if exact is not None:
        return Crossed(Topology(per_node, nodes, algorithm=algorithm, measured=exact), exact.name)
    intra = curves.one_node("default", per_node, algorithm, run) or table_link_of(fingerprint, "default")
    between = _network_preset(run)
    network = (curves.link(preset, nodes, nodes, algorithm, run, f"{preset} between nodes (measured all_reduce)",
                           f"{preset} between nodes, this bundle's all_reduce sweep")
               or (curves.one_node(between, 2, algorithm, run) if between else None)
               or (table_link_of(fingerprint, between) if between else None))
    if intra is None or network is None:
        return None
    return Crossed(Topology(per_node, nodes, intra, network, algorithm), f"{intra.name} / {network.name}, {Topology(per_node, nodes).shape}")


def crossed_by_runs(host: dict, runs: list, curves: Curves) -> dict:
    """crossed_key -> what this host's runs crossed there (Crossed), or None."""
    nodes = nodes_of(host)
    found: dict = {}
    for run in runs:
        key = crossed_key(run, nodes)
        if key[1] >= 2 and key not in found:
            found[key] = _crossed(host, run, curves, key[2])
    return found


def sweeps_of_rows(crossed: dict) -> dict:
    """Table row name -> {ranks: the bundle's sweep of that row's path on one node at those ranks,
    named as the row}: where this host measured a row's path, its sweep wins over the row."""
    found: dict = {}
    for path in crossed.values():
        if path is None or path.row is None:
            continue
        row, sweep = path.row, path.topology.measured or path.topology.intra
        if sweep is not None and sweep is not row:
            found.setdefault(row.name, {})[sweep.ranks] = replace(
                sweep, name=row.name, level=row.level, transport=row.transport,
                title=f"{row.title}, as this bundle's all_reduce sweep measured it")
    return found
