"""The report's "Is my number normal?" section: every figure of the runs' suites as the judging found
it against the expected range of its key (bench/judging/normal.py): within, below with its likely
causes, above, or no reference, each range with its sources, and for a training run what paced it."""

from __future__ import annotations

from collections import Counter

from bench.judging.normal import NO_REFERENCE, Judgement, counts
from bench.judging.ranges import source_line
from bench.report.document import Bullets, Heading, Paragraph, Table
from bench.report.merge import Comparison


def _value(judged: Judgement) -> str:
    return f"{judged.value:.4g} {judged.unit}"


def section(comparison: Comparison) -> list:
    """A row per figure a range holds, a count of those none holds (and why), the sources cited."""
    judged = [(entry, found) for entry in comparison.runs for found in entry.verdicts.figures]
    if not judged:
        return []
    if comparison.ranks.cpu:
        return [Heading(2, "Is my number normal?"), Paragraph(
            "The expected ranges (the expected.json of each suite's folder) are per accelerator model and link, so none holds the "
            f"{len(judged)} judged figure(s) of these CPU runs: set them against a run of the same plan on another CPU.")]
    verdicts = Counter(found.verdict for _, found in judged)
    ranged = [(entry, found) for entry, found in judged if found.verdict != NO_REFERENCE]
    # A training figure is about the link only where the GPU paced its steps: each row says what did.
    paced = {id(entry): entry.suite.pacing([entry.run]) for entry, _ in ranged}
    rows = [[entry.host.name, entry.label, entry.series.transport_label, _value(found), found.expected(),
             found.verdict + (" ⚠" if found.verdict == "below" else ""), found.why or "-"]
            + ([paced[id(entry)].short() if paced[id(entry)] else "-"] if any(paced.values()) else [])
            for entry, found in ranged]
    blocks = [Heading(2, "Is my number normal?"), Paragraph(
        f"Each run's judged figures (the median; a scaling efficiency) against the range a correct measurement gives on the same GPU "
        f"model and link, from public figures and this project's own (the expected.json of each suite's folder): {counts(verdicts)}. "
        "A figure below its range comes with the causes this bundle shows.", warning=bool(verdicts["below"]))]
    if rows:
        blocks.append(Table(["host", "run", "transport", "figure", "expected (GPU, link; sources)", "verdict", "likely causes"]
                            + (["paced by (GPU busy share)"] if any(paced.values()) else []), rows))
    missing = Counter(found.why for _, found in judged if found.verdict == NO_REFERENCE)
    if missing:
        blocks.append(Paragraph("No reference for " + "; ".join(f"{n} figure(s): {why}" for why, n in sorted(missing.items()))
                                + ". Ranges exist for few GPUs yet; a bundle of yours can add one."))
    cited = sorted({name for _, found in judged if found.row for name in found.row["sources"]})
    if cited:
        blocks.append(Bullets([source_line(name) for name in cited]))
    return blocks
