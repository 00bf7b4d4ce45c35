"""`ddpbench run`'s lines of the judging, for the bundle it just wrote: per host the verdicts' counts
of its figures against their expected ranges (normal.py), then a line per figure below its range."""

from __future__ import annotations

from collections import Counter

from bench import suites
from bench.common.run import Run
from bench.judging.host import Host
from bench.judging.normal import NO_REFERENCE, counts, judgements


def judge_host(host: dict) -> list:
    """(run, Judgement) for every figure of every ok run of a bundle's host that its suite gives."""
    facts = Host.of(host.get("fingerprint"))
    return [(run, found) for run in map(Run, host["runs"]) if run.ok for found in judgements(run, facts, suites.get(run.suite))]


def summary_lines(bundle: dict) -> list[str]:
    """`ddpbench run`'s lines: per host the verdicts' counts, then one line per figure below its range."""
    lines = []
    for host in bundle["hosts"]:
        judged = judge_host(host)
        if not judged:
            continue
        verdicts = Counter(found.verdict for _, found in judged)
        missing = sorted({found.why for _, found in judged if found.verdict == NO_REFERENCE})
        lines.append(f"normal? host {host['name']}: {len(judged)} figure(s): {counts(verdicts)}"
                     + (f" ({'; '.join(missing[:3])}{'; ...' if len(missing) > 3 else ''})" if missing else ""))
        lines += [f"below: host {host['name']}: {run.launch_id}: {suites.get(run.suite).label(run)}: {found.value:.4g} "
                  f"{found.unit}, expected {found.expected()}; likely: {found.why}" for run, found in judged if found.verdict == "below"]
    return lines
