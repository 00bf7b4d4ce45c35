"""Is my number normal? Each figure a run's suite gives (Suite.figures) against the expected range of
its key on its GPU model (ranges.py: every suite's expected.json, each row sourced): within, below
(with the likely causes this bundle shows: a x4 or chipset slot, a riser trained down, a sleeping
link, a power cap, clocks held back), above, or no reference, saying what is missing. The report's
"Is my number normal?" section (through verdicts.py) and `ddpbench run`'s lines (summary.py) read it."""

from __future__ import annotations

import re
from dataclasses import dataclass

from bench import suites
from bench.common.nccl_log import minor_version
from bench.common.run import Run
from bench.common.units import human_bytes
from bench.judging.counters import HELD_BACK_FLAG_FRACTION, links_below_slot
from bench.judging.health import acs_on_gpu_path, iommu_translated
from bench.judging.host import Host
from bench.judging.ranges import PLAIN, differs, expected, size_fits
from bench.suites.base import Figure, Suite

NO_REFERENCE = "no reference"
VERDICTS = ("within", "below", "above", NO_REFERENCE)
USUAL_CAUSES = ("a x4 or chipset slot, a riser trained down, a sleeping link, a power cap (this bundle shows none of "
                "them: check the slot's lanes in the board's manual, and run with nvidia-ml-py installed so the link "
                "and clocks are read while measuring)")
# The fields of a key a run's plan entry sets beside its suite's params: a figure with a range only
# for other values of these is told which ones the ranges hold.
SETTING = ("dtype", "nodes", "algorithm", "protocol", "env", "nccl")
# What a "no reference" may lack (Judgement.missing): a median, GPUs of one known model, any range of
# the figure, one of its GPU model, a field of its key (ranges.differs' names: ranks, transport,
# params.NAME and SETTING's), or its size.
MISSING = ("median", "gpu", "figure", "gpu model", "ranks", "transport", "params", *SETTING, "size")


@dataclass(frozen=True)
class Judgement:
    verdict: str  # one of VERDICTS
    figure: Figure
    row: "dict | None" = None  # the expected range it was judged against
    why: str = ""  # what the verdict rests on: the causes of a "below", the missing piece of "no reference"
    causes: tuple = ()
    # Of "no reference", what no range holds, as the fields of MISSING: ("algorithm",) where only a
    # range of another algorithm is there, ("gpu",) where none is of its GPU model ...
    missing: tuple = ()

    @property
    def value(self) -> "float | None":
        return self.figure.value

    @property
    def unit(self) -> str:
        return self.figure.unit

    def expected(self) -> str:
        """'22.7-27.7 GB/s (NVIDIA GeForce RTX 4090, pcie4-x16; nvbandwidth-15)'."""
        row = self.row
        return f"{row['low']:.4g}-{row['high']:.4g} {self.unit} ({row['gpu']}, {row['link']}; {', '.join(row['sources'])})"


def judgements(run: Run, host: Host, suite: Suite) -> list:
    """Each figure of the run (its suite's, Suite.figures) against the expected range of its key."""
    return [judge(run, figure, host, suite.peer_copies(run)) for figure in suite.figures(run)]


def judge(run: Run, figure: Figure, host: Host, peer_copies: bool = False) -> Judgement:
    """One figure of the run against the range of its key (peer_copies: the run's bytes went between
    GPUs by CUDA peer copies, Suite.peer_copies)."""
    gpus = crossed(run, figure, host)
    names = {(host.gpu_names[i:i + 1] or [None])[0] for i in gpus}
    if figure.value is None:
        return Judgement(NO_REFERENCE, figure, why="the run has no median", missing=("median",))
    if not host.gpu_names:
        return Judgement(NO_REFERENCE, figure, why="no GPU: the expected ranges are per GPU model", missing=("gpu",))
    if len(names) != 1 or None in names:
        return Judgement(NO_REFERENCE, figure, why="GPUs of different or unknown models", missing=("gpu",))
    gpu, path = names.pop(), path_between(run, host, gpus, peer_copies)
    key = {**figure.key, "transport": path, **nccl_key(run, host)}
    rows = [row for row in expected().rows if row["figure"] == figure.name and row["gpu"] == gpu]
    alike = [row for row in rows if not differs(row["key"], key)]
    fits = [row for row in alike if size_fits(row["key"], key.get("size_bytes"))]
    if not fits:
        why, missing = _missing(f"{figure.name} of {gpu}", key, rows, alike)
        if not rows:
            missing = ("gpu model",) if any(row["figure"] == figure.name for row in expected().rows) else ("figure",)
        return Judgement(NO_REFERENCE, figure, why=why, missing=missing)
    here = link_key(host, gpus, path)
    row = next((r for r in fits if r["link"] == here), fits[0])
    if row["low"] <= figure.value <= row["high"]:
        return Judgement("within", figure, row)
    if (figure.value < row["low"]) == figure.higher_is_better:
        causes = tuple(likely_causes(run, host, row, gpus, path)) or (USUAL_CAUSES,)
        return Judgement("below", figure, row, why="; ".join(causes), causes=causes)
    return Judgement("above", figure, row)


