"""Reports: bundles in; report.md, a self-contained report.html and every plot as PNG and SVG out."""

from __future__ import annotations

import gc
import multiprocessing
import os
import pickle
import re
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from bench.common.files import write_text
from bench.outputs import prepare_folder
from bench.report import html, machine, markdown
from bench.report import plots as P
from bench.report import series as S
from bench.report import tables as T
from bench.report.document import Heading, Paragraph, Plot
from bench.report.merge import MAX_HOST_SERIES, MISMATCH, Comparison, merge

TITLE = "ddpbench report"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()[:60]


class _Plots:
    """Names each plot's files and queues its drawing; render() then draws them all."""

    def __init__(self, out_dir: Path):
        self.out_dir = out_dir
        self.jobs = []

    def __call__(self, builder, args: tuple, stem: str, title: str, caption: str) -> Plot:
        block = Plot(title, caption, self.out_dir / f"{stem}.png", self.out_dir / f"{stem}.svg")
        self.jobs.append((builder, args, block.png, block.svg))
        return block

    def render(self) -> None:
        # Drawing is most of a report's time and each figure is independent: one process per core
        # where fork makes a worker cheap (the parent's matplotlib is already imported).
        workers = min(len(self.jobs), os.cpu_count() or 1, 4)
        if workers < 2 or sys.platform != "linux":
            for job in self.jobs:
                _draw(job)
            return
        # Largest first (by the data drawn), so that no worker starts a big figure when the others are done.
        jobs = sorted(self.jobs, key=lambda job: len(pickle.dumps(job[1])), reverse=True)
        gc.freeze()  # the workers' collections skip what this process made (bundles, matplotlib): faster
        try:
            with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
                list(pool.map(_draw, jobs))
        finally:
            gc.unfreeze()


def _draw(job: tuple) -> None:
    builder, args, png, svg = job
    P.save(builder(*args), png, svg)


def _summary(comparison: Comparison, skipped: list[str]) -> list:
    bundles = comparison.bundles
    ids = ", ".join(b["run_id"] for b in bundles) if len(bundles) <= 10 else f"{bundles[0]['run_id']} ... {bundles[-1]['run_id']}"
    versions = ", ".join(f"{v} ({n} bundle{'s' * (n > 1)})" for v, n in sorted(comparison.tool_versions.items()))
    blocks = [Paragraph(f"{len(bundles)} bundle(s) ({ids}) from {len(comparison.hosts)} host(s); ddpbench {versions}.")]
    if skipped:
        blocks.append(Paragraph(f"Skipped {len(skipped)} file(s) that are not valid bundles:\n" + "\n".join(skipped), warning=True))
    incomplete = [b["run_id"] for b in bundles if not b["complete"]]
    if incomplete:
        blocks.append(Paragraph(f"Incomplete: {', '.join(incomplete)} stopped early; the tables hold what finished.", warning=True))
    if len(bundles) > 1:
        if comparison.configurations and not comparison.shared_configurations:
            blocks.append(Paragraph(
                "These bundles have nothing in common: no configuration (suite, op, size, model, batch, #GPUs) was "
                "measured in more than one of them, so each one's results stand beside the others' without a like-for-like "
                "comparison.", warning=True))
        else:
            blocks.append(Paragraph(f"{comparison.shared_configurations} of {comparison.configurations} configurations "
                                    "were measured in more than one bundle."))
    if comparison.grouped_by == "hardware":
        blocks.append(Paragraph("Plots and tables group the hosts by GPUs and link and pool their samples (more than "
                                f"{MAX_HOST_SERIES} host/transport series, or --group-by hardware); the hosts table lists "
                                "every host."))
    mismatched = sum(1 for e in comparison.runs if e.series.mismatch)
    if mismatched:
        blocks.append(Paragraph(f"Transport mismatch in {mismatched} run(s): NCCL used a transport that the preset should "
                                f"have ruled out. Those series are marked \"{MISMATCH}\" in every table and legend.", warning=True))
    return blocks


def _copy(comparison: Comparison, plot: _Plots) -> list:
    tables = machine.copy_tables(comparison)
    if not tables:
        return []
    blocks = [Heading(2, "Copy bandwidth")]
    bars = machine.copy_bars(comparison)
    if bars:
        blocks.append(plot(machine.copy_bars_figure, (bars,), "copy-per-gpu", "Host-device copy bandwidth per GPU",
                           machine.COPY_BARS_CAPTION))
    return blocks + tables


