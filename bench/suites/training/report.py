"""What the training suites' report parts share: the workload a run trained (its model, recipe,
sequence and micro-batch), and the findings of a training suite's runs for the report's answer
(bench/report/answer.py), each scaled against its run's baseline."""

from __future__ import annotations

import statistics
import textwrap
from collections import defaultdict
from dataclasses import dataclass

from matplotlib.figure import Figure

from bench import suites
from bench.common.run import Run
from bench.common.sampling import sampling_outcome
from bench.common.stats import Ratio, Spread, ratio_interval
from bench.common.transports import nccl_algorithms, ranks_label, setting_label
from bench.report import plots as P
from bench.report import tables as T
from bench.report.answer import Finding
from bench.report.document import Paragraph
from bench.report.merge import MISMATCH, Comparison, RunEntry, Series
from bench.report.series import Line, pooled
from bench.suites.training import pacing, training_recipe
from bench.suites.training.derived import ABOVE_PERFECT, BASELINE_NOTE, NEGATIVE_EXPOSED, implausible, per_sample_launches


@dataclass(frozen=True, order=True)
class Workload:
    model: str
    recipe: str  # precision, and the memory-lean choices when made (training_recipe)
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


def _names(workloads: set) -> dict:
    """Workload -> its name in the answer: "gpt2 bf16", or its full title where two share that."""
    short = defaultdict(list)
    for w in workloads:
        short[f"{w.model} {w.recipe}"].append(w)
    return {w: name if len(alike) == 1 else w.title for name, alike in short.items() for w in alike}


def _baseline_runs(entries: list[RunEntry]) -> "list[Run]":
    return list({id(e.baseline): e.baseline for e in entries if e.baseline is not None}.values())


def _samples(runs: "list[Run]", metric: str) -> list:
    return [s for run in runs for s in run.samples(metric)]


def _hosts(entries: list[RunEntry]) -> frozenset:
    return frozenset((e.host.run_id, e.host.host["name"]) for e in entries)


def _flags(entries: list[RunEntry], efficiency: "Spread | None", exposed: "float | None") -> str:
    """" ⚠ code, ...": the runs' warnings but for those of their scaling figures, which are judged again
    on the pooled figures the finding shows (one launch's negative exposed communication does not
    flag a pooled figure that is positive)."""
    scaling_codes = {ABOVE_PERFECT, NEGATIVE_EXPOSED}
    codes = {w["code"] for e in entries for w in e.run.warnings if w["code"] not in scaling_codes} | set(implausible(efficiency, exposed))
    return f" ⚠ {', '.join(sorted(codes))}" if codes else ""


def _against(entries: list[RunEntry], bases: "list[Run]") -> str:
    """The baseline named where it is another strategy's run (fsdp's against the plain model's): "ddp's
    1-GPU run"; "" where it is the runs' own strategy on one rank."""
    own = {suites.get(e.run.suite).strategy(e.params) for e in entries}
    others = sorted({suites.get(run.suite).strategy(run.params) for run in bases} - own)
    return " and ".join(f"{name}'s 1-{_rank_words(entries[0].run.on_gpu)[0]} run" for name in others)


def scaling(entries: list[RunEntry]) -> "Ratio | None":
    """The scaling efficiency of these runs against their baselines (per-sample time x GPUs, baseline's
    over theirs), with the model's interval: each run is a launch, and a side of one launch takes the floor."""
    return per_sample_ratio(_baseline_runs(entries), [e.run for e in entries])


def per_sample_ratio(numerator: "list[Run]", denominator: "list[Run]") -> "Ratio | None":
    """Per-sample time x GPUs of the numerator's runs over the denominator's (one run a launch), with its interval."""
    top, bottom = ([run for run in runs if run.samples("per_sample_gpu_time_s")] for runs in (numerator, denominator))
    return ratio_interval(per_sample_launches(top), per_sample_launches(bottom)) if top and bottom else None


