"""The report's first section: does the link slow training here, by how much, and over which link.

Each suite that trains (ddp, fsdp) says what its runs found through two optional
functions of its report part: `findings(comparison) -> list[Finding]` and
`answer_plots(comparison, plot, colours) -> list[Plot]` (ddp's per-sample time x #GPUs). This module
turns the findings of every suite into one figure, the throughput lost per workload and link with a
panel per machine (lost_figure.py), a verdict line per machine and workload, a table of every
finding, and then those plots. A finding may be predicted rather than measured (a link the user
does not have, from the predictor) and may carry notes (an expected range judged): both
are shown as they come; the figure draws the measured ones.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from bench import suites
from bench import schemas
from bench.common.sampling import Precision
from bench.common.stats import LEVEL_LABEL, Spread
from bench.common.units import count, plain, time_unit
from bench.judging import shared_machine
from bench.report import lost_figure as LF
from bench.report import plots as P
from bench.report import tables as T
from bench.report.document import Bullets, Heading, Paragraph, Table
from bench.report.merge import Comparison, Ranks, Series
from bench.suites.training import TrainingSuite
from bench.suites.training.pacing import ADVICE, HOST_PACED, Pacing

TITLE = "The answer: does the link slow training?"
# Throughput lost to scaling (1 - scaling efficiency): below the first, negligible; to the second, noticeable; past it, severe.
NEGLIGIBLE_BELOW = 0.05
SEVERE_ABOVE = 0.15


def thresholds(ranks: Ranks) -> str:
    return (f"Verdicts judge the training throughput N {ranks.many} lose against N times one {ranks.one} (1 − scaling "
            f"efficiency, its {LEVEL_LABEL} in brackets, as measured: an end below 0 lies above perfect scaling): negligible "
            f"under {NEGLIGIBLE_BELOW:.0%} lost, noticeable to {SEVERE_ABOVE:.0%}, severe past it. Exposed communication: the "
            f"step time less the 1-{ranks.one} step time for the same work per {ranks.one}." + (" Every rank is a process on this CPU, talking over gloo." if ranks.cpu else ""))

def busy_apart(ranks: Ranks) -> str:
    return (f"Runs marked (busy) ran while other processes took more than {shared_machine.BUSY_ABOVE_FRACTION:.0%} of the "
            "machine's CPU (or their 1-rank baseline did)" + ("" if ranks.cpu else ", or were on its GPUs") +
            ": every table and figure keeps them apart from the quiet runs of the same machine, whose samples they never join.")


@dataclass(frozen=True)
class Finding:
    """What one machine's link costs one workload's training at one global batch."""

    series: Series  # host, GPUs and link, and the transport NCCL really used
    workload: str  # "gpt2 bf16"
    ranks: str  # "2 GPUs", "2 processes"; "1 GPU" where only the baseline ran
    global_batch: int
    step_s: float  # median step time
    efficiency: "Spread | None" = None  # scaling efficiency (fraction) with its interval; None: no multi-rank run
    exposed_s: "float | None" = None  # communication no computation hid, per step (median)
    flags: str = ""  # " ⚠ code, ...": the runs' implausible figures (the suite's warnings table says why)
    notes: tuple = ()  # lines another part adds to this finding (an expected range judged, say)
    predicted: bool = False  # a predicted figure (a link these bundles did not measure), not a measured one
    baseline: str = ""  # the run it is scaled against, where that is not its own on one rank: "ddp's 1-GPU run"
    hosts: frozenset = frozenset()  # (bundle run id, host name) of the runs it pools: what a bundle's warning concerns
    sampled: "str | None" = None  # how its runs' sampling toward the plan's precision ended (sampling_outcome)
    pacing: "Pacing | None" = None  # what paced its steps and its baseline's (bench/suites/training/pacing.py)

    @property
    def host_paced(self) -> bool:
        """Whether the host paced its steps: its "lost" then measures the host, not the link."""
        return self.pacing is not None and self.pacing.verdict == HOST_PACED

    @property
    def lost(self) -> "float | None":
        return None if self.efficiency is None else 1 - self.efficiency.median


def verdict(lost: float) -> str:
    if lost < NEGLIGIBLE_BELOW:
        return "negligible"
    return "noticeable" if lost <= SEVERE_ABOVE else "severe"


def judged(finding: Finding) -> str:
    """The verdict, and where its interval reaches another verdict, how far."""
    word = verdict(finding.lost)
    spread = finding.efficiency
    if spread.low is None or spread.high is None:
        return word
    ends = [end for end in dict.fromkeys((verdict(1 - spread.high), verdict(1 - spread.low))) if end != word]
    return f"{word} (the interval reaches {' and '.join(ends)})" if ends else word


def _percent(value: float) -> str:
    return f"{value * 100:.1f}%"


def _interval(spread: Spread) -> str:
    if spread.low is None or spread.high is None:
        return f"{_percent(spread.median)} [-, -]"
    return f"{_percent(spread.median)} [{spread.low * 100:.1f}, {spread.high * 100:.1f}]"


def _lost(finding: Finding) -> str:
    """"20% lost [18, 23]": the interval of the loss is the efficiency's, turned around, as measured (the
    figure draws the same; an end below 0 is scaling above perfect, within the noise); a median above
    perfect scaling (no correct measurement gives it: flagged ⚠) is said as such."""
    spread = finding.efficiency
    interval = "" if spread.low is None or spread.high is None else f"[{(1 - spread.high) * 100:.1f}, {(1 - spread.low) * 100:.1f}]"
    if finding.lost < 0:
        return f"none lost ({_percent(-finding.lost)} above perfect scaling{', lost ' + interval if interval else ''})"
    return f"{_percent(finding.lost)} lost" + (f" {interval}" if interval else "")


def lost_target(comparison: Comparison) -> float:
    """The widest "lost" interval the bundles' plans asked for (their precision); the default where none asked."""
    asked = [p.lost_width_fraction for p in map(Precision.of, (b["plan"] for b in comparison.bundles if "plan" in b)) if p is not None]
    return max(asked, default=schemas.schema("plan")["$defs"]["precision"]["properties"]["lost_width_fraction"]["default"])