def _collectives(comparison: Comparison, plot: _Plots, colours: dict) -> list:
    blocks = []
    lines = S.busbw_lines(comparison)
    table = T.collectives_table(comparison)
    if lines:
        peaks = S.link_peaks(comparison, lines)
        note = " Horizontal lines: the links' theoretical peaks from the fingerprint." if peaks else ""
        blocks += [Heading(3, "Bus bandwidth"),
                   plot(P.busbw_figure, (lines, peaks, colours), "busbw", "Bus bandwidth against message size",
                        "busbw as nccl-tests defines it (algbw x 2(n-1)/n for all-reduce). " + P.SPREAD_CAPTION + note)]
    if table:
        blocks += [table, *_warnings(comparison, "collectives")]
    largest = {}  # a figure per machine kind, transport, ranks and dtype: its largest message; the table has all
    for matrix in S.p2p_matrices(comparison):
        largest[(matrix.series, matrix.world_size, matrix.dtype)] = matrix
    if largest:
        blocks.append(Heading(3, "Point-to-point bandwidth"))
        for i, matrix in enumerate(largest.values()):
            stem = f"p2p-{i + 1}-{_slug(matrix.series.label)}"
            blocks.append(plot(P.p2p_figure, (matrix,), stem, f"Point-to-point bandwidth, {matrix.series.label}", P.P2P_CAPTION))
        blocks.append(T.p2p_table(comparison))
    return [Heading(2, "Collectives"), *blocks] if blocks else []


def _ddp(comparison: Comparison, plot: _Plots, colours: dict) -> list:
    bars, predicted = S.efficiency_bars(comparison), S.predictions(comparison)
    table = T.ddp_table(comparison, bars, predicted)
    if not table:
        return []
    blocks = [Heading(2, "DDP training"), Heading(3, "Per-sample time × #GPUs")]
    for workload, lines in S.per_sample_lines(comparison).items():
        blocks.append(plot(P.per_sample_figure, (workload, lines, colours), f"per-sample-{_slug(workload.stem)}",
                           f"Per-sample time x #GPUs, {workload.title}",
                           "Seed 000's metric: step time / global batch x #GPUs; lower is better, and equal to the "
                           "dashed 1-GPU line is perfect scaling. " + P.SPREAD_CAPTION))
    blocks.append(Heading(3, "Scaling efficiency"))
    if bars:
        blocks.append(plot(P.efficiency_figure, (bars, colours), "scaling-efficiency", "Scaling efficiency", P.EFFICIENCY_CAPTION))
    else:
        blocks.append(Paragraph("No multi-GPU run with a 1-GPU baseline in these bundles: no scaling efficiency to show."))
    blocks.append(Heading(3, "Measured against predicted step time"))
    if predicted:
        blocks.append(plot(P.prediction_figure, (predicted,), "predicted-step-time", "Measured against predicted step time",
                           P.PREDICTION_CAPTION))
    else:
        blocks.append(Paragraph("No prediction in these bundles (derived.predicted_step_time_s): nothing to set the "
                                "measured step times against."))
    blocks += [Heading(3, "Step times"), table, *_warnings(comparison, "ddp")]
    return blocks


def _warnings(comparison: Comparison, suite: str) -> list:
    """The implausible figures of a suite's runs, right after the table that marks them ⚠."""
    table = T.warnings_table(comparison, suite)
    if table is None:
        return []
    return [Paragraph(f"{len(table.rows)} implausible figure(s), marked ⚠ in the table above: no correct measurement "
                      "gives them. Read them with their likely cause before trusting the figures around them.", warning=True),
            table]


def build(comparison: Comparison, out_dir: Path, skipped: list[str]) -> list:
    """The report's blocks; every plot is drawn into out_dir (as PNG and SVG) before this returns."""
    plot = _Plots(out_dir)
    colours = P.palette([e.series for e in comparison.runs])
    blocks = [Heading(1, TITLE), *_summary(comparison, skipped), Heading(2, "Hosts"), T.hosts_table(comparison),
              *machine.concerns(comparison)]
    results = _copy(comparison, plot) + _collectives(comparison, plot, colours) + _ddp(comparison, plot, colours)
    counters = machine.counters(comparison)
    if counters:
        results += [Heading(2, "GPU counters"), *counters]
    blocks += results or [Paragraph("No successful run in these bundles: nothing to plot or tabulate.", warning=True)]
    failures = T.failures_table(comparison)
    if failures:
        blocks += [Heading(2, "What failed"), failures]
    plot.render()
    return blocks


def write_report(bundles: list[dict], out_dir: Path, skipped: "list[str] | None" = None, group_by: str = "auto") -> Path:
    """Write report.md, report.html and the plots into out_dir; return report.md's path."""
    prepare_folder(out_dir, "report's folder")
    blocks = build(merge(bundles, group_by), out_dir, skipped or [])
    write_text(out_dir / "report.md", markdown.render(blocks))
    write_text(out_dir / "report.html", html.render(blocks, TITLE))
    return out_dir / "report.md"
