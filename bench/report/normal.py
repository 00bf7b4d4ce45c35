"""The report's "Is my number normal?" section and `ddpbench run`'s lines of it: every copy,
collectives, DDP and FSDP figure judged against the expected range of its GPU model and link
(bench/judging/normal.py): within, below with its likely causes, above, or no reference, each
range with its sources."""

from __future__ import annotations

from collections import Counter

from bench.report.document import Bullets, Heading, Paragraph, Table
from bench.report.merge import Comparison
from bench.report.tables import run_label
from bench.judging.normal import NO_REFERENCE, Judgement, judge_host, judgements, source_line

VERDICTS = ("within", "below", "above", NO_REFERENCE)


def _value(judged: Judgement) -> str:
    return f"{judged.value:.4g} {judged.unit}"


def _counts(verdicts: Counter) -> str:
    return ", ".join(f"{verdicts[v]} {v}" for v in VERDICTS if verdicts[v]) or "none"


def section(comparison: Comparison) -> list:
    """A row per figure a range holds, a count of those none holds (and why), the sources cited."""
    judged = [(entry, found) for entry in comparison.runs for found in judgements(entry.run, entry.host.fingerprint)]
    if not judged:
        return []
    if comparison.ranks.cpu:
        return [Heading(2, "Is my number normal?"), Paragraph(
            "The expected ranges (bench/common/reference.py) are per accelerator model and link, so none holds the "
            f"{len(judged)} judged figure(s) of these CPU runs: set them against a run of the same plan on another CPU.")]
    verdicts = Counter(found.verdict for _, found in judged)
    rows = [[entry.host.name, run_label(entry.run), entry.series.transport_label, _value(found), found.expected(),
             found.verdict + (" ⚠" if found.verdict == "below" else ""), found.why or "-"]
            for entry, found in judged if found.verdict != NO_REFERENCE]
    blocks = [Heading(2, "Is my number normal?"), Paragraph(
        f"Each run's judged figures (the median; a scaling efficiency) against the range a correct measurement gives on the same GPU "
        f"model and link, from public figures and this project's own (bench/common/reference.py): {_counts(verdicts)}. "
        "A figure below its range comes with the causes this bundle shows.", warning=bool(verdicts["below"]))]
    if rows:
        blocks.append(Table(["host", "run", "transport", "figure", "expected (GPU, link; sources)", "verdict", "likely causes"], rows))
    missing = Counter(found.why for _, found in judged if found.verdict == NO_REFERENCE)
    if missing:
        blocks.append(Paragraph("No reference for " + "; ".join(f"{n} figure(s): {why}" for why, n in sorted(missing.items()))
                                + ". Ranges exist for few GPUs yet; a bundle of yours can add one."))
    cited = sorted({name for _, found in judged if found.row for name in found.row["sources"]})
    if cited:
        blocks.append(Bullets([source_line(name) for name in cited]))
    return blocks


def summary_lines(bundle: dict) -> list[str]:
    """`ddpbench run`'s lines: per host the verdicts' counts, then one line per figure below its range."""
    lines = []
    for host in bundle["hosts"]:
        judged = judge_host(host)
        if not judged:
            continue
        verdicts = Counter(found.verdict for _, found in judged)
        missing = sorted({found.why for _, found in judged if found.verdict == NO_REFERENCE})
        lines.append(f"normal? host {host['name']}: {len(judged)} figure(s): {_counts(verdicts)}"
                     + (f" ({'; '.join(missing[:3])}{'; ...' if len(missing) > 3 else ''})" if missing else ""))
        lines += [f"below: host {host['name']}: {run.launch_id}: {run_label(run)}: {_value(found)}, expected "
                  f"{found.expected()}; likely: {found.why}" for run, found in judged if found.verdict == "below"]
    return lines
