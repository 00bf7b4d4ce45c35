"""The fsdp suite's part of a report, with the ddp runs of the same models beside it: per model, the
per-sample time x #GPUs with a line per strategy and transport; per model and strategy the link
sensitivity (does the link matter more where communication is more frequent?); the step times with
the bytes each step moves."""

from __future__ import annotations

from collections import defaultdict

from bench.common.stats import LEVEL_LABEL
from bench.common.units import human_bytes
from bench.report import plots as P
from bench.report import tables as T
from bench.report.document import Heading, Paragraph, Table
from bench.common.transports import ranks_label
from bench.report.merge import Comparison, Ranks, RunEntry
from bench.suites.fsdp.report import plots as FP
from bench.suites.fsdp.report.answer import answer_plots, findings  # noqa: F401 (the answer's hooks: bench/report/answer.py)
from bench.suites.fsdp.report import series as FS

def sensitivity_caption(ranks: Ranks) -> str:
    return ("Link sensitivity: the scaling efficiency under a transport / the scaling efficiency under default, for the same "
            f"machine, model, strategy, global batch and #{ranks.many}, with its {LEVEL_LABEL} (over launches, then samples "
            "within them; docs/metrics.md). 100% means the link made no difference; where fsdp's ratio lies below DDP's, "
            f"ZeRO-style sharding loses more on that link than DDP does. Scaling is against the plain model on one {ranks.one}.")


def section(comparison: Comparison, plot, colours: dict) -> list:
    entries = FS.training_entries(comparison)
    if not any(e.run.suite == "fsdp" for e in entries):
        return []
    ranks = comparison.ranks
    blocks = [Heading(2, "Sharded data parallelism (FSDP) beside DDP"), Heading(3, f"Per-sample time × #{ranks.many} by strategy")]
    per_model = FS.per_sample_lines(entries)
    drawn, left = P.drawn_workloads(per_model)
    for model in drawn:
        blocks.append(plot(FP.per_model_figure, (model, per_model[model], colours, ranks), f"fsdp-per-sample-{P.slug(model.stem)}",
                           f"Per-sample time × #{ranks.many} by strategy, {model.title}", FP.caption(ranks)))
    said = P.left_out_words(left, f"Per-sample time × #{ranks.many} figures")
    blocks += [Paragraph(said)] if said else []
    blocks.append(Heading(3, "Link sensitivity"))
    table = sensitivity_table(FS.sensitivities(entries), ranks)
    blocks += [Paragraph(sensitivity_caption(ranks)), table] if table else [Paragraph(
        f"No strategy was measured on 2 or more {ranks.many} under default and another transport: no link sensitivity to show.")]
    blocks += [Heading(3, "Step times and what a step moves"), step_table(entries, ranks), *T.warnings_blocks(comparison, "fsdp")]
    return blocks


def sensitivity_table(found: list, ranks: Ranks) -> "Table | None":
    if not found:
        return None
    presets = sorted({preset for row in found for preset in row.ratios})
    rows = [[row.machine.machine, row.model.model, str(row.global_batch), str(row.world_size), row.strategy,
             T.percent_spread(row.scaling) if row.scaling else "-",
             *(T.percent_spread(row.ratios[p]) if p in row.ratios else "-" for p in presets)] for row in found]
    return Table(["machine", "model", "global batch", ranks.many, "strategy", f"scaling under default [{LEVEL_LABEL}]",
                  *(f"{p} ÷ default [{LEVEL_LABEL}]" for p in presets)], rows)


def _per_rank_bytes(group: list[RunEntry]) -> str:
    """All-gather / reduce-scatter bytes a rank moves a step ((n-1)/n of their sizes), the plain model's
    gradient all-reduce 2(n-1)/n."""
    n = group[0].run.world_size
    share = (n - 1) / n

    def of(metric: str) -> "float | None":
        samples = group[0].samples(metric)
        return samples[0] if samples else None

    grad = of("grad_allreduce_bytes")
    if grad is not None:
        return f"all-reduce {human_bytes(round(2 * share * grad))}"
    parts = [f"{name} {human_bytes(round(share * value))}" for name, value in
             (("all-gather", of("all_gather_bytes")), ("reduce-scatter", of("reduce_scatter_bytes")), ("all-reduce", of("all_reduce_bytes")))
             if value is not None]
    return ", ".join(parts) or "-"


def step_table(entries: list[RunEntry], ranks: Ranks) -> Table:
    groups = defaultdict(list)
    for entry in entries:
        ws = entry.run.world_size
        series = entry.series if ws > 1 else FS.machine(entry.series)
        groups[(FS.model_of(entry), series, FS.strategy_order(FS.strategy(entry)), entry.params["global_batch"], ws)].append(entry)
    rows = []
    for (model, series, (_, strategy), batch, ws), group in sorted(groups.items()):
        derived = [e.run.derived for e in group]
        scaling = [d["scaling_efficiency_fraction"] for d in derived if d.get("scaling_efficiency_fraction") is not None]
        predicted = [d["predicted_step_time_s"] for d in derived if d.get("predicted_step_time_s") is not None]
        memory = [s for e in group for s in e.samples("peak_memory_bytes")]
        mfu = T.pooled_spread(group, "mfu_fraction")
        exposed = T.pooled_spread(group, "gpu_comm_exposed_s")
        rows.append([
            series.machine, series.transport_label if ws > 1 else ranks_label(1, group[0].run.on_gpu), model.model, strategy, str(ws), str(batch),
            T.time_spread(T.pooled_spread(group, "step_time_s")),
            T.time_spread(T.pooled_spread(group, "per_sample_gpu_time_s")),
            T.spread(T.pooled_spread(group, "samples_per_s"), 1, 4),
            (f"{sorted(scaling)[len(scaling) // 2]:.1%}" if scaling else "-") + T.flags(group),
            T.seconds(sorted(predicted)[len(predicted) // 2]) if predicted else "-",
            T.percent_spread(mfu) if mfu else "-",
            human_bytes(max(memory)) if memory else "-",
            _per_rank_bytes(group) if ws > 1 else "-",
            T.time_spread(exposed, 3) if exposed else "-",
            T.bundles_cell(group),
        ])
    return Table(["machine", "transport", "model", "strategy", ranks.many, "global batch", "step time median [p5, p95]",
                  f"per-sample time × {ranks.many}", "samples/s", "scaling", "predicted step", "MFU %", "peak memory",
                  "a rank's bytes per step", "exposed comm (profiled)", "bundles"], rows)
