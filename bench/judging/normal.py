"""Is my number normal? A run's figures against the expected ranges of
its GPU model and link (bench/common/reference.py EXPECTED, each row sourced): within, below (with
the likely causes this bundle shows: a x4 or chipset slot, a riser trained down, a sleeping link, a
power cap), above, or no reference. The report's "Is my number normal?" section and `ddpbench run`'s
summary read it; each suite says which of its runs' figures the table holds (Suite.judged_figures).
The ranges this project measured itself come from its bundles by measured_ranges."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from bench import suites
from bench.common.links import link_summary, pcie_links
from bench.common.reference import BAND, EXPECTED, GIB, LARGE_BYTES, SOURCES, nvlink_row
from bench.common.run import Run
from bench.common.transports import setting_key
from bench.common.units import human_bytes
from bench.judging.counters import HELD_BACK_FLAG_FRACTION, links_below_slot
from bench.judging.health import acs_on_gpu_path, iommu_translated
from bench.suites.training import TrainingSuite

NO_REFERENCE = "no reference"
USUAL_CAUSES = ("a x4 or chipset slot, a riser trained down, a sleeping link, a power cap (this bundle shows none of "
                "them: check the slot's lanes in the board's manual, and run with nvidia-ml-py installed so the link "
                "and clocks are read while measuring)")


@dataclass(frozen=True)
class Judgement:
    verdict: str  # "within", "below", "above" or NO_REFERENCE
    figure: "str | None" = None  # the row's kind of figure: h2d_copy_gbps, allreduce_busbw_gbps, ddp_step_time_s ...
    value: "float | None" = None  # the run's median
    row: "dict | None" = None  # the expected range it was judged against
    why: str = ""  # what the verdict rests on: the causes of a "below", the missing piece of "no reference"
    causes: tuple = field(default=())

    @property
    def unit(self) -> str:
        return unit_of(self.figure or "")

    def expected(self) -> str:
        """'22.7-27.7 GB/s (NVIDIA GeForce RTX 4090, pcie4-x16; nvbandwidth-15)'."""
        row = self.row
        return f"{row['low']:.4g}-{row['high']:.4g} {self.unit} ({row['gpu']}, {row['link']}; {', '.join(row['sources'])})"


def unit_of(figure: str) -> str:
    return "GB/s" if figure.endswith("_gbps") else "of ideal" if figure.endswith("_fraction") else "s"


def higher_is_better(figure: str) -> bool:
    """A bandwidth or a scaling efficiency; a time is better lower."""
    return figure.endswith(("_gbps", "_fraction"))


def judge(run: Run, fingerprint: "dict | None") -> "Judgement | None":
    """The run's first figure (its suite's judged_figure) against its expected range; None where its
    suite judges no figure of it."""
    found = judgements(run, fingerprint)
    return found[0] if found else None


def judgements(run: Run, fingerprint: "dict | None") -> list:
    """Each figure of the run its suite judges (Suite.judged_figures), against its expected range."""
    return [_judge(run, fingerprint, *found) for found in suites.get(run.suite).judged_figures(run)]


def _judge(run: Run, fingerprint: "dict | None", figure: str, value: "float | None", size: "int | None") -> Judgement:
    fp = fingerprint or {}
    gpus = _gpus_of(run, fp)
    names = {((fp.get("gpus") or [])[i:i + 1] or [{}])[0].get("name") for i in gpus}
    if value is None:
        return Judgement(NO_REFERENCE, figure, None, why="the run has no median")
    if not fp.get("gpus"):
        return Judgement(NO_REFERENCE, figure, value, why="no GPU: the expected ranges are per GPU model")
    if len(names) != 1 or None in names:
        return Judgement(NO_REFERENCE, figure, value, why="GPUs of different or unknown models")
    gpu, path = names.pop(), _path(run, fp)
    alike = [row for row in EXPECTED if row["figure"] == figure and row["gpu"] == gpu and row.get("transport") in (None, path)
             and row.get("ranks") in (None, run.world_size)
             and all(run.params.get(key) == want for key, want in (row.get("config") or {}).items())]
    rows = [row for row in alike if _size_fits(row, size)]
    if not rows:
        what = f"{figure} of {gpu}" + (f" over {path}" if path else "") + f" at {run.world_size} rank(s)"
        if alike:  # a small message or copy measures latency more than the link
            smallest = min(row.get("size_bytes_min", 1) for row in alike)
            return Judgement(NO_REFERENCE, figure, value, why=f"{what}: ranges hold {human_bytes(smallest)} and up")
        return Judgement(NO_REFERENCE, figure, value, why=f"no expected range of {what}")
    here = _link_key(fp, gpus, path)
    row = next((r for r in rows if r["link"] == here), rows[0])
    if row["low"] <= value <= row["high"]:
        return Judgement("within", figure, value, row)
    if (value < row["low"]) == higher_is_better(figure):
        causes = tuple(likely_causes(run, fp, row, gpus, path)) or (USUAL_CAUSES,)
        return Judgement("below", figure, value, row, why="; ".join(causes), causes=causes)
    return Judgement("above", figure, value, row)


def judge_host(host: dict) -> list:
    """(run, Judgement) for every figure of every ok run of the host that its suite judges."""
    return [(run, found) for run in map(Run, host["runs"]) if run.ok for found in judgements(run, host.get("fingerprint"))]


def source_line(name: str) -> str:
    """'nvbandwidth-15: NVIDIA/nvbandwidth issue #15 ... (https://...)', with a bundle's id, date and machine."""
    source = SOURCES[name]
    measured = f"bundle {source['bundle']} of {source['date']} on {source['machine']}; " if "bundle" in source else ""
    return f"{name}: {source['title']} ({measured}{source.get('url') or source['path']})"


