"""What each plot and table shows, computed from the samples of the merged runs.

Spread is always taken from the raw samples (pooled over the runs of one series), never from a
single number: p5-p95 of the samples for measured quantities; a bootstrap confidence interval of
the ratio of medians for scaling efficiency, a figure computed from two sets of samples.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from dataclasses import dataclass, field

from bench.common.stats import Spread, ratio_of_medians
from bench.report.merge import Comparison, RunEntry, Series, training_recipe


def pooled(entries: list[RunEntry], metric: str) -> list:
    """The samples of one metric over the runs of a series: its spread is taken from these."""
    return [s for entry in entries for s in entry.samples(metric)]


def _baseline_samples(entries: list[RunEntry], metric: str) -> list:
    distinct = {id(e.baseline): e.baseline for e in entries if e.baseline is not None}
    return [s for run in distinct.values() for s in (run["metrics"].get(metric) or {}).get("samples", [])]


# --- DDP ------------------------------------------------------------------------------------

@dataclass(frozen=True, order=True)
class Workload:
    model: str
    recipe: str  # precision, and the memory-lean choices when made (merge.training_recipe)
    seq_len: "int | None"  # None for the UNet presets: a sample is an image, not tokens
    micro_batch: int

    @property
    def title(self) -> str:
        sample = f"{self.seq_len} tokens x " if self.seq_len is not None else ""
        return f"{self.model}, {self.recipe}, {sample}micro-batch {self.micro_batch}"

    @property
    def stem(self) -> str:
        tokens = f"-s{self.seq_len}" if self.seq_len is not None else ""
        return f"{self.model}-{self.recipe.replace(', ', '-').replace(' ', '-')}{tokens}-mb{self.micro_batch}"


def workload(entry: RunEntry) -> Workload:
    p = entry.params
    return Workload(p["model"], training_recipe(p), p.get("seq_len"), p["micro_batch"])


@dataclass
class Line:
    """One line of a plot: a series (or a machine's 1-GPU baseline) against x."""

    series: Series
    label: str
    points: list  # [(x, Spread)], sorted by x
    baseline: bool = False
    detail: tuple = ()  # what else tells this line apart (op, dtype, ranks), for the label


def _lines(groups: dict, make_label) -> list[Line]:
    lines = []
    for key, by_x in sorted(groups.items()):
        points = sorted((x, Spread.of(samples)) for x, samples in by_x.items() if samples)
        if points:
            lines.append(make_label(key, points))
    return lines


def per_sample_lines(comparison: Comparison) -> dict[Workload, list[Line]]:
    """Per-sample time x #GPUs (s) against global batch, per workload; world size 1 as baselines."""
    groups = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for entry in comparison.runs:
        if entry.run["suite"] != "ddp":
            continue
        ws = entry.run["world_size"]
        # With one rank there is no link: a machine's baseline is one line whatever the preset.
        series = Series(entry.series.host, entry.series.hardware, "", False) if ws == 1 else entry.series
        groups[workload(entry)][(ws == 1, series, ws)][entry.params["global_batch"]] += entry.samples("per_sample_gpu_time_s")

    def line(key, points):
        baseline, series, ws = key
        if baseline:
            return Line(series, f"{series.machine} · 1 GPU (baseline)", points, baseline=True)
        return Line(series, f"{series.label} · {ws} GPUs", points)

    return {w: _lines(g, line) for w, g in sorted(groups.items())}


@dataclass
class Bar:
    series: Series
    group: str  # the x-axis group: "tiny, batch 8, 2 GPUs"
    value: Spread


def _ddp_group(entry: RunEntry) -> tuple:
    return (workload(entry), entry.params["global_batch"], entry.run["world_size"])


def group_label(key: tuple) -> str:
    w, batch, ws = key
    return f"{w.model} {w.recipe}\nbatch {batch}, {ws} GPUs"


def efficiency_bars(comparison: Comparison) -> list[Bar]:
    """Scaling efficiency (fraction) of every multi-GPU ddp configuration that has a 1-GPU baseline."""
    groups = defaultdict(list)
    for entry in comparison.runs:
        if entry.run["suite"] == "ddp" and entry.run["world_size"] > 1 and entry.baseline is not None:
            groups[(_ddp_group(entry), entry.series)].append(entry)
    bars = []
    for (key, series), entries in sorted(groups.items()):
        # Efficiency = baseline per-sample time / this run's: the baseline is the numerator.
        base, samples = _baseline_samples(entries, "per_sample_gpu_time_s"), pooled(entries, "per_sample_gpu_time_s")
        if base and samples and (efficiency := ratio_of_medians(base, samples)) is not None:  # None: a 0 s per-sample time
            bars.append(Bar(series, group_label(key), efficiency))
    return bars


@dataclass
class Prediction:
    series: Series
    group: str
    measured: Spread  # step time, s
    predicted: float  # s, the median over the pooled runs' predictions
    compute: "float | None"  # s, the 1-GPU step time at this global batch / #GPUs: the step with no communication


def predictions(comparison: Comparison) -> list[Prediction]:
    """Measured against predicted step time, for runs that carry derived.predicted_step_time_s."""
    groups = defaultdict(list)
    for entry in comparison.runs:
        predicted = (entry.run.get("derived") or {}).get("predicted_step_time_s")
        if entry.run["suite"] == "ddp" and entry.run["world_size"] > 1 and predicted is not None and entry.samples("step_time_s"):
            groups[(_ddp_group(entry), entry.series)].append(entry)
    found = []
    for (key, series), entries in sorted(groups.items()):
        _, batch, ws = key
        base = _baseline_samples(entries, "per_sample_gpu_time_s")
        found.append(Prediction(
            series, group_label(key), Spread.of(pooled(entries, "step_time_s")),
            statistics.median(e.run["derived"]["predicted_step_time_s"] for e in entries),
            statistics.median(base) * batch / ws if base else None,
        ))
    return found


# --- Collectives ----------------------------------------------------------------------------

def busbw_lines(comparison: Comparison) -> list[Line]:
    """busbw (GB/s) against message size (bytes), one line per series, op, dtype, placement and ranks."""
    groups = defaultdict(lambda: defaultdict(list))
    for entry in comparison.runs:
        p = entry.params
        if entry.run["suite"] == "collectives" and p["op"] != "sendrecv":
            key = (entry.series, p["op"], p["dtype"], "in-place" if p["in_place"] else "out-of-place", entry.run["world_size"])
            groups[key][p["size_bytes"]] += entry.samples("busbw_gbps")
    lines = _lines(groups, lambda key, points: Line(key[0], key[0].label, points, detail=key[1:]))
    # Name op, dtype, placement and ranks in the label only where the lines differ in them.
    varying = [i for i in range(4) if len({line.detail[i] for line in lines}) > 1]
    for line in lines:
        extra = [f"{line.detail[i]} ranks" if i == 3 else str(line.detail[i]) for i in varying]
        line.label = " · ".join([line.series.label, *extra])
    return lines


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
        if entry.run["suite"] == "collectives" and p["op"] == "sendrecv" and entry.samples("busbw_gbps"):
            topology = (entry.host.fingerprint.get("topology") or {}).get("matrix")
            kind = (entry.series.hardware, entry.series.transport, entry.series.mismatch,
                    json.dumps(topology, sort_keys=True))
            key = (kind, entry.run["world_size"], p["dtype"], p["size_bytes"])
            groups[key][(p["src_rank"], p["dst_rank"])] += entry.samples("busbw_gbps")
            hosts[kind].add(entry.host.name)
            topologies[kind] = topology
    return [
        P2PMatrix(Series(_hosts(hosts[kind]), kind[0], kind[1], kind[2]), ws, dtype, size,
                  {pair: Spread.of(s) for pair, s in cells.items()}, topologies[kind])
        for (kind, ws, dtype, size), cells in sorted(groups.items(), key=lambda item: item[0])
    ]