def _missing(figure: str, key: dict, rows: list, alike: list) -> tuple[str, tuple]:
    """What no range holds of a figure, in words and as MISSING's fields: the sizes the ranges of its
    key hold, the setting they hold where only its plan entry's setting (Figure.of) or its dtype
    differs, or the figure at its path and ranks (and the fields of the nearest range that differ)."""
    what = f"{figure}" + (f" over {key['transport']}" if key["transport"] else "") + f" at {key['ranks']} rank(s)"
    if alike:  # a small message or copy measures latency more than the link
        return f"{what}: ranges hold {_sizes(alike)}", ("size",)
    near = [(fields, row) for row in rows if set(fields := differs(row["key"], key)) <= set(SETTING)]
    other_nccl = [row for fields, row in near if fields == ["nccl"]]
    if other_nccl:
        held = " and ".join(sorted({str(row["key"]["nccl"]) for row in other_nccl}))
        return (f"no reference for NCCL {key.get('nccl') or '(version unknown)'}: the ranges of {what} were measured "
                f"with NCCL {held}, whose choice of algorithm may differ"), ("nccl",)
    if not near:
        nearest = min((differs(row["key"], key) for row in rows), key=len, default=[])
        return f"no expected range of {what}", tuple(dict.fromkeys(name.partition(".")[0] for name in nearest))
    fitting = [found for found in near if size_fits(found[1]["key"], key.get("size_bytes"))]
    fields, row = min(fitting or near, key=lambda found: len(found[0]))
    held = _setting({name: row["key"].get(name, PLAIN.get(name)) for name in fields}, fields)
    return (f"no expected range of {what} with {_setting(key, fields)}: ranges hold {held}"
            + ("" if fitting else f", at {_sizes([found[1] for found in near])}"), tuple(fields) + (() if fitting else ("size",)))


def _sizes(rows: list) -> str:
    """"1 MiB, 4 MiB and 64 MiB and up": the sizes of ranges of one size each, then the smallest of a class."""
    single = sorted({row["key"]["size_bytes_min"] for row in rows if row["key"].get("size_bytes_min") == row["key"].get("size_bytes_max")})
    classes = [row["key"].get("size_bytes_min", 1) for row in rows if row["key"].get("size_bytes_min") != row["key"].get("size_bytes_max")]
    said = [human_bytes(size) for size in single] + ([f"{human_bytes(min(classes))} and up"] if classes else [])
    return ", ".join(said[:-1]) + f" and {said[-1]}" if len(said) > 1 else said[0]


def _setting(key: dict, fields: list) -> str:
    """"NCCL's tree algorithm, 2 nodes": the key's values of these fields in words."""
    words = {"dtype": lambda v: " or ".join(v) if isinstance(v, list) else v or "no dtype",
             "nodes": lambda v: "one node" if v == 1 else f"{v} nodes",
             "algorithm": lambda v: f"NCCL's {v} algorithm" if v else "NCCL's own algorithm",
             "protocol": lambda v: f"NCCL's {v} protocol" if v else "NCCL's own protocol",
             "env": lambda v: ", ".join(f"{name}={value}" for name, value in sorted(v.items())) or "no env of the plan's",
             "nccl": lambda v: f"NCCL {v}" if v else "NCCL of unknown version"}
    return ", ".join(words[name](key.get(name, PLAIN.get(name))) for name in fields)


def counts(verdicts: dict) -> str:
    """'6 within, 1 below, 42 no reference' of a count per verdict (a Counter)."""
    return ", ".join(f"{verdicts[v]} {v}" for v in VERDICTS if verdicts[v]) or "none"


# --- What the run touched ---------------------------------------------------------------------