def precision(finding: Finding, target: float) -> str:
    """"4.1 points wide, within the 5-point target": the lost interval against the plans' target, and where it
    is wider, what stopped its runs' sampling (more launches narrow what sampling cannot)."""
    spread = finding.efficiency
    if spread is None or spread.low is None or finding.predicted:
        return "-"
    width = (spread.high - spread.low) * 100
    said = f"{width:.1f} points wide, {'within' if width <= target * 100 else 'wider than'} the {target * 100:g}-point target"
    if width <= target * 100:
        return said
    if finding.sampled is None:
        return said + " (no precision asked of these runs)"
    if finding.sampled == "met":
        return said + ": each run met its own target, so its launches differ: more launches narrow it"
    return said + f": its runs stopped sampling short of their target ({finding.sampled.removeprefix('not met: ')})"


def _exposed(finding: Finding) -> str:
    if finding.exposed_s is None:
        return "-"
    factor, unit = time_unit([finding.step_s])
    return f"{plain(finding.exposed_s * factor)} of {plain(finding.step_s * factor)} {unit}"


def _link(finding: Finding) -> str:
    return finding.series.transport_label + (" (predicted)" if finding.predicted else "")


def _headline(findings: list[Finding]) -> Finding:
    """The finding a line leads with: NCCL's own choice (preset default) measured, at the largest batch."""
    return max(findings, key=lambda f: (not f.predicted, f.series.transport.startswith("default"), f.global_batch))


def _busy(others: list) -> str:
    """What a verdict measured on a busy machine says before it ("" on a quiet one)."""
    return f"measured on a busy machine ({'; '.join(others)}), " if others else ""


def _line(machine: str, workload: str, ranks: str, findings: list[Finding], others: list, target: float) -> str:
    """One verdict line; `others`: what other processes took while a busy machine measured these findings."""
    scaled = [f for f in findings if f.efficiency is not None]
    busy = _busy(others)
    quiet = " Rerun on a quiet machine for this machine's own figures." if others else ""
    if not scaled:
        base = max(findings, key=lambda f: f.global_batch)
        step = f"step {base.step_s * 1e3:.4g} ms at global batch {base.global_batch}"
        if base.ranks.startswith("1 "):
            return f"{machine} — {workload}: only {base.ranks} ran, so no link to judge ({busy}{step}); run it on 2 or more to answer."
        return (f"{machine} — {workload}, {ranks} over {_link(base)}: no scaling to judge ({busy}{step}): these bundles hold no "
                "1-rank run of the same shape to set it against; run world size 1 beside it.")
    head = _headline(scaled)
    if head.host_paced:
        text = (f"{machine} — {workload}, {ranks} over {_link(head)}: {busy}{head.pacing.words()}, so its {_lost(head)} of the "
                f"training throughput{_against(head)}{head.flags} measures the host, not the link; to judge the link, {ADVICE}")
    else:
        text = (f"{machine} — {workload}, {ranks} over {_link(head)}: {busy}{judged(head)}, {_lost(head)} of the training "
                f"throughput{_against(head)}{head.flags}" + (f", {head.pacing.words()}" if head.pacing else ""))
    if precision(head, target) != "-":
        text += f" (its interval {precision(head, target)})"
    if head.exposed_s is not None:
        text += f"; {_exposed(head)} per step is exposed communication"
    same = sorted((f for f in scaled if f.series == head.series and f.predicted == head.predicted and f is not head),
                  key=lambda f: f.global_batch)
    text += f" (global batch {head.global_batch}" + "".join(f"; at {f.global_batch}: {_percent(f.lost)} lost" for f in same) + ")."
    others = defaultdict(list)
    for f in scaled:
        if (f.series, f.predicted) != (head.series, head.predicted):
            others[(f.series, f.predicted)].append(f)
    for _, mine in sorted(others.items()):
        other = max(mine, key=lambda f: f.global_batch)
        said = "host-paced, not a link verdict" if other.host_paced else verdict(other.lost)
        text += f" Over {_link(other)}: {said}, {_lost(other)}{other.flags} (global batch {other.global_batch})."
    for note in head.notes:
        text += f" {note}"
    return text + quiet


