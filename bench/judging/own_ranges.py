"""The expected ranges this project measured itself, made from its bundles: per suite, figure, GPU
model, link and key (ranks, path, message size class, recipe), from the lowest of the runs' medians
to the highest, each widened by BAND either way or to its run's own p5-p95 where that is wider.
benchmarks/expected_ranges.py writes them into each suite's expected.json."""

from __future__ import annotations

import math

from bench import suites
from bench.common.reference import nvlink_row
from bench.common.run import Run
from bench.common.transports import setting_key
from bench.judging.host import Host
from bench.judging.normal import crossed, link_key, path_between
from bench.judging.ranges import BAND

MIB, GIB = 1 << 20, 1 << 30
# Message sizes a measured range holds for: 64 MiB up to 1 GiB, and 1 GiB up; smaller ones measure
# latency more than the link.
SIZE_CLASSES = ((64 * MIB, GIB - 1), (GIB, None))


def measured_ranges(bundles: list) -> list[dict]:
    """Expected-range rows from this project's bundles, (source name, bundle) each, as expected.json
    holds them, each with its suite's name under "suite". Runs on several nodes, or under an
    algorithm, GPUs or env of their plan's, are left out: a range is one box's, under NCCL's own choices."""
    groups: dict = {}
    for source, bundle in bundles:
        for host in bundle["hosts"]:
            facts = Host.of(host.get("fingerprint"))
            names = set(facts.gpu_names)
            if len(names) != 1 or None in names:
                continue
            gpu = names.pop()
            for run in map(Run, host["runs"]):
                if run.ok and not setting_key(run):
                    _add(groups, source, run, facts, gpu)
    return [{"suite": suite, "figure": figure, "gpu": gpu, "link": link, "low": _outward(min(g["low"]), down=True),
             "high": _outward(max(g["high"]), down=False), "key": _with_dtypes(dict(key), g["dtypes"]), "basis": "measured",
             "sources": g["sources"], "runs": g["runs"],
             "derivation": f"{g['runs']} run(s) of this project's bundles: from the lowest median to the highest, each widened "
                           f"by {BAND:.0%} either way (bench/judging/ranges.py BAND) or to its run's own p5-p95 where wider"}
            for (suite, figure, gpu, link, key), g in sorted(groups.items(), key=lambda item: repr(item[0]))]


def _add(groups: dict, source: str, run: Run, host: Host, gpu: str) -> None:
    """The run's figures, each into the group of its row."""
    suite = suites.get(run.suite)
    for figure in suite.figures(run):
        gpus = crossed(run, figure, host)
        path = path_between(run, host, gpus, suite.peer_copies(run))
        if figure.value is None or figure.value <= 0 or (run.world_size > 1 and path is None):  # gloo: no link the rows name
            continue
        key = [("ranks", run.world_size)] + ([("transport", path)] if path else [])
        size = figure.key.get("size_bytes")
        if size is not None:
            bounds = next(((low, high) for low, high in SIZE_CLASSES if low <= size <= (high or size)), None)
            if bounds is None:
                continue
            key += [("size_bytes_min", bounds[0])] + ([("size_bytes_max", bounds[1])] if bounds[1] else [])
        if "params" in figure.key:
            key.append(("params", tuple(figure.key["params"].items())))
        link = (nvlink_row(gpu) or "nvlink") if path == "nvlink" else "socket-loopback" if path == "net_socket" else link_key(host, gpus, path)
        group = groups.setdefault((run.suite, figure.name, gpu, link or "unknown", tuple(key)),
                                  {"low": [], "high": [], "sources": [], "runs": 0, "dtypes": set()})
        low, high = figure.spread if figure.spread and None not in figure.spread else (figure.value, figure.value)
        group["low"].append(min(figure.value * (1 - BAND), low))
        group["high"].append(max(figure.value * (1 + BAND), high))
        group["runs"] += 1
        if "dtype" in figure.key:
            group["dtypes"].add(figure.key["dtype"])
        if source not in group["sources"]:
            group["sources"].append(source)


def _with_dtypes(key: dict, dtypes: set) -> dict:
    """The row's key as expected.json holds it: its params an object, the dtypes its runs had (one, or a list)."""
    if "params" in key:
        key["params"] = dict(key["params"])
    if dtypes:
        key["dtype"] = sorted(dtypes) if len(dtypes) > 1 else dtypes.pop()
    return key


def _outward(value: float, down: bool) -> float:
    """value at 4 significant digits, rounded away from the range's middle."""
    scale = 10 ** (3 - math.floor(math.log10(value)))
    return (math.floor if down else math.ceil)(value * scale) / scale
