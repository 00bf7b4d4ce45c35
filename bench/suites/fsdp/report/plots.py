"""The fsdp suite's figure: per model, the per-sample time x #GPUs against global batch, a line
per strategy and transport: the transport's colour, the strategy's marker and dash."""

from __future__ import annotations

from matplotlib.figure import Figure

from bench.common.units import time_unit
from bench.report import plots as P
from bench.report.merge import GPU_RANKS, Ranks
from bench.report.series import Line
from bench.suites.fsdp.report.series import Model, strategy_order


def caption(ranks: Ranks) -> str:
    return (f"Per-sample time × #{ranks.many} per strategy (step time / global batch × #{ranks.many}); lower is better, and on "
            f"the grey dashed line of the plain model on one {ranks.one} (squares) is perfect scaling. Colour: the machine "
            f"and transport (grey: one {ranks.one}); marker and dash: the strategy (DDP; fsdp grad_op = ZeRO-2-like, fsdp "
            "full = ZeRO-3). " + P.SPREAD_CAPTION)


# Per strategy, in order; the baseline's square and "--" stay its own.
STRATEGY_MARKERS = ["o", "^", "D", "v", "P", "X"]
STRATEGY_DASHES = ["-", ":", "-.", (0, (1, 1)), (0, (3, 1, 1, 1)), (0, (5, 1))]


def per_model_figure(model: Model, lines: list[Line], colours: dict, ranks: Ranks = GPU_RANKS) -> Figure:
    strategies = sorted({line.detail[0] for line in lines if not line.baseline}, key=strategy_order)
    fig = P.figure(4.6 + P.legend_height(len(lines)))
    ax = fig.add_subplot()
    factor, unit = time_unit([s.high if s.high is not None else s.median for line in lines for _, s in line.points])
    distinct = P.Distinct()
    for line in lines:
        if line.baseline:
            P.errorbar(ax, line, factor, distinct.claim({"color": P.BASELINE_COLOUR, "marker": P.BASELINE_MARKER, "linestyle": "--"},
                                                        keep_marker=True))
            if len(line.points) == 1:
                ax.axhline(line.points[0][1].median * factor, color=P.BASELINE_COLOUR, linestyle="--", linewidth=1.2, alpha=0.8)
            continue
        index = strategies.index(line.detail[0]) % len(STRATEGY_MARKERS)
        P.errorbar(ax, line, factor, distinct.claim({"color": colours.get(line.series, P.BASELINE_COLOUR),
                                                     "marker": STRATEGY_MARKERS[index], "linestyle": STRATEGY_DASHES[index]}))
    ax.set_xscale("log", base=2)
    P.log2_ticks(ax, [x for line in lines for x, _ in line.points], lambda b: f"{b:g}")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("global batch size (samples per optimizer step, log scale)")
    ax.set_ylabel(f"per-sample time × #{ranks.many} ({unit})")
    ax.set_title(f"DDP and FSDP: time per sample × #{ranks.many} (lower is better)\n{model.title}", fontsize=11)
    ax.grid(True, alpha=0.3)
    P.legend(fig, ax)
    return fig
