"""The ddp suite's part of the report's answer (bench/report/answer.py): per machine, workload, rank
count, transport and global batch, the scaling efficiency with its interval and the communication
left exposed, from the pooled samples of the merged runs; throughput against GPUs; and the per-sample
time x #GPUs per workload."""

from __future__ import annotations

from bench.report import plots as P
from bench.report.answer import Finding
from bench.report.document import Paragraph
from bench.report.merge import Comparison, Ranks
from bench.suites.ddp.report import plots as DP
from bench.suites.ddp.report import predicted as PR
from bench.suites.ddp.report import series as DS
from bench.suites.training.report import scaling_plots, training_findings, workload


def per_sample_caption(ranks: Ranks) -> str:
    return (f"Per-sample time × #{ranks.many} (step time / global batch × #{ranks.many}) against the global batch, one "
            f"line per host and transport; lower is better, and on the dashed 1-{ranks.one} line of its machine is "
            "perfect scaling. " + P.SPREAD_CAPTION)


def findings(comparison: Comparison) -> list[Finding]:
    return training_findings(comparison, "ddp", workload)


def answer_plots(comparison: Comparison, plot, colours: dict) -> list:
    """Throughput against GPUs where the runs span three GPU counts or several nodes, then the per-sample
    time x #GPUs per workload, across every merged bundle, with the step predicted on other links."""
    ranks = comparison.ranks
    lines_of_links = DS.predicted_lines(PR.hosts(comparison), ranks)
    blocks = scaling_plots(comparison, plot, "ddp", workload)
    per_workload = DS.per_sample_lines(comparison)
    drawn_workloads, left = P.drawn_workloads(per_workload)
    for shown in drawn_workloads:
        lines = per_workload[shown]
        # One machine's figure of one bundle gets a line per link; with several machines or bundles, a line
        # per link and each of them would bury the measured ones: their predictions are in the DDP section's
        # table, a row per bundle.
        one_machine = len({(line.series.host, line.series.hardware) for line in lines}) == 1  # busy or not
        found = lines_of_links.get(shown, [])
        drawn = one_machine and len({host for host, _ in found}) <= 1
        lines_caption = PR.CPU_LINES_CAPTION if ranks.cpu else PR.LINES_CAPTION
        caption = per_sample_caption(ranks) + (" " + (lines_caption if drawn else PR.LINES_LEFT_OUT) if found else "")
        predicted = tuple(line for _, line in found) if drawn else ()
        for shared, part in DS.per_sample_figures(lines):
            blocks.append(plot(DP.per_sample_figure, (shown, part, colours, predicted, ranks),
                               "-".join([f"per-sample-{P.slug(shown.stem)}", *([P.slug(shared)] if shared else [])]),
                               f"Per-sample time × #{ranks.many}, {shown.title}" + (f", {shared}" if shared else ""), caption))
    said = P.left_out_words(left, f"Per-sample time × #{ranks.many} figures")
    return blocks + ([Paragraph(said)] if said else [])