# --- What the run touched ---------------------------------------------------------------------

def _gpus_of(run: Run, fp: dict) -> list[int]:
    """The GPU indices a run's figure crossed, as its suite says (Suite.gpus_crossed)."""
    return suites.get(run.suite).gpus_crossed(run, len(fp.get("gpus") or []))


def _path(run: Run, fp: dict) -> "str | None":
    """The path the run's data took between GPUs, as the link rows name it: p2p, nvlink, host_memory,
    net_ib, net_socket (over several nodes, the one between them); None for a copy between host and
    device, or one rank."""
    nvlink = link_summary(fp)["link_class"] == "nvlink"
    if suites.get(run.suite).peer_copies(run):
        ends = [f"GPU{i}" for i in _gpus_of(run, fp)]
        access = (((fp.get("link_load") or {}).get("p2p_access")) or {}).get(ends[0], {}).get(ends[-1]) if ends else None
        return "host_memory" if access is False else "nvlink" if nvlink else "p2p"
    used = set(run.transport["nccl_used"])
    network = (("NET/IB", "net_ib"), ("NET/Socket", "net_socket"))
    if (run.transport.get("nodes") or {}).get("count", 1) > 1:  # over several nodes the network path is the slowest
        return next((path for name, path in network if name in used), None)
    if "P2P" in used:
        return "nvlink" if nvlink else "p2p"
    for name, path in (("SHM", "host_memory"), *network):
        if name in used:
            return path
    return None


def _size_fits(row: dict, size: "int | None") -> bool:
    if size is None:
        return "size_bytes_min" not in row and "size_bytes_max" not in row
    return row.get("size_bytes_min", 0) <= size <= row.get("size_bytes_max", size)


def _pcie(fp: dict, gpus: list[int]) -> list[dict]:
    return [link for link in pcie_links(fp) if link["index"] in gpus]


def _link_key(fp: dict, gpus: list[int], path: "str | None") -> str:
    """This host's PCIe link named as the rows name theirs: pcie4-x16 (-p2p, -host); "" over NVLink (the
    GPU model says its NVLink) or where the link was not read."""
    if path == "nvlink":
        return ""
    known = [(link["gen"], link["width"]) for link in _pcie(fp, gpus) if link["gen"] and link["width"]]
    if not known:
        return ""
    gen, width = min(known)
    return f"pcie{gen}-x{width}" + {"p2p": "-p2p", "host_memory": "-host"}.get(path or "", "")


# --- Why a figure came out below its range ------------------------------------------------------

