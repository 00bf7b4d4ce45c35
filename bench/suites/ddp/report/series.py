"""What the ddp suite's plots and tables show, from the samples of the merged runs: per-sample time
x #GPUs per workload, scaling efficiency against the 1-GPU baseline, and the predicted step.

Scaling efficiency is a figure computed from two sets of runs: its spread is the confidence
interval of bench/common/stats.py's model of launches and samples."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, replace

from bench.common.stats import Spread
from bench.common.transports import ranks_label
from bench.report import plots as P
from bench.report import series as S
from bench.report.merge import Comparison, Ranks, RunEntry, Series
from bench.report.series import Line, pooled
from bench.suites.training.report import Workload, scaling, workload


def per_sample_lines(comparison: Comparison) -> dict[Workload, list[Line]]:
    """Per-sample time x #GPUs (s) against global batch, per workload; world size 1 as baselines."""
    groups = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for entry in comparison.runs:
        if entry.run.suite != "ddp":
            continue
        ws = entry.run.world_size
        # With one rank there is no link: a machine's baseline is one line whatever the preset.
        series = replace(entry.series, transport="", mismatch=False) if ws == 1 else entry.series
        key = (ws == 1, series, ws, entry.run.on_gpu)
        groups[workload(entry)][key][entry.params["global_batch"]] += entry.samples("per_sample_gpu_time_s")

    def line(key, points):
        baseline, series, ws, gpus = key
        if baseline:
            return Line(series, f"{series.machine} · {ranks_label(1, gpus)} (baseline)", points, baseline=True)
        return Line(series, f"{series.label} · {ranks_label(ws, gpus)}", points, detail=(ranks_label(ws, gpus),))

    return {w: S.lines_of(g, line) for w, g in sorted(groups.items())}


def per_sample_figures(lines: list[Line]) -> "list[tuple[str, list[Line]]]":
    """One workload's lines in figures a reader can follow (bench.report.plots.MAX_SERIES measured lines
    at most): split by rank count, then in even parts; each (what its lines share, its lines with the
    baselines of its machines)."""
    measured = [line for line in lines if not line.baseline]
    if len(measured) <= P.MAX_SERIES:
        return [("", lines)]
    parts = P.split(measured, [lambda line: line.detail[0]])
    return [(" · ".join(shared), [line for line in lines if line.baseline and line.series.machine in machines] + part)
            for shared, part in parts for machines in [{line.series.machine for line in part}]]


@dataclass
class Bar:
    series: Series
    group: str  # the x-axis group: "tiny fp32\nbatch 8, 2 GPUs"
    value: Spread
    workload: "Workload | None" = None  # the plot's panel
    tick: str = ""  # the group's label within its workload's panel: "batch 8\n2 GPUs"


def _ddp_group(entry: RunEntry) -> tuple:
    return (workload(entry), entry.params["global_batch"], entry.run.world_size, entry.run.on_gpu)


def group_label(key: tuple) -> str:
    w, batch, ws, gpus = key
    return f"{w.model} {w.recipe}\nbatch {batch}, {ranks_label(ws, gpus)}"


def efficiency_bars(comparison: Comparison) -> list[Bar]:
    """Scaling efficiency (fraction) of every multi-GPU ddp configuration that has a 1-GPU baseline."""
    groups = defaultdict(list)
    for entry in comparison.runs:
        if entry.run.suite == "ddp" and entry.run.world_size > 1 and entry.baseline is not None:
            groups[(_ddp_group(entry), entry.series)].append(entry)
    bars = []
    for (key, series), entries in sorted(groups.items()):
        # Efficiency = baseline per-sample time / this run's: the baseline is the numerator.
        efficiency = scaling(entries)  # None: no samples, or a 0 s per-sample time
        # a ratio whose percentage is past a float's range (a 1-GPU time of days over one of a few ns) draws no bar
        if efficiency is not None and all(math.isfinite(v * 100) for v in (efficiency.median, efficiency.low, efficiency.high)
                                          if v is not None):
            w, batch, ws, gpus = key
            bars.append(Bar(series, group_label(key), efficiency, w, f"batch {batch}\n{ranks_label(ws, gpus)}"))
    return bars


@dataclass
class Prediction:
    """One configuration of one host (of one bundle) measured against the compute + exposed communication
    model, as the table "Predicted against measured" gives it for each of its launches."""

    series: Series
    group: str  # "host · hardware · transport — model recipe, batch 16, 2 GPUs"
    measured: Spread  # step time, s, every launch's samples pooled
    compute: float  # s, the 1-GPU step at this work per GPU, pooled over its launches: the step with no communication
    allreduce: float  # s, the gradients' all-reduce on what the runs crossed, none of it hidden
    workload: Workload  # the one it trained: a report draws the first workloads' (plots.drawn_workloads)

    @property
    def predicted(self) -> float:
        return self.compute + self.allreduce


def predictions(comparison: Comparison, found: list) -> list[Prediction]:
    """Measured against the compute + exposed communication model, a row per host of a bundle
    (HostPrediction.host names the bundle where there are several) and configuration that the
    predictor (bench/suites/ddp/predict/, `found`) set against the model."""
    entries = {id(entry.run.record): entry for entry in comparison.runs}
    groups = defaultdict(list)
    for host in found:
        for a in host.against:
            entry = entries.get(id(a.run.record))
            if entry is not None and a.exposed_model is not None:
                # The model's inputs are pooled over launches: one model for every launch of a configuration.
                model = (a.exposed_compute_s, a.exposed_allreduce_s)
                groups[(host.host, _ddp_group(entry), entry.series, a.shape, a.algorithm, a.link, model)].append(entry)
    rows = []
    for (host, key, series, *_, model), mine in sorted(groups.items(), key=lambda item: str(item[0])):
        w, batch, ws, gpus = key
        where = f"{host} · {series.hardware}{' (busy)' * series.busy} · {series.transport_label}"
        rows.append(Prediction(series, f"{where} — {w.model} {w.recipe}, batch {batch}, {ranks_label(ws, gpus)}",
                               Spread.of(pooled(mine, "step_time_s")), *model, w))
    return rows


def predicted_lines(found: list, ranks: Ranks) -> "dict[Workload, list]":
    """Per workload, one (host, (label, [(global batch, per-sample time x GPUs)])) per host of a bundle
    (HostPrediction.host names the bundle where there are several), link and GPU count predicted
    (bench/suites/ddp/predict/), measured runs left to their own points: a line joins one bundle's
    predictions only, never one bundle's at one batch to another's at the next."""
    lines: dict = defaultdict(lambda: defaultdict(list))
    for host in found:
        for p in host.predicted:
            if p.measured is None:
                shown = Workload(p.workload.model, p.workload.recipe, p.workload.seq_len, p.workload.micro_batch)
                hosts = f" ({p.host})" if len(found) > 1 else ""
                lines[shown][(host.host, f"predicted · {p.link} · {ranks_label(p.gpus, not ranks.cpu)}{hosts}")].append(
                    (p.global_batch, p.per_sample_gpu_s))
    return {w: [(host, (label, points)) for (host, label), points in by_line.items()] for w, by_line in lines.items()}
