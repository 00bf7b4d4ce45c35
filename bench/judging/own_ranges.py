"""The expected ranges this project measured itself, made from its bundles (benchmarks/expected_ranges.py
writes them into each suite's expected.json): a row per suite, figure, GPU model, link and key, the
key being everything a range must share with a figure (ranges.py): its ranks, its nodes (emulated or
not), NCCL's algorithm, protocol and env as its plan entry asked, the path between its GPUs, its
dtype, its recipe, and its size: each message or copy size of its own from 1 MiB, one class from
64 MiB to 1 GiB and one from 1 GiB up (the link's bandwidth has levelled off there).

How wide a row is, the rule docs/report.md states: from the lowest of its runs' medians to the
highest (every launch and bundle of that GPU model), each median m widened by the band either way
(m(1 - BAND) to m(1 + BAND), ranges.BAND) or, where wider, to within the launch-to-launch spread s of
its kind (m / (1 + s) to m(1 + s)), or to its run's own p5-p95 where that is wider still. A kind is
what moves alike from launch to launch on any GPU: the figure's suite and unit, the path between the
GPUs, below or from 64 MiB, and the recipe but for its micro-batches a step. Its spread s is the
largest ratio, less one, between two launches' medians of one configuration of that kind in the
bundles; a kind no configuration of which was launched twice has the band alone, which is then the
narrowest a range is."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from bench import suites
from bench.common.reference import nvlink_row
from bench.common.run import Run
from bench.common.units import human_bytes
from bench.judging import shared_machine
from bench.judging.host import Host
from bench.judging.normal import crossed, link_key, nccl_key, path_between
from bench.judging.ranges import BAND

MIB, GIB = 1 << 20, 1 << 30
SMALLEST = MIB  # a smaller message or copy measures its call's latency more than the link: no range
CLASS_FROM = 64 * MIB  # from here a range holds a class of sizes; below, each size its own
SIZE_CLASSES = ((CLASS_FROM, GIB - 1), (GIB, None))
BATCH = ("grad_accum",)  # a recipe's params that a kind leaves out: how many micro-batches a step takes


@dataclass(frozen=True)
class _Point:
    """One figure of one run, placed: the row it goes into, its kind and configuration, its launch."""

    row: tuple  # (suite, figure, GPU model, link, key as sorted items)
    kind: tuple  # (suite, unit, path, size below CLASS_FROM or not, recipe less BATCH): what shares a launch-to-launch spread
    configuration: tuple  # the row and the figure's own size and dtype
    launch: tuple  # (source, host, launch id, repeat)
    value: float
    spread: tuple  # its run's p5 and p95, or its value twice
    dtype: "str | None"


def measured_ranges(bundles: list) -> list[dict]:
    """Expected-range rows from this project's bundles, (source name, bundle) each, as expected.json
    holds them, each with its suite's name under "suite"."""
    points = [point for source, bundle in bundles for point in _points(source, bundle)]
    spreads = _launch_spreads(points)
    groups: dict = defaultdict(list)
    for point in points:
        groups[point.row].append(point)
    rows = []
    for (suite, figure, gpu, link, key), found in sorted(groups.items(), key=lambda item: repr(item[0])):
        spread, configurations = spreads.get(found[0].kind, (0.0, 0))
        low = min(min(p.value * (1 - BAND), p.value / (1 + spread), p.spread[0]) for p in found)
        high = max(max(p.value * (1 + BAND), p.value * (1 + spread), p.spread[1]) for p in found)
        sources = list(dict.fromkeys(p.launch[0] for p in found))
        rows.append({"suite": suite, "figure": figure, "gpu": gpu, "link": link, "low": _outward(low, down=True),
                     "high": _outward(high, down=False), "key": _with_dtypes(dict(key), {p.dtype for p in found} - {None}),
                     "basis": "measured", "sources": sources, "runs": len(found),
                     "derivation": _derivation(found, spread, configurations)})
    return rows


def _launch_spreads(points: list) -> dict:
    """kind -> (the largest ratio less one between two launches' medians of one configuration of that
    kind, how many of its configurations were measured in two launches or more)."""
    medians: dict = defaultdict(dict)
    kinds = {}
    for point in points:
        medians[point.configuration][point.launch] = point.value
        kinds[point.configuration] = point.kind
    found: dict = {}
    for configuration, launches in medians.items():
        if len(launches) < 2:
            continue
        values = list(launches.values())
        kind = kinds[configuration]
        spread, count = found.get(kind, (0.0, 0))
        found[kind] = (max(spread, max(values) / min(values) - 1), count + 1)
    return found


