"""Reports: bundles in; report.md, a self-contained report.html and every plot as PNG and SVG out.

The report is the answer first (answer.py: per host and workload, does the link slow training),
the hosts and what their fingerprints raised, then each suite's own part (its folder's report.py:
`section(comparison, plot, colours) -> blocks`, drawn with the toolkit beside this file: merge,
series, tables, plots, document), then the GPU counters and what failed."""

from __future__ import annotations

import gc
import multiprocessing
import os
import pickle
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from bench import suites
from bench.common.files import write_text
from bench.common.units import count
from bench.outputs import prepare_folder, refuse_non_files
from bench.report import answer, html, machine, markdown, normal
from bench.report import plots as P
from bench.report import tables as T
from bench.report.document import Heading, Paragraph, Plot
from bench.report.merge import MAX_HOST_SERIES, MISMATCH, Comparison, merge

TITLE = "ddpbench report"
CPU_ONLY = ("CPU only: every rank of these bundles is a process on a CPU, talking over gloo. This report shows ddpbench "
            "working, not a link: none of its figures is about a link between accelerators; run the plan on a machine with "
            "them to judge one.")
SMOKE = ("Smoke run: {which} ran every configuration once at its least work (ddpbench run --smoke), to show the plan "
         "runs. Its figures are not measurements; run the plan without --smoke to measure.")


class _Plots:
    """Names each plot's files and queues its drawing; render() then draws them all."""

    def __init__(self, out_dir: Path):
        self.out_dir = out_dir
        self.jobs = []

    def __call__(self, builder, args: tuple, stem: str, title: str, caption: str) -> Plot:
        block = Plot(title, caption, self.out_dir / f"{stem}.png", self.out_dir / f"{stem}.svg")
        refuse_non_files((block.png, block.svg, block.png.with_suffix(".json")), "report")  # before any figure is drawn
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
    try:
        P.save(builder(*args), png, svg)
    except OSError as err:  # the image writers' own errors name no file
        raise OSError(err.errno, err.strerror, err.filename or str(png)) from None


def _summary(comparison: Comparison, skipped: list[str]) -> list:
    bundles = comparison.bundles
    ids = ", ".join(b["run_id"] for b in bundles) if len(bundles) <= 10 else f"{bundles[0]['run_id']} ... {bundles[-1]['run_id']}"
    versions = ", ".join(f"{v} ({n} bundle{'s' * (n > 1)})" for v, n in sorted(comparison.tool_versions.items()))
    failed = len(T.failed_hosts(comparison))
    machines = count(comparison.machines, "machine")
    if len(comparison.hosts) != comparison.machines:  # bundles of one box, or hosts-file entries that are one box
        machines += f" ({count(len(comparison.hosts), 'host entry', 'host entries')} of the bundles)"
    blocks = [Paragraph(f"{count(len(bundles), 'bundle')} ({ids}) from {machines}; ddpbench {versions}."
                        + (f" {failed} host(s) measured nothing: see What failed, at the end." if failed else ""))]
    blocks += [Paragraph(line, warning=True) for line in dict.fromkeys(answer.shared_hosts(comparison).values())]
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


def _suite_sections(comparison: Comparison, plot: _Plots, colours: dict) -> list:
    """Each suite's own part of the report (its folder's report.py), in the suites' report order; a
    suite without one gets a line that says so, and the other sections stand."""
    present = {run.suite for host in comparison.hosts for run in host.runs}
    blocks = []
    for suite in sorted((suites.get(name) for name in present), key=lambda suite: (suite.report_order, suite.name)):
        part = suite.report_section()
        if part is not None:
            blocks += part.section(comparison, plot, colours)
            continue
        shown = sum(entry.run.suite == suite.name for entry in comparison.runs)
        blocks.append(Paragraph(f"Suite {suite.name}: its {shown} successful run(s) are not shown: the suite has no report "
                                f"part ({suite.package.replace('.', '/')}/report.py); the bundle holds every figure.", warning=True))
    return blocks


def build(comparison: Comparison, out_dir: Path, skipped: list[str]) -> list:
    """The report's blocks; every plot is drawn into out_dir (as PNG and SVG) before this returns.

    The answer comes first (answer.py: its figure, then its lines; on a CPU, after a line that says the
    report is not about a GPU link), then the bundles and hosts that measured, each suite's part, the
    counters; what failed last, in a section of its own."""
    plot = _Plots(out_dir)
    colours = P.palette([e.series for e in comparison.runs])
    smoke = [b["run_id"] for b in comparison.bundles if b.get("smoke")]
    which = f"bundle {smoke[0]}" if len(smoke) == 1 else f"{len(smoke)} of the bundles ({', '.join(smoke)})"
    notices = [Paragraph(SMOKE.format(which=which), strong=True)] if smoke else []
    notices += [Paragraph(CPU_ONLY, strong=True)] if comparison.ranks.cpu and comparison.runs else []
    blocks = [Heading(1, TITLE), *notices, *answer.section(comparison, plot, colours),
              Heading(2, "Hosts"), *_summary(comparison, skipped), T.hosts_table(comparison), *machine.concerns(comparison)]
    results = _suite_sections(comparison, plot, colours)
    results += normal.section(comparison) if results else []
    counters = machine.counters(comparison)
    if counters:
        results += [Heading(2, "GPU counters"), *counters]
    blocks += results or [Paragraph("No successful run in these bundles: nothing to plot or tabulate.", warning=True)]
    failed_hosts, failures = T.failed_hosts_lines(comparison), T.failures_table(comparison)
    if failed_hosts or failures:
        blocks += [Heading(2, "What failed"), *([failed_hosts] if failed_hosts else []), *([failures] if failures else [])]
    plot.render()
    return blocks


def write_report(bundles: list[dict], out_dir: Path, skipped: "list[str] | None" = None, group_by: str = "auto") -> Path:
    """Write report.md, report.html and the plots into out_dir; return report.md's path."""
    prepare_folder(out_dir, "report's folder")
    refuse_non_files((out_dir / "report.md", out_dir / "report.html"), "report")
    blocks = build(merge(bundles, group_by), out_dir, skipped or [])
    text, page = markdown.render(blocks), html.render(blocks, TITLE)
    write_text(out_dir / "report.md", text)
    write_text(out_dir / "report.html", page)
    return out_dir / "report.md"
