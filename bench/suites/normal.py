"""Is my number normal? A copy, collectives or DDP run's figure against the expected ranges of its GPU
model and link (bench/common/reference.py EXPECTED, each row sourced): within, below (with the
likely causes this bundle shows: a x4 or chipset slot, a riser trained down, a sleeping link, a
power cap), above, or no reference. The report's "Is my number normal?" section and `ddpbench run`'s
summary read it; each suite says which of its runs' figures the table holds (Suite.judged_figure)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from bench import suites
from bench.common.concerns import acs_on_gpu_path, iommu_translated, pcie_links
from bench.common.reference import EXPECTED, SOURCES
from bench.common.links import link_summary
from bench.common.units import human_bytes

NO_REFERENCE = "no reference"
HELD_BACK_CAUSE_FRACTION = 0.05  # clocks held back in more samples than this while measured: a cause worth naming
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
        return "GB/s" if (self.figure or "").endswith("_gbps") else "s"

    def expected(self) -> str:
        """'22.7-27.7 GB/s (NVIDIA GeForce RTX 4090, pcie4-x16; nvbandwidth-15)'."""
        row = self.row
        return f"{row['low']:.4g}-{row['high']:.4g} {self.unit} ({row['gpu']}, {row['link']}; {', '.join(row['sources'])})"


def judge(run: dict, fingerprint: "dict | None") -> "Judgement | None":
    """The run's figure against its expected range; None where its suite judges no figure of it."""
    found = suites.get(run["suite"]).judged_figure(run)
    if found is None:
        return None
    figure, value, size = found
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
             and row.get("ranks") in (None, run["world_size"])
             and all(run["params"].get(key) == want for key, want in (row.get("config") or {}).items())]
    rows = [row for row in alike if _size_fits(row, size)]
    if not rows:
        what = f"{figure} of {gpu}" + (f" over {path}" if path else "") + f" at {run['world_size']} rank(s)"
        if alike:  # a small message or copy measures latency more than the link
            smallest = min(row.get("size_bytes_min", 1) for row in alike)
            return Judgement(NO_REFERENCE, figure, value, why=f"{what}: ranges hold {human_bytes(smallest)} and up")
        return Judgement(NO_REFERENCE, figure, value, why=f"no expected range of {what}")
    here = _link_key(fp, gpus, path)
    row = next((r for r in rows if r["link"] == here), rows[0])
    higher_is_better = figure.endswith("_gbps")
    if row["low"] <= value <= row["high"]:
        return Judgement("within", figure, value, row)
    if (value < row["low"]) == higher_is_better:
        causes = tuple(likely_causes(run, fp, row, gpus, path)) or (USUAL_CAUSES,)
        return Judgement("below", figure, value, row, why="; ".join(causes), causes=causes)
    return Judgement("above", figure, value, row)


def judge_host(host: dict) -> list:
    """(run, Judgement) for every ok run of the host that its suite judges."""
    judged = [(run, judge(run, host.get("fingerprint"))) for run in host["runs"] if run["status"] == "ok"]
    return [(run, found) for run, found in judged if found is not None]


def source_line(name: str) -> str:
    """'nvbandwidth-15: NVIDIA/nvbandwidth issue #15 ... (https://...)'."""
    source = SOURCES[name]
    return f"{name}: {source['title']} ({source.get('url') or source['path']})"


# --- What the run touched ---------------------------------------------------------------------

def _gpus_of(run: dict, fp: dict) -> list[int]:
    """The GPU indices a run's figure crossed: a copy's ends, else its ranks' GPUs on this host."""
    ends = [int(found[1]) for end in ("src", "dst") if (found := re.fullmatch(r"gpu(\d{1,4})", str(run["params"].get(end))))]
    if run["suite"] == "copy":
        return ends
    if run.get("gpus"):  # the GPUs the plan entry named
        return list(run["gpus"])
    count = len(fp.get("gpus") or [])
    return list(range(min(run["world_size"], count)))