def _against(finding: Finding) -> str:
    return f" against {finding.baseline}" if finding.baseline else ""


def _table(findings: list[Finding], ranks: Ranks, target: float) -> Table:
    rows = []
    for f in findings:
        scaled = f.efficiency is not None
        rows.append([f.series.machine, f.workload, f.ranks, _link(f), str(f.global_batch),
                     _interval(f.efficiency) + f.flags if scaled else "-",
                     _verdict_cell(f) if scaled else ("no link (1 rank)" if f.ranks.startswith("1 ") else "no baseline"),
                     precision(f, target), _exposed(f), f.pacing.short() if f.pacing else "-"])
    machine, link = ("host · hardware", "transport used") if ranks.cpu else ("host · GPUs and link", "link NCCL used")
    return Table([machine, "workload", "ranks", link, "global batch", f"scaling % [{LEVEL_LABEL}]",
                  "verdict: throughput lost", "its interval against the precision target", "exposed communication of step",
                  "paced by" if ranks.cpu else "paced by (GPU busy share)"], rows)


def _verdict_cell(f: Finding) -> str:
    if f.host_paced:
        return f"not a link verdict: {_lost(f)}{_against(f)} measures the host (its steps were host-paced)"
    return f"{judged(f)}: {_lost(f)}{_against(f)}"


def _parts(comparison: Comparison) -> list:
    present = {run.suite for host in comparison.hosts for run in host.runs}
    found = [suites.get(name) for name in present]
    return [part for part in (suite.report_section() for suite in sorted(found, key=lambda s: (s.report_order, s.name)))
            if part is not None and hasattr(part, "findings")]


def shared_hosts(comparison: Comparison) -> dict:
    """(bundle run id, host name) -> the warning of its bundle that it and other hosts were one machine
    (they ran at the same time: nothing they measured is that machine's alone)."""
    said = {}
    for bundle in comparison.bundles:
        for names, line in zip(shared_machine.shared(bundle["hosts"]), shared_machine.warnings(bundle["hosts"])):
            said.update({(bundle["run_id"], name): f"Bundle {bundle['run_id']}: {line}." for name in names})
    return said


def _drawable(efficiency: "Spread | None") -> bool:
    """An efficiency whose share lost is a number: not one past a float's range as a percentage (a 1-GPU time
    of days over an N-GPU one of a few ns, which the schema accepts)."""
    return efficiency is not None and all(math.isfinite(100 * (1 - v)) for v in (efficiency.median, efficiency.low, efficiency.high)
                                          if v is not None)


def _figure_rows(findings: list[Finding], concerned) -> list[LF.Row]:
    """A row per machine, workload, rank count and global batch, a point per link: each link measured
    at its largest global batch (the one its line leads with)."""
    largest = {}
    for f in findings:
        key = (f.series, f.workload, f.ranks)
        if _drawable(f.efficiency) and not f.predicted and (key not in largest or f.global_batch > largest[key].global_batch):
            largest[key] = f
    rows = defaultdict(list)
    for f in sorted(largest.values(), key=_order):
        rows[(f.series.machine, f.workload, f.ranks, f.global_batch)].append(f)
    found = []
    for (machine, workload, ranks, batch), mine in rows.items():
        warned = any(f.flags or concerned(f) for f in mine)
        paced = " · host-paced: measures the host" if any(f.host_paced for f in mine) else ""
        points = tuple(LF.Lost(_link(f), 100 * (1 - f.efficiency.median),
                               None if f.efficiency.high is None else 100 * (1 - f.efficiency.high),
                               None if f.efficiency.low is None else 100 * (1 - f.efficiency.low)) for f in mine)
        found.append(LF.Row(machine, workload, f"{ranks} · global batch {batch}{paced}", warned, points))
    return found


