"""Merging bundles into one comparison: every run tagged with the series it belongs to, and each host
and run with what is judged of it (bench/judging/verdicts.py), which the report's sections render.

A series is what one line, bar or table row of the report stands for: a host (by the name its
hosts file gave it), its GPUs and link (bench.common.links.link_summary of its fingerprint) and
the transport the run really used, and whether others were using the machine while it ran (a busy
machine's figures are kept apart from a quiet one's). Runs of the same series from different
bundles pool their samples. With many hosts (a community's collection of bundles) the report groups by GPUs and
link instead, so that a plot keeps a legend a reader can follow.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from dataclasses import dataclass, field

from bench import suites
from bench.common.links import link_summary
from bench.common.run import Run
from bench.common.transports import setting_key
from bench.errors import UserError
from bench.judging import shared_machine
from bench.judging.verdicts import UNJUDGED, HostVerdicts, RunVerdicts, judge
from bench.suites.base import Suite

MAX_HOST_SERIES = 12
# A report draws each series in its figures and tables: 15,000 series (one bundle whose every run
# names another setting) took past a minute, 300 about 7 s of CPU. Past this many, it is refused.
MAX_SERIES = 200
MISMATCH = "⚠ transport mismatch"


@dataclass(frozen=True)
class Ranks:
    """What a report calls its ranks: GPUs; where no host has one, processes (gloo's ranks compute on the CPU)."""

    one: str
    many: str
    cpu: bool


GPU_RANKS, CPU_RANKS = Ranks("GPU", "GPUs", False), Ranks("process", "processes", True)
# Bundles of both: no word of a figure or line shared by their runs calls a CPU's processes GPUs.
MIXED_RANKS = Ranks("GPU or process", "GPUs or processes", False)


@dataclass(frozen=True, order=True)
class Series:
    host: str  # "" when the report groups by GPUs and link
    hardware: str  # HostEntry.hardware: "2x RTX 4090, PCIe 4.0 x4"
    transport: str  # "default via P2P", "p2p_off via SHM", "default (gloo)", "socket via NET/Socket+P2P, 2 emulated nodes x 2, tree"
    mismatch: bool  # the transport NCCL used is not the one the preset asked for
    busy: bool = False  # others took more than shared_machine.BUSY_ABOVE_FRACTION of the CPU during the run or its baseline, or were on its GPUs

    @property
    def machine(self) -> str:
        name = f"{self.host} · {self.hardware}" if self.host else self.hardware
        return f"{name} (busy)" if self.busy else name

    @property
    def transport_label(self) -> str:
        return f"{self.transport} {MISMATCH}" if self.mismatch else self.transport

    @property
    def label(self) -> str:
        return f"{self.machine} · {self.transport_label}"


@dataclass(eq=False)
class HostEntry:
    """One host of one bundle."""

    name: str  # unique in the report: the hosts-file name, plus a hostname hash where two machines share it
    host: dict
    bundle: int  # index into Comparison.bundles
    run_id: str
    tool_version: str
    link: dict
    verdicts: "HostVerdicts | None" = None  # what is judged of it and its runs, once its runs are tagged

    @property
    def fingerprint(self) -> dict:
        return self.host["fingerprint"] or {}

    @functools.cached_property
    def runs(self) -> "list[Run]":
        """Its runs, each read through one view (a suite's baselines are keyed by the view's id)."""
        return [Run(run) for run in self.host["runs"]]

    @property
    def hardware(self) -> str:
        """The link label as a legend wants it: "2x RTX 3090, NVLink NV4"; a batch job over several
        nodes says so ("2 nodes x 1x A100 ..."): the fingerprint is its first node's."""
        label = self.link["link_label"].replace("NVIDIA GeForce ", "").replace("NVIDIA ", "")
        nodes = len((self.host.get("scheduler_job") or {}).get("nodes") or [])
        return f"{nodes} nodes x {label}" if nodes > 1 else label


@dataclass(eq=False)
class RunEntry:
    host: HostEntry
    run: Run
    series: Series
    baseline: "Run | None"  # the run its suite scales it against (ddp: the 1-GPU run of the same host and shape)
    suite: Suite  # the run's suite, asked once

    @property
    def label(self) -> str:
        """What the run measured, in a few words (its suite's label)."""
        return self.suite.label(self.run)

    @property
    def verdicts(self) -> RunVerdicts:
        """What is judged of the run: its figures against their ranges, its clocks, its links below their slot."""
        return self.host.verdicts.runs.get(id(self.run), UNJUDGED)

    @property
    def params(self) -> dict:
        return self.run.params

    def samples(self, metric: str) -> list:
        return self.run.samples(metric)

    @property
    def others_share(self) -> "float | None":
        """The largest CPU share other processes took while this run or its baseline ran (None: not recorded)."""
        return _others_share(self.host.host, [self.run, self.baseline])


def _others_share(host: dict, runs: list) -> "float | None":
    launches = {run.launch_id for run in runs if run is not None}
    shares = [launch.get("cpu_taken_by_others_fraction") for launch in host["launches"] if launch["id"] in launches]
    return max((share for share in shares if share is not None), default=None)


@dataclass
class Comparison:
    bundles: list[dict]
    hosts: list[HostEntry]
    runs: list[RunEntry]  # status ok only
    failed: list[RunEntry]
    grouped_by: str  # "host" or "hardware"
    configurations: int  # distinct measured configurations
    shared_configurations: int  # of those, measured in more than one bundle
    tool_versions: dict = field(default_factory=dict)  # version -> bundle count

    @property
    def machines(self) -> int:
        """How many distinct machines the hosts are: bundles of one box, or two hosts-file entries for it,
        count once (by the fingerprint's host name hash, CPU and memory); a host without a fingerprint
        counts as a machine of its own."""
        return len({shared_machine.machine(host.host["fingerprint"]) or id(host) for host in self.hosts})

    @property
    def ranks(self) -> Ranks:
        if {entry.run.on_gpu for entry in self.runs} == {True, False}:
            return MIXED_RANKS
        return GPU_RANKS if any(host.link.get("gpu_count") for host in self.hosts) else CPU_RANKS


def configuration(run: Run) -> tuple:
    """What a run measured, whoever ran it: the key two bundles must share to be compared (its suite's,
    and the setting it ran under: NCCL's algorithm, nodes, GPUs, its entry's env)."""
    return suites.get(run.suite).configuration(run) + setting_key(run)


def _host_names(bundles: list[dict]) -> dict:
    """(bundle index, host index) -> a name that tells apart two machines a hosts file named alike."""
    machines = defaultdict(set)
    for bundle in bundles:
        for host in bundle["hosts"]:
            machines[host["name"]].add(((host["fingerprint"] or {}).get("host") or {}).get("hostname_sha256"))
    names = {}
    for b, bundle in enumerate(bundles):
        for h, host in enumerate(bundle["hosts"]):
            machine = ((host["fingerprint"] or {}).get("host") or {}).get("hostname_sha256")
            ambiguous = len(machines[host["name"]]) > 1 and machine
            names[b, h] = f"{host['name']} ({machine[:6]})" if ambiguous else host["name"]
    return names


def _check_series(bundles: list[dict], entries: "list[RunEntry]") -> None:
    """A UserError where the runs fall into more series than a report draws, naming the bundle with the most."""
    found = {entry.series for entry in entries}
    if len(found) <= MAX_SERIES:
        return
    each = defaultdict(set)
    for entry in entries:
        each[entry.host.bundle].add(entry.series)
    most = max(each, key=lambda index: len(each[index]))
    raise UserError(f"these bundles hold {len(found)} series ({len(each[most])} in bundle {bundles[most]['run_id']}), more than the "
                    f"{MAX_SERIES} one report draws (a series: a host, or its GPUs and link, with the link and setting its runs "
                    "ran under); report fewer bundles at once, or leave out the one with the most")


def merge(bundles: list[dict], group_by: str = "auto") -> Comparison:
    """One comparison of every run in the bundles; group_by is "host", "hardware" or "auto"."""
    names = _host_names(bundles)
    hosts, tagged = [], []
    for b, bundle in enumerate(bundles):
        for h, host in enumerate(bundle["hosts"]):
            fp = host["fingerprint"]
            entry = HostEntry(names[b, h], host, b, bundle["run_id"], bundle["tool"]["version"],
                              link_summary(fp) if fp else {"link_label": "unknown (no fingerprint)", "link_peak_gbps": None})
            hosts.append(entry)
            found = {}
            for name in sorted({run.suite for run in entry.runs}):
                found.update(suites.get(name).baselines(entry.runs))
            mine = [(entry, run, found.get(id(run)), suites.get(run.suite)) for run in entry.runs]
            entry.verdicts = judge(host, [(run, suite) for _, run, _, suite in mine if run.ok])
            tagged += mine

    def series(entry: HostEntry, run: Run, base: "Run | None", suite: Suite, by_host: bool) -> Series:
        return Series(entry.name if by_host else "", entry.hardware, suite.link_name(run),
                      not run.transport["matches_preset"],
                      shared_machine.busy(_others_share(entry.host, [run, base])) or bool(shared_machine.gpus_held(entry.fingerprint)))

    if group_by == "auto":
        group_by = "host" if len({series(*tag, True) for tag in tagged}) <= MAX_HOST_SERIES else "hardware"
    entries = [RunEntry(e, r, series(e, r, base, suite, group_by == "host"), base, suite) for e, r, base, suite in tagged]
    _check_series(bundles, entries)

    measured_in = defaultdict(set)
    for entry in entries:
        if entry.run.ok:
            measured_in[configuration(entry.run)].add(entry.host.bundle)
    versions = defaultdict(int)
    for bundle in bundles:
        versions[bundle["tool"]["version"]] += 1
    return Comparison(
        bundles=bundles,
        hosts=hosts,
        runs=[e for e in entries if e.run.ok],
        failed=[e for e in entries if not e.run.ok],
        grouped_by=group_by,
        configurations=len(measured_in),
        shared_configurations=sum(1 for ids in measured_in.values() if len(ids) > 1),
        tool_versions=dict(versions),
    )