def likely_causes(run: Run, fp: dict, row: dict, gpus: list[int], path: "str | None") -> list[str]:
    """What this bundle shows that slows the figure: the link asleep while measured, a slot narrower or
    older than the range's, a link trained down under load, a power cap, clocks held back, ACS or an
    IOMMU between GPUs that go peer to peer, ranks split over NUMA nodes."""
    causes = _link_causes(run, fp, row, gpus, path) + _power_causes(run, fp, gpus)
    if path in ("p2p", "nvlink") and (acs_on_gpu_path(fp) or iommu_translated(fp)):
        causes.append("ACS or an IOMMU on the PCIe path between the GPUs (this host's concerns say which)")
    if any(w["code"] == "numa_split" for w in run.warnings):
        causes.append("its ranks split over NUMA nodes (its numa_split warning)")
    return causes


def _link_causes(run: Run, fp: dict, row: dict, gpus: list[int], path: "str | None") -> list[str]:
    causes = []
    asleep = {link["index"]: link for link in links_below_slot(run.gpu_counters, fp)}
    wanted = re.match(r"pcie(\d)-x(\d+)", row["link"])
    for link in _pcie(fp, gpus):
        i, seen = link["index"], asleep.get(link["index"])
        gmax, wmax = link["gen_max"], link["width_max"]
        if seen:
            causes.append(f"GPU{i}'s link ran at {seen['gen']}.0 x{seen['width'] or '?'} at most while measured, its slot "
                          f"allows {gmax}.0 x{wmax}: a sleeping link (a peer copy ran at 3.2 GB/s asleep against 13.1 awake, "
                          "club-3090 #1507)")
        elif wanted and path != "nvlink" and gmax and wmax and (gmax < int(wanted[1]) or wmax < int(wanted[2])):
            causes.append(f"GPU{i} sits in a {gmax}.0 x{wmax} slot, the range is for {wanted[1]}.0 x{wanted[2]}: a x4, chipset "
                          "or older slot (two RTX 4090s on chipset lanes copied 6.3 GB/s peer to peer, "
                          "tinygrad/open-gpu-kernel-modules #44)")
        elif link["loaded"] and gmax and wmax and (link["gen"] < gmax or link["width"] < wmax):
            causes.append(f"GPU{i}'s link trains to {link['gen']}.0 x{link['width']} under load in a {gmax}.0 x{wmax} slot: "
                          "a riser or a slot that trained the link down")
    return causes


def _power_causes(run: Run, fp: dict, gpus: list[int]) -> list[str]:
    causes = []
    for gpu in (fp.get("health") or {}).get("gpus") or []:
        limit, default = gpu.get("power_limit_w"), gpu.get("power_limit_default_w")
        if gpu["index"] in gpus and limit is not None and default and limit < default * 0.99:
            causes.append(f"GPU{gpu['index']}'s power limit is {limit:g} W, below its default {default:g} W: a power cap")
    for gpu in ((run.gpu_counters or {}).get("gpus") or []):
        held = gpu.get("held_back_fraction")
        if gpu["index"] in gpus and held and held > HELD_BACK_FLAG_FRACTION:
            reasons = ", ".join(sorted(gpu.get("held_back_reasons_fraction") or {})) or "no reason given"
            causes.append(f"GPU{gpu['index']}'s clocks were held back in {held:.0%} of the samples while measured ({reasons})")
    return causes


# --- The ranges this project measured: from its bundles --------------------------------------------

# The params a training run's step hangs on: a measured range holds for runs with every one of them alike.
RECIPE_KEYS = ("model", "sharding", "micro_batch", "seq_len", "grad_accum", "precision", "compile", "cuda_graphs", "weights_dtype",
               "activation_checkpointing", "optimizer", "grad_reduce_dtype", "reduce_dtype", "bucket_cap_mb", "allreduce")
# Message sizes a measured busbw range holds for: 64 MiB up to 1 GiB, and 1 GiB up (as the H200 rows).
SIZE_CLASSES = ((LARGE_BYTES, GIB - 1), (GIB, None))