def _path(run: dict, fp: dict) -> "str | None":
    """The path the run's data took between GPUs, as the link rows name it: p2p, nvlink, host_memory,
    net_ib, net_socket (over several nodes, the one between them); None for a copy between host and
    device, or one rank."""
    nvlink = link_summary(fp)["link_class"] == "nvlink"
    if suites.get(run["suite"]).peer_copies(run):
        ends = [f"GPU{i}" for i in _gpus_of(run, fp)]
        access = (((fp.get("link_load") or {}).get("p2p_access")) or {}).get(ends[0], {}).get(ends[-1]) if ends else None
        return "host_memory" if access is False else "nvlink" if nvlink else "p2p"
    used = set(run["transport"]["nccl_used"])
    network = (("NET/IB", "net_ib"), ("NET/Socket", "net_socket"))
    if (run["transport"].get("nodes") or {}).get("count", 1) > 1:  # over several nodes the network path is the slowest
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

def likely_causes(run: dict, fp: dict, row: dict, gpus: list[int], path: "str | None") -> list[str]:
    """What this bundle shows that slows the figure: the link asleep while measured, a slot narrower or
    older than the range's, a link trained down under load, a power cap, clocks held back, ACS or an
    IOMMU between GPUs that go peer to peer, ranks split over NUMA nodes."""
    causes = _link_causes(run, fp, row, gpus, path) + _power_causes(run, fp, gpus)
    if path in ("p2p", "nvlink") and (acs_on_gpu_path(fp) or iommu_translated(fp)):
        causes.append("ACS or an IOMMU on the PCIe path between the GPUs (this host's concerns say which)")
    if any(w["code"] == "numa_split" for w in run.get("warnings", [])):
        causes.append("its ranks split over NUMA nodes (its numa_split warning)")
    return causes


def _link_causes(run: dict, fp: dict, row: dict, gpus: list[int], path: "str | None") -> list[str]:
    causes = []
    window = {gpu["index"]: gpu for gpu in ((run.get("gpu_counters") or {}).get("gpus") or [])}
    wanted = re.match(r"pcie(\d)-x(\d+)", row["link"])
    for link in _pcie(fp, gpus):
        i, seen = link["index"], window.get(link["index"]) or {}
        gmax, wmax = link["gen_max"], link["width_max"]
        if seen.get("pcie_gen_max") and gmax and wmax and (seen["pcie_gen_max"] < gmax or (seen.get("pcie_width_max") or wmax) < wmax):
            causes.append(f"GPU{i}'s link ran at {seen['pcie_gen_max']}.0 x{seen.get('pcie_width_max') or '?'} at most while "
                          f"measured, its slot allows {gmax}.0 x{wmax}: a sleeping link (a peer copy ran at 3.2 GB/s "
                          "asleep against 13.1 awake, club-3090 #1507)")
        elif wanted and path != "nvlink" and gmax and wmax and (gmax < int(wanted[1]) or wmax < int(wanted[2])):
            causes.append(f"GPU{i} sits in a {gmax}.0 x{wmax} slot, the range is for {wanted[1]}.0 x{wanted[2]}: a x4, chipset "
                          "or older slot (two RTX 4090s on chipset lanes copied 6.3 GB/s peer to peer, "
                          "tinygrad/open-gpu-kernel-modules #44)")
        elif link["loaded"] and gmax and wmax and (link["gen"] < gmax or link["width"] < wmax):
            causes.append(f"GPU{i}'s link trains to {link['gen']}.0 x{link['width']} under load in a {gmax}.0 x{wmax} slot: "
                          "a riser or a slot that trained the link down")
    return causes


def _power_causes(run: dict, fp: dict, gpus: list[int]) -> list[str]:
    causes = []
    for gpu in (fp.get("health") or {}).get("gpus") or []:
        limit, default = gpu.get("power_limit_w"), gpu.get("power_limit_default_w")
        if gpu["index"] in gpus and limit is not None and default and limit < default * 0.99:
            causes.append(f"GPU{gpu['index']}'s power limit is {limit:g} W, below its default {default:g} W: a power cap")
    for gpu in ((run.get("gpu_counters") or {}).get("gpus") or []):
        held = gpu.get("held_back_fraction")
        if gpu["index"] in gpus and held and held > HELD_BACK_CAUSE_FRACTION:
            reasons = ", ".join(sorted(gpu.get("held_back_reasons_fraction") or {})) or "no reason given"
            causes.append(f"GPU{gpu['index']}'s clocks were held back in {held:.0%} of the samples while measured ({reasons})")
    return causes