def nccl_key(run: Run, host: Host) -> dict:
    """{"nccl": "2.28"}: the NCCL minor version a run's collectives ran on, where it moved bytes through
    NCCL between ranks (the run's own record of it, else the host's fingerprint); {} elsewhere."""
    if run.world_size < 2 or run.backend != "nccl" or not suites.get(run.suite).moves_collective_data:
        return {}
    version = run.transport.get("nccl_version") or (host.fingerprint.get("software") or {}).get("nccl")
    return {"nccl": minor_version(version)}


def crossed(run: Run, figure: Figure, host: Host) -> list[int]:
    """The indices of the host's GPUs whose links the figure crossed: those its suite names, or its ranks'."""
    if figure.gpus is not None:
        return list(figure.gpus)
    return list(range(min(run.world_size, len(host.gpu_names))))


def path_between(run: Run, host: Host, gpus: list[int], peer_copies: bool) -> "str | None":
    """The path the run's data took between GPUs, as the link rows name it: p2p, nvlink, host_memory,
    net_ib, net_socket (over several nodes, the one between them); None for a copy between host and
    device, or one rank."""
    if peer_copies:
        ends = [f"GPU{i}" for i in gpus]
        access = (((host.fingerprint.get("link_load") or {}).get("p2p_access")) or {}).get(ends[0], {}).get(ends[-1]) if ends else None
        return "host_memory" if access is False else "nvlink" if host.nvlink else "p2p"
    used = set(run.transport["nccl_used"])
    network = (("NET/IB", "net_ib"), ("NET/Socket", "net_socket"))
    if (run.transport.get("nodes") or {}).get("count", 1) > 1:  # over several nodes the network path is the slowest
        return next((path for name, path in network if name in used), None)
    if "P2P" in used:
        return "nvlink" if host.nvlink else "p2p"
    for name, path in (("SHM", "host_memory"), *network):
        if name in used:
            return path
    return None


def link_key(host: Host, gpus: list[int], path: "str | None") -> str:
    """This host's PCIe link named as the rows name theirs: pcie4-x16 (-p2p, -host); "" over NVLink (the
    GPU model says its NVLink) or where the link was not read."""
    if path == "nvlink":
        return ""
    known = [(link["gen"], link["width"]) for link in host.pcie_of(gpus) if link["gen"] and link["width"]]
    if not known:
        return ""
    gen, width = min(known)
    return f"pcie{gen}-x{width}" + {"p2p": "-p2p", "host_memory": "-host"}.get(path or "", "")


# --- Why a figure came out below its range ------------------------------------------------------

def likely_causes(run: Run, host: Host, row: dict, gpus: list[int], path: "str | None") -> list[str]:
    """What this bundle shows that slows the figure: on a path over PCIe, the link asleep while
    measured, a slot narrower or older than the range's, a link trained down under load; a power cap,
    clocks held back; ACS or an IOMMU between GPUs that go peer to peer; ranks split over NUMA nodes."""
    fp = host.fingerprint
    causes = ([] if path == "nvlink" else _link_causes(run, host, row, gpus, path)) + _power_causes(run, fp, gpus)
    if path in ("p2p", "nvlink") and (acs_on_gpu_path(fp) or iommu_translated(fp)):
        causes.append("ACS or an IOMMU on the PCIe path between the GPUs (this host's concerns say which)")
    if any(w["code"] == "numa_split" for w in run.warnings):
        causes.append("its ranks split over NUMA nodes (its numa_split warning)")
    return causes


def _link_causes(run: Run, host: Host, row: dict, gpus: list[int], path: "str | None") -> list[str]:
    causes = []
    asleep = {link["index"]: link for link in links_below_slot(run.gpu_counters, host)}
    wanted = re.match(r"pcie(\d)-x(\d+)", row["link"])
    for link in host.pcie_of(gpus):
        i, seen = link["index"], asleep.get(link["index"])
        gmax, wmax = link["gen_max"], link["width_max"]
        if seen:
            causes.append(f"GPU{i}'s link ran at {seen['gen']}.0 x{seen['width'] or '?'} at most while measured, its slot "
                          f"allows {gmax}.0 x{wmax}: a sleeping link (a peer copy ran at 3.2 GB/s asleep against 13.1 awake, "
                          "club-3090 #1507)")
        elif wanted and gmax and wmax and (gmax < int(wanted[1]) or wmax < int(wanted[2])):
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