def _finding(name: str, ranks: str, batch: int, entries: list[RunEntry]) -> Finding:
    step = statistics.median(pooled(entries, "step_time_s"))
    runs = [e.run for e in entries]
    if entries[0].run.world_size == 1:  # its own baseline: no link crossed, nothing to scale
        return Finding(entries[0].series, name, ranks, batch, step, flags=T.flags(entries), hosts=_hosts(entries),
                       pacing=pacing.of_runs(runs))
    bases = _baseline_runs(entries)
    base_step = _samples(bases, "step_time_s")
    efficiency = scaling(entries)
    exposed = None
    if base_step:
        # The 1-GPU step for the same work per GPU: its step time x (this run's batch per GPU / its batch).
        per_gpu = batch / entries[0].run.world_size
        exposed = step - statistics.median(base_step) * per_gpu / bases[0].params["global_batch"]
    said = list(dict.fromkeys(note for e in entries for note in e.run.notes if note.startswith(BASELINE_NOTE)))
    return Finding(entries[0].series, name, ranks, batch, step, efficiency, exposed, flags=_flags(entries, efficiency, exposed),
                   notes=tuple(f"{note[0].upper()}{note[1:]}." for note in said[:1]), baseline=_against(entries, bases),
                   hosts=_hosts(entries), sampled=sampling_outcome(bases + runs), pacing=pacing.of_runs(bases + runs))


def training_findings(comparison: Comparison, suite: str, workload_of) -> list[Finding]:
    """One finding per series, workload, rank count and global batch of the suite's multi-rank runs,
    each scaled against its run's baseline (the suite's `baselines`); a machine and workload measured
    on one rank only gets its 1-rank findings (no link to judge). fsdp's findings are these too, with
    the strategy in the workload."""
    entries = [e for e in comparison.runs if e.run.suite == suite and e.samples("step_time_s")]
    names = _names({workload_of(e) for e in entries})
    groups = defaultdict(list)
    for e in entries:
        groups[(e.run.world_size > 1, e.series, workload_of(e), e.run.world_size, e.run.on_gpu, e.params["global_batch"])].append(e)
    found = [_finding(names[w], ranks_label(ws, gpus), batch, group)
             for (multi, _, w, ws, gpus, batch), group in sorted(groups.items()) if multi]
    scaled = {(f.series.machine, f.workload) for f in found}
    found += [_finding(names[w], ranks_label(ws, gpus), batch, group)
              for (multi, series, w, ws, gpus, batch), group in sorted(groups.items())
              if not multi and (series.machine, names[w]) not in scaled]
    return found


# --- throughput against GPUs ----------------------------------------------------------------------

TITLE_WRAP = 90  # characters of an 11 pt title line across the figure
SCALING_CAPTION = ("Training throughput against {ranks}, a line per link and topology; dashed: ideal, the {rank} "
                   "throughput × {ranks}, with the {rank} run doing the work per {one} of each rank count where it "
                   "was measured{boundary}. At {largest}, measured ÷ ideal: {efficiencies}.")


@dataclass(frozen=True, order=True)
class Topology:
    """What one line of the throughput figure stands for, whatever its rank count: the preset, the
    nodes the ranks were split into and the rest of the run's setting (NCCL's algorithm, GPUs, env)."""

    preset: str  # "default", "default (gloo)"
    nodes: int
    emulated: bool
    setting: str  # setting_label without the nodes: "tree, LL128"


def topology(run: Run) -> Topology:
    transport = run.transport
    nodes = transport.get("nodes") or {}
    preset = transport["preset"] if transport["backend"] == "nccl" else f"{transport['preset']} (gloo)"
    return Topology(preset, nodes.get("count", 1), bool(nodes.get("emulated")), setting_label(run, with_nodes=False))


def _topology_label(top: Topology, entries: list[RunEntry]) -> str:
    """"socket via NET/Socket+P2P, 2 emulated nodes, ring (NCCL ran RING/SIMPLE)": the transports NCCL
    used and the algorithms it ran over every rank count of the line."""
    used = sorted({t for e in entries for t in e.run.transport["nccl_used"]})
    ran = sorted({a for e in entries for a in nccl_algorithms(e.run.transport) or ()})
    nodes = f"{top.nodes} {'emulated ' if top.emulated else ''}nodes" if top.nodes > 1 else ""
    label = ", ".join(part for part in (top.preset + (" via " + "+".join(used) if used else ""), nodes, top.setting) if part)
    label += f" (NCCL ran {', '.join(ran)})" if ran else ""
    return label + (f" {MISMATCH}" if any(e.series.mismatch for e in entries) else "")