def _answer_figure(findings: list[Finding], comparison: Comparison, plot, concerned) -> list:
    rows = _figure_rows(findings, concerned)
    if not rows:
        return []
    drawn, left = P.drawn_workloads(row.workload for row in rows)
    rows = [row for row in rows if row.workload in drawn]
    ranks = comparison.ranks
    caption = (f"Each point: the share of training throughput N {ranks.many} lose against N times one {ranks.one} (1 − scaling "
               f"efficiency), with its {LEVEL_LABEL}, a point per link at the largest global batch measured; a panel per "
               f"machine. Shaded: negligible under {NEGLIGIBLE_BELOW:.0%}, noticeable to {SEVERE_ABOVE:.0%}, severe past it. "
               "⚠: a flagged figure, or hosts that shared a machine; the lines below say which."
               + (" " + P.left_out_words(left, "The points") if left else ""))
    bands = (NEGLIGIBLE_BELOW * 100, SEVERE_ABOVE * 100)
    return [plot(LF.lost_figure, (rows, bands, ranks.many, LEVEL_LABEL), "answer-throughput-lost", "Throughput lost per workload and link",
                 caption)]


def section(comparison: Comparison, plot, colours: dict) -> list:
    """The answer: its figure (the throughput lost per workload and link, a panel per machine) first,
    then a verdict line per machine, workload and rank count, every finding in a table, then the
    figures that show it (the throughput and the per-sample time x #GPUs per workload). A warning of
    one bundle (its hosts shared a machine) stands in the lines of the findings it concerns."""
    parts = _parts(comparison)
    findings = [finding for part in parts for finding in part.findings(comparison)]
    blocks = [Heading(2, TITLE)]
    busy = {entry.series for entry in comparison.runs if entry.series.busy}
    apart = [Paragraph(busy_apart(comparison.ranks), warning=True)] if busy else []
    if not findings:
        return blocks + [Paragraph(_no_training(comparison), warning=True)] + apart
    shared = shared_hosts(comparison)

    def concerned(finding: Finding) -> list[str]:
        return sorted({shared[host] for host in finding.hosts if host in shared})

    groups = defaultdict(list)
    for f in findings:
        groups[(f.series.machine, f.workload, f.ranks)].append(f)
    target = lost_target(comparison)
    lines = [_line(machine, workload, ranks, mine, _others(comparison, {f.series for f in mine} & busy), target)
             + "".join(f" ⚠ {said}" for said in sorted({said for f in mine for said in concerned(f)}))
             for (machine, workload, ranks), mine in sorted(groups.items())]
    blocks += [*_answer_figure(findings, comparison, plot, concerned), Paragraph(thresholds(comparison.ranks)), Bullets(lines),
               _table(sorted(findings, key=_order), comparison.ranks, target), *apart]
    for part in parts:
        if hasattr(part, "answer_plots"):
            blocks += part.answer_plots(comparison, plot, colours)
    return blocks


def _no_training(comparison: Comparison) -> str:
    """Why the answer has no finding: a host failed, the training runs or launches failed, or the plans train nothing."""
    training = sorted(name for name in suites.names() if isinstance(suites.get(name), TrainingSuite))
    plans = [bundle["plan"] for bundle in comparison.bundles if "plan" in bundle]  # an imported bundle has none
    planned = sorted({entry["suite"] for plan in plans for entry in plan["suites"]} & set(training))
    hosts = [host.name for host in T.failed_hosts(comparison)]
    launches = [launch for host in comparison.hosts for launch in host.host["launches"]]
    runs = any(entry.run.suite in training for entry in comparison.failed) or any(
        launch["suite"] in training and launch["status"] in ("failed", "timeout") for launch in launches)
    if planned and (hosts or runs):
        why = f"{count(len(hosts), 'host')} failed ({', '.join(hosts)})" if hosts else f"its {' and '.join(planned)} runs failed"
        return (f"No training run measured: the plan trains ({', '.join(planned)}), but {why}, so nothing says how much the "
                "link costs training. What failed, at the end, says why; fix it and run the plan again.")
    advice = ("Run a plan that trains (quick, seed000, seed001, seed001-sharded or seed002); the sections below show"
              if not planned else "The sections below show")
    return (f"No training run in these bundles (suites {', '.join(training)}): nothing says how much the link costs training. "
            f"{advice} what the links themselves do.")


def _others(comparison: Comparison, series: set) -> list[str]:
    """What other processes took while the runs of these (busy) series ran: the CPU's share, the GPUs they were on."""
    entries = [entry for entry in comparison.runs if entry.series in series]
    shares = [entry.others_share for entry in entries if shared_machine.busy(entry.others_share)]
    held = sorted({gpu for entry in entries for gpu in shared_machine.gpus_held(entry.host.fingerprint)})
    return ([f"others took {shared_machine.taken(shares)} of the CPU"] if shares else []) + (
        [f"other processes were on {', '.join(held)}"] if held else [])


def _order(f: Finding) -> tuple:
    return (f.series.machine, f.workload, f.ranks, f.predicted, f.series.transport_label, f.global_batch)