def _points(source: str, bundle: dict) -> list:
    """Every figure of the bundle's GPU runs that a range may hold, placed."""
    one_machine = {name for names in shared_machine.shared(bundle["hosts"]) for name in names}
    points = []
    for host in bundle["hosts"]:
        facts = Host.of(host.get("fingerprint"))
        names = set(facts.gpu_names)
        if len(names) != 1 or None in names:
            continue
        gpu = names.pop()
        busy = shared_machine.busy_shares(host["launches"])
        for run in map(Run, host["runs"]):
            if run.ok and run.launch_id not in busy:
                nodes = run.transport.get("nodes") or {}
                apart = nodes.get("count", 1) > 1 and not nodes.get("emulated") and host["name"] not in one_machine
                points += _placed((source, host["name"], run.launch_id, run.repeat), run, facts, gpu, apart)
    return points


def _placed(launch: tuple, run: Run, host: Host, gpu: str, apart: bool) -> list:
    """The run's figures, each with its row, kind and configuration; those no range may hold left out:
    no value, gloo's (no link the rows name), a size below SMALLEST, sockets between machines (apart:
    the network between them is no field of a key, so its range would hold loopback's figures too)."""
    suite = suites.get(run.suite)
    placed = []
    for figure in suite.figures(run):
        gpus = crossed(run, figure, host)
        path = path_between(run, host, gpus, suite.peer_copies(run))
        if figure.value is None or figure.value <= 0 or (run.world_size > 1 and path is None) or (path == "net_socket" and apart):
            continue
        key = [("ranks", run.world_size)] + [(name, figure.key[name]) for name in ("nodes", "algorithm", "protocol")
                                              if figure.key.get(name) not in (None, 1)]
        if figure.key.get("env"):
            key.append(("env", tuple(sorted(figure.key["env"].items()))))
        key += [(name, value) for name, value in nccl_key(run, host).items() if value]
        if path:
            key.append(("transport", path))
        size = figure.key.get("size_bytes")
        if size is not None:
            bounds = _size_bounds(size)
            if bounds is None:
                continue
            key += [("size_bytes_min", bounds[0])] + ([("size_bytes_max", bounds[1])] if bounds[1] else [])
        recipe = tuple(figure.key["params"].items()) if "params" in figure.key else None
        if recipe is not None:
            key.append(("params", recipe))
        link = (nvlink_row(gpu) or "nvlink") if path == "nvlink" else "socket-loopback" if path == "net_socket" else link_key(host, gpus, path)
        row = (run.suite, figure.name, gpu, link or "unknown", tuple(key))
        kind = (run.suite, figure.unit, path, None if size is None else size < CLASS_FROM,
                recipe and tuple(item for item in recipe if item[0] not in BATCH))
        spread = figure.spread if figure.spread and None not in figure.spread else (figure.value, figure.value)
        placed.append(_Point(row, kind, (row, size, figure.key.get("dtype")), launch, figure.value, spread, figure.key.get("dtype")))
    return placed


def _size_bounds(size: int) -> "tuple | None":
    """The sizes a range of this size holds: itself below CLASS_FROM, its class from there; None below SMALLEST."""
    if size < SMALLEST:
        return None
    if size < CLASS_FROM:
        return size, size
    return next((low, high) for low, high in SIZE_CLASSES if low <= size <= (high or size))


def _derivation(found: list, spread: float, configurations: int) -> str:
    """How the row was made, in words: its runs, launches and bundles, and what widened each median."""
    launches = len({p.launch for p in found})
    suite, unit, path, small, recipe = found[0].kind
    kind = (f"{suite} figures in {unit}" + (f" over {path}" if path else "")
            + ("" if small is None else f" {'below' if small else 'from'} {human_bytes(CLASS_FROM)}")
            + (" of this recipe (any grad_accum)" if recipe else ""))
    seen = (f"{kind} moved by up to {spread:.1%} between two launches of one configuration ({configurations} configuration(s) "
            "measured in two launches or more)" if configurations else f"no configuration of its kind ({kind}) was measured in two launches")
    band = f"by {BAND:.0%} either way (bench/judging/ranges.py BAND)"
    widened = (f"{band} or, where further, to within {spread:.1%} of it (m / {1 + spread:.3f} to m x {1 + spread:.3f}), the "
               "launch-to-launch spread of its kind" if spread > BAND else band)
    return (f"{len(found)} run(s) in {launches} launch(es) of this project's bundles: from the lowest median to the highest, each "
            f"widened {widened}, or to its run's own p5-p95 where wider; {seen}")


def _with_dtypes(key: dict, dtypes: set) -> dict:
    """The row's key as expected.json holds it: its env and params objects, the dtypes its runs had (one, or a list)."""
    for name in ("env", "params"):
        if name in key:
            key[name] = dict(key[name])
    if dtypes:
        key["dtype"] = sorted(dtypes) if len(dtypes) > 1 else dtypes.pop()
    return key


def _outward(value: float, down: bool) -> float:
    """value at 4 significant digits, rounded away from the range's middle."""
    scale = 10 ** (3 - math.floor(math.log10(value)))
    return (math.floor if down else math.ceil)(value * scale) / scale