@dataclass
class ScalingFigure:
    """Throughput against rank count for one machine, workload and global batch."""

    title: str
    on_gpu: bool
    lines: list  # [Line]: points (ranks, Spread of samples/s); detail (nodes,): the nodes its runs were split into
    ideal: dict  # rank count -> its baselines' median samples/s on one rank: the same work per rank where measured
    boundaries: list  # [(nodes, ranks a node)] of the multi-node lines: where a run crosses nodes
    baseline: str  # whose: "" (the suite's own runs), or the strategy of another suite's ("ddp ")
    workload: Workload  # the one it trained: a report draws the figures of its first workloads (plots.drawn_workloads)

    @property
    def largest(self) -> int:
        return max(x for line in self.lines for x, _ in line.points)

    def ideal_at(self, ranks: int) -> "float | None":
        """The ideal samples/s of `ranks` ranks: that many times one rank's, at their work per rank."""
        return self.ideal[ranks] * ranks if ranks in self.ideal else None

    def efficiencies(self) -> list:
        """[(line label, measured ÷ ideal)] of every line measured at the largest rank count."""
        n = self.largest
        return [(line.label, s.median / self.ideal_at(n)) for line in self.lines for x, s in line.points
                if x == n and n in self.ideal]


def _samples_per_s(runs: "list[Run]") -> list:
    return [s for run in runs for s in run.samples("samples_per_s")]


def scaling_figures(comparison: Comparison, suite: str, workload_of) -> list[ScalingFigure]:
    """Per machine and workload of the suite's runs at three or more rank counts (the 1-rank baseline
    among them) or over several nodes, at the largest such global batch (the one the answer leads
    with): a line per topology, the ideal from the baseline."""
    groups = defaultdict(list)
    for e in comparison.runs:
        if e.run.suite == suite and e.samples("samples_per_s"):
            machine = (e.series.host, e.series.hardware, e.series.busy)  # a busy machine's runs apart from its quiet ones
            groups[(machine, workload_of(e), e.params["global_batch"], e.run.on_gpu)].append(e)
    figures = {}
    for ((host, hardware, busy), w, batch, gpus), entries in sorted(groups.items()):  # the largest batch last: it stays
        at_count = defaultdict(list)
        for e in entries:
            at_count[e.run.world_size].append(e)
        ideal = {n: statistics.median(base) for n, mine in at_count.items() if (base := _samples_per_s(_baseline_runs(mine)))}
        ideal = {n: value for n, value in ideal.items() if value > 0}
        several_nodes = any(topology(e.run).nodes > 1 for e in entries)
        counts = {1} | {e.run.world_size for e in entries}
        if not ideal or (len(counts) < 3 and not several_nodes):
            continue
        by_topology = defaultdict(list)
        for e in entries:
            by_topology[topology(e.run)].append(e)
        lines = []
        for top, mine in sorted(by_topology.items()):
            by_ranks = defaultdict(list)
            for e in mine:
                by_ranks[e.run.world_size] += e.samples("samples_per_s")
            label = _topology_label(top, mine)
            lines.append(Line(Series(host, hardware, label, False, busy), label, [(n, Spread.of(s)) for n, s in sorted(by_ranks.items())],
                              detail=(top.nodes,)))
        boundaries = sorted({(nodes["count"], nodes["ranks_per_node"]) for e in entries
                             if (nodes := e.run.transport.get("nodes") or {}).get("count", 1) > 1})
        machine = Series(host, hardware, "", False, busy).machine
        title = f"{machine} — {w.title}, global batch {batch}"
        other = {suites.get(run.suite).strategy(run.params) for run in _baseline_runs(entries) if run.suite != suite}
        figures[(host, hardware, busy), w, gpus] = ScalingFigure(title, gpus, lines, ideal, boundaries,
                                                           "".join(f"{name} " for name in sorted(other)), w)
    return list(figures.values())


def _rank_words(on_gpu: bool) -> tuple:
    return ("GPU", "GPUs") if on_gpu else ("process", "processes")