def measured_ranges(bundles: list) -> list[dict]:
    """Expected-range rows from this project's bundles, (source name, bundle) each: per GPU model,
    figure, path, ranks, message size class and training recipe, from the lowest of the runs' medians
    to the highest, each widened by BAND either way or to its run's own p5-p95 where that is wider
    (a scaling efficiency by its step's). Each row as reference.measured takes it: gpu, link,
    figure, low, high, sources, runs, and what a run must match. Runs on several nodes are left out:
    a range is one box's."""
    groups: dict = {}
    for source, bundle in bundles:
        for host in bundle["hosts"]:
            fp = host.get("fingerprint") or {}
            nodes = {launch["id"]: launch.get("nodes", 1) for launch in host["launches"]}
            names = {gpu.get("name") for gpu in fp.get("gpus") or []}
            if len(names) != 1 or None in names:
                continue
            gpu = names.pop()
            for run in map(Run, host["runs"]):
                if not run.ok or nodes.get(run.launch_id, 1) > 1 or setting_key(run):
                    continue  # a range is one box's, under NCCL's own choices: no nodes, algorithm, GPUs or env of the plan's
                if run.world_size > 1 and _path(run, fp) is None:  # ranks on no link the rows name (gloo)
                    continue
                for figure, value, size in suites.get(run.suite).judged_figures(run):
                    key = _range_key(run, fp, gpu, figure, size)
                    if key is not None and value is not None and value > 0:
                        low, high = _run_spread(run, figure, value)
                        group = groups.setdefault(key, {"low": [], "high": [], "sources": [], "runs": 0})
                        group["low"].append(min(value * (1 - BAND), low))
                        group["high"].append(max(value * (1 + BAND), high))
                        group["runs"] += 1
                        if source not in group["sources"]:
                            group["sources"].append(source)
    return [{"gpu": gpu, "link": link, "figure": figure, "low": _outward(min(g["low"]), down=True),
             "high": _outward(max(g["high"]), down=False), "sources": g["sources"], "runs": g["runs"], "match": dict(match)}
            for (gpu, figure, link, match), g in sorted(groups.items(), key=lambda item: repr(item[0]))]


def _range_key(run: Run, fp: dict, gpu: str, figure: str, size: "int | None") -> "tuple | None":
    """(gpu, figure, link, what a run must match) of the row a run's figure belongs to; None for a
    message below the sizes the ranges hold."""
    gpus = _gpus_of(run, fp)
    path = _path(run, fp)
    link = (nvlink_row(gpu) or "nvlink") if path == "nvlink" else "socket-loopback" if path == "net_socket" else _link_key(fp, gpus, path)
    match: list = [("ranks", run.world_size)] + ([("transport", path)] if path else [])
    if size is not None:
        found = next(((low, high) for low, high in SIZE_CLASSES if low <= size <= (high or size)), None)
        if found is None:
            return None
        match += [("size_bytes_min", found[0])] + ([("size_bytes_max", found[1])] if found[1] else [])
    if isinstance(suites.get(run.suite), TrainingSuite) or figure.endswith(("_step_time_s", "_fraction")):
        params = run.params
        match.append(("config", tuple((key, params[key]) for key in RECIPE_KEYS if key in params)))
    return gpu, figure, link or "unknown", tuple(match)


def _run_spread(run: Run, figure: str, value: float) -> tuple[float, float]:
    """The run's own p5 and p95 of the figure: its metric's, of the metric it is the median of; a
    scaling efficiency's, its step's turned over (the efficiency goes as 1 / step)."""
    if figure.endswith("_fraction"):
        step = (run.metric("step_time_s") or {}).get("summary") or {}
        if not (step.get("p5") and step.get("p95")):
            return value, value
        return value * step["median"] / step["p95"], value * step["median"] / step["p5"]
    summary = next((m["summary"] for m in run.metrics.values() if m["summary"]["median"] == value), None)
    return (summary["p5"], summary["p95"]) if summary else (value, value)


def _outward(value: float, down: bool) -> float:
    """value at 4 significant digits, rounded away from the range's middle."""
    scale = 10 ** (3 - math.floor(math.log10(value)))
    return (math.floor if down else math.ceil)(value * scale) / scale
