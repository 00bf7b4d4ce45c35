"""The ddp suite's part of a report: scaling efficiency, measured against predicted step time, and
the table of step times; and its part of the report's answer (answer.py): the findings and the
per-sample time x #GPUs per workload."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

from bench.common.stats import LEVEL_LABEL
from bench.common.transports import ranks_label
from bench.common.units import human_bytes
from bench.report import plots as P
from bench.report import tables as T
from bench.report.document import Heading, Paragraph, Table
from bench.report.merge import Comparison, RunEntry
from bench.suites.ddp.predict import check_predicted
from bench.suites.ddp.predict import predict as predict_runs
from bench.suites.ddp.predict.scaling import WEAK
from bench.suites.ddp.report import plots as DP
from bench.suites.ddp.report import predicted as PR
from bench.suites.ddp.report import series as DS
from bench.suites.ddp.report.answer import answer_plots, findings  # noqa: F401 (the answer's hooks: bench/report/answer.py)
from bench.suites.ddp.report.series import Bar, group_label
from bench.suites.training.report import workload


def section(comparison: Comparison, plot, colours: dict) -> list:
    """The ddp suite's part of a report: scaling, prediction, what each link gives, step times."""
    found = PR.hosts(comparison)
    bars, predicted, ranks = DS.efficiency_bars(comparison), DS.predictions(comparison, found), comparison.ranks
    table = ddp_table(comparison, bars)
    if not table:
        return []
    # The per-sample time x #GPUs opens the report, in its answer (answer.py: findings, answer_plots).
    blocks = [Heading(2, "DDP training"), Heading(3, "Scaling efficiency")]
    if bars:
        drawn, left = P.drawn_workloads(bar.workload for bar in bars)
        blocks.append(plot(DP.efficiency_figure, ([bar for bar in bars if bar.workload in drawn], colours, ranks),
                           "scaling-efficiency", "Scaling efficiency", DP.efficiency_caption(ranks)))
        said = P.left_out_words(left, "Scaling efficiency panels")
        blocks += [Paragraph(said)] if said else []
    else:
        blocks.append(Paragraph(f"No multi-{ranks.one} run with a 1-{ranks.one} baseline in these bundles: no scaling "
                                "efficiency to show."))
    blocks.append(Heading(3, "Measured against predicted step time"))
    if predicted:
        drawn, left = P.drawn_workloads(p.workload for p in predicted)
        blocks.append(plot(DP.prediction_figure, ([p for p in predicted if p.workload in drawn], ranks), "predicted-step-time",
                           "Measured against predicted step time", DP.prediction_caption(ranks)))
        said = P.left_out_words(left, "Predicted step times")
        blocks += [Paragraph(said)] if said else []
    else:
        blocks.append(Paragraph("No N-rank run with a 1-rank run and an all_reduce sweep of its link in these bundles: "
                                "nothing to set the measured step times against."))
    blocks += PR.blocks(found)
    blocks += [Heading(3, "Step times"), table, *T.warnings_blocks(comparison, "ddp")]
    return blocks


def predict(bundles: list, links: "list | None", gpus: "int | None", gpus_per_node: "int | None",
            algorithm: "str | None", scaling: str = WEAK) -> list:
    """`ddpbench predict`'s answer: what the bundles' ddp runs give on other links, the tables with their
    captions; [] where the bundles hold no ddp run; one error line where they hold some but nothing
    asked for could be predicted."""
    found = predict_runs(bundles, links, gpus, gpus_per_node, algorithm, scaling)
    if found:
        check_predicted(found)
    return PR.blocks(found) if found else []


def _ddp_key(entry: RunEntry) -> tuple:
    # One baseline row per machine and shape: with one rank the transport preset changes nothing.
    series = entry.series if entry.run.world_size > 1 else replace(entry.series, transport="", mismatch=False)
    return (series, workload(entry), entry.params["global_batch"], entry.run.world_size, entry.run.on_gpu)


def ddp_table(comparison: Comparison, bars: list[Bar]) -> "Table | None":
    """Step times per series and configuration, with the scaling efficiency of the plots."""
    entries = [e for e in comparison.runs if e.run.suite == "ddp"]
    efficiency = {(bar.series, bar.group): bar.value for bar in bars}
    rows = []
    groups = defaultdict(list)
    for entry in entries:
        groups[_ddp_key(entry)].append(entry)
    # The answer leads with NCCL's own transport at the largest global batch (and that batch's baseline): those rows first.
    largest = defaultdict(int)
    for series, w, batch, _, _ in groups:
        largest[(series.machine, w)] = max(largest[(series.machine, w)], batch)
    answers = {key for key in groups if key[2] == largest[(key[0].machine, key[1])]
               and (key[3] == 1 or key[0].transport.startswith("default"))}
    for key, group in sorted(groups.items(), key=lambda item: (item[0] not in answers, item[0])):
        series, w, batch, ws, gpus = key
        label = group_label((w, batch, ws, gpus))
        eff = efficiency.get((series, label))
        mfu = T.pooled_spread(group, "mfu_fraction")
        memory = max(s for e in group for s in e.samples("peak_memory_bytes")) if group[0].samples("peak_memory_bytes") else None
        rows.append([
            *(T.series_cells(group) if ws > 1 else [T.series_cells(group)[0], series.hardware, f"{ranks_label(1, gpus)} (baseline)"]),
            w.model, w.recipe, ranks_label(ws, gpus), str(batch), str(group[0].params.get("grad_accum", "-")),
            T.time_spread(T.pooled_spread(group, "step_time_s")),
            T.time_spread(T.pooled_spread(group, "per_sample_gpu_time_s")),
            T.spread(T.pooled_spread(group, "samples_per_s"), 1, 4),
            (T.percent_spread(eff) if eff else ("100% (baseline)" if ws == 1 else "-")) + T.flags(group),
            T.percent_spread(mfu) if mfu else "-",
            human_bytes(memory) if memory is not None else "-",
            T.bundles_cell(group),
        ])
    if not rows:
        return None
    ranks = comparison.ranks
    return Table(["host", T.hardware_header(comparison), "transport", "model", "recipe",
                  ranks.many if ranks.cpu else "GPUs or processes", "global batch", "accum",
                  "step time median [p5, p95]", f"per-sample time × {ranks.many}", "samples/s", f"scaling % [{LEVEL_LABEL}]",
                  "MFU %", "peak memory", "bundles"], rows, lead=tuple(range(len(answers))))