def _across_nodes(found: ScalingFigure, right_of: float) -> bool:
    """Whether every point right of a node boundary is a run over several nodes: only then is that
    side of the figure "N nodes" (a single-node run at the same rank count is not)."""
    return all(line.detail[0] > 1 for line in found.lines for x, _ in line.points if x > right_of)


def scaling_caption(found: ScalingFigure) -> str:
    rank, ranks = _rank_words(found.on_gpu)
    boundary = "; dotted: where the multi-node lines' ranks outgrow one node" if found.boundaries else ""
    efficiencies = ", ".join(f"{label} {value:.0%}" for label, value in found.efficiencies())
    return SCALING_CAPTION.format(ranks=ranks, rank=f"{found.baseline}1-{rank}", one=rank, boundary=boundary,
                                  largest=ranks_label(found.largest, found.on_gpu), efficiencies=efficiencies)


def scaling_figure(found: ScalingFigure) -> Figure:
    """Samples/s against ranks: a line per topology with p5-p95 bars, the ideal dashed from the 1-rank
    baseline, each node boundary a dotted vertical line with the multi-node side shaded."""
    rank, unit = _rank_words(found.on_gpu)
    colours = P.palette([line.series for line in found.lines])
    labels = [line.label for line in found.lines]
    fig = P.figure(4.6 + P.legend_height(len(labels) + 1 + len(found.boundaries), labels))
    ax = fig.add_subplot()
    xs = sorted({1} | {x for line in found.lines for x, _ in line.points})
    ideal = f"ideal: the {found.baseline}1-{rank} throughput × {unit}"
    drawn = [x for x in xs if x in found.ideal]
    ax.plot(drawn, [found.ideal_at(x) for x in drawn], color=P.BASELINE_COLOUR, linestyle="--", linewidth=1.2, label=ideal)
    P.drawn_line(ax, ideal, [(x, found.ideal_at(x)) for x in drawn])
    distinct = P.Distinct()
    for line in found.lines:
        P.errorbar(ax, line, 1.0, distinct.claim(colours.style(line.series)))
    shaded = False
    for count, per_node in found.boundaries:
        # Between one node's rank count and the next measured one: the points left of it fit in a node.
        at = (per_node + min((x for x in xs if x > per_node), default=per_node + 1)) / 2
        ax.axvline(at, color="black", linestyle=":", linewidth=1.2,
                   label=f"node boundary of the lines over {count} nodes: {per_node} {unit if per_node > 1 else rank} a node")
        if not shaded and _across_nodes(found, at):  # shaded and named only where every run there crossed nodes
            shaded = True
            ax.axvspan(at, xs[-1] + 0.5, color="grey", alpha=0.08, linewidth=0)
            P.drawn(ax)["shaded"].append({"from": at, "to": xs[-1] + 0.5, "label": f"{count} nodes"})
            ax.text(at, 1.0, f" {count} nodes →", transform=ax.get_xaxis_transform(), fontsize=8, va="top", ha="left")
    ax.set_xticks(xs, [str(x) for x in xs])
    ax.set_xlim(0.5, xs[-1] + 0.5)
    ax.set_ylim(bottom=0)
    ax.set_xlabel(unit)
    ax.set_ylabel("training throughput (samples/s)")
    title = "\n".join(textwrap.fill(part, TITLE_WRAP) for part in found.title.split(" — "))
    ax.set_title(f"Throughput against {unit} (higher is better; dashed: ideal scaling)\n{title}",
                 fontsize=11)
    ax.grid(True, alpha=0.3)
    P.legend(fig, ax)
    return fig


def scaling_plots(comparison: Comparison, plot, suite: str, workload_of) -> list:
    """The answer's throughput figures of a training suite's runs (scaling_figures), each captioned
    with its scaling efficiency at the largest rank count, for the workloads a report draws."""
    found_all = scaling_figures(comparison, suite, workload_of)
    drawn, left = P.drawn_workloads(found.workload for found in found_all)
    blocks = [plot(scaling_figure, (found,), f"throughput-{suite}-{i}-{P.slug(found.title)}", f"Throughput against "
                   f"{_rank_words(found.on_gpu)[1]}, {found.title}", scaling_caption(found))
              for i, found in enumerate(found_all) if found.workload in drawn]
    said = P.left_out_words(left, "Throughput figures")
    return blocks + ([Paragraph(said)] if said else [])
