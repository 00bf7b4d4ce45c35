"""The verdict of a comparison as a table (verdict.md, printed) and as data (verdict.json)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from bench import suites
from bench.common.files import write_text
from bench.common.stats import METHOD, family_method, percent
from bench.outputs import prepare_folder
from bench.report import markdown as markdown_renderer
from bench.report.document import Bullets, Heading, Paragraph, Table
from bench.common.units import human_bytes
from bench.verify.compare import VERDICTS, RunVerdict, higher_is_better



def _param(key: str, value) -> str:
    if key.endswith("_bytes") and isinstance(value, (int, float)):
        return f"{key[:-len('_bytes')]}={human_bytes(value)}"
    return f"{key}={value}"


def params_labels(verdicts: "list[RunVerdict]") -> list[str]:
    """Each run's identifying parameters: the suite's usual ones plus those that vary between its runs."""
    varying: dict = {}
    for suite in {v.suite for v in verdicts}:
        runs = [v.params for v in verdicts if v.suite == suite]
        keys = sorted({k for p in runs for k in p})
        always = suites.get(suite).identity_params  # shown for every run of the suite, varying or not
        varying[suite] = list(always) + [
            k for k in keys if k not in always and len({json.dumps(p.get(k), sort_keys=True) for p in runs}) > 1
        ]
    return [" ".join(_param(k, v.params[k]) for k in varying[v.suite] if k in v.params) for v in verdicts]


def _num(x: "float | None") -> str:
    return "-" if x is None else f"{x:.4g}"


def _ratio(v: RunVerdict) -> str:
    if v.ratio is None:
        return "-"
    interval = f" [{v.ci_low:.3f}, {v.ci_high:.3f}]" if v.ci_low is not None else ""
    return f"{v.ratio:.3f}{interval}"


def _verdict(v: RunVerdict) -> str:
    if v.differs:
        return v.verdict + ": " + "; ".join(f"{d['field']} {d['original']} -> {d['new']}" for d in v.differs)
    return v.verdict + (f": {v.reason}" if v.reason else "")


def table(verdicts: "list[RunVerdict]") -> Table:
    levels = {v.level for v in verdicts if v.level is not None}
    label = f"ratio [{percent(levels.pop())} CI]" if len(levels) == 1 else "ratio [CI]"
    header = ["host", "suite", "params", "transport", "ranks", "metric", "original", "new", label, "verdict"]
    rows = []
    for v, params in zip(verdicts, params_labels(verdicts)):
        host = v.host if v.new_host in (v.host, None) else f"{v.host} -> {v.new_host}"
        rows.append([host, v.suite, params, v.transport, str(v.world_size), v.metric,
                     _num(v.original_median), _num(v.new_median), _ratio(v), _verdict(v)])
    return Table(header, rows)


def summary(verdicts: "list[RunVerdict]", result: str, plans_differ: "list[str]") -> str:
    if result == "not comparable":
        return f"NOT COMPARABLE: the plans differ ({', '.join(plans_differ)}); compare bundles of one plan"
    counts = Counter(v.verdict for v in verdicts)
    figures = ", ".join(f"{counts[name]} {name}" for name in VERDICTS if counts[name])
    compared = sum(counts[name] for name in VERDICTS if name != "not comparable")
    if result == "passed":
        return f"PASS: every compared run reproduced ({figures})"
    if result == "inconclusive":
        return (f"INCONCLUSIVE: {counts['inconclusive']} of {compared} compared runs could not be judged, none differed "
                f"({figures}); their intervals are too wide for the tolerance: more samples settle it")
    if not compared:
        return f"FAIL: no run could be compared ({figures})"
    differed = compared - counts["reproduced"] - counts["inconclusive"]
    return f"FAIL: {differed} of {compared} compared runs did not reproduce ({figures})"


def document(context: dict, verdicts: "list[RunVerdict]", result: str) -> dict:
    """verdict.json: the context (bundles, signatures, host pairs, deviations, tolerances), the method and each run."""
    judged = [v for v in verdicts if v.level is not None]
    method = family_method(judged[0].level, len(judged)) if judged else METHOD
    return {
        "kind": "ddpbench.verdict", **context, "method": "ratio = new median / original median; " + method,
        "outcome": result, "passed": result == "passed",
        "summary": summary(verdicts, result, context["plans_differ"]), "runs": [v.to_json() for v in verdicts],
    }


def markdown(doc: dict, verdicts: "list[RunVerdict]") -> str:
    original, new = doc["original"], doc["new"]
    tolerances = ", ".join(
        f"{m} {t:g} ({'lower' if higher_is_better(m) else 'higher'} is slower)" for m, t in doc["tolerances"].items()
    )
    items = [
        f"original: run {original['run_id']}, sha256 {original['sha256'][:16]}..., {original['signature']['text']}",
        f"new: run {new['run_id']}, sha256 {new['sha256'][:16]}..., {new['signature']['text']}",
        "hosts paired " + doc["hosts_paired"] + ": " + ", ".join(f"{p['original']} -> {p['new'] or '(none)'}" for p in doc["host_pairs"]),
    ]
    items += [f"deviation: {d['field']}{' on ' + d['host'] if d.get('host') else ''}: {d['original']} -> {d['used']} ({d['note']})" for d in doc["deviations"]]
    items += [
        f"method: {doc['method']}",
        f"tolerance: reproduced when the ratio's whole interval lies within a factor 1 + tolerance either way, "
        f"slower or faster when it lies wholly outside, inconclusive otherwise; {tolerances}",
    ]
    blocks = [Heading(1, f"Verdict: {original['run_id']} against {new['run_id']}"), Bullets(items),
              *([table(verdicts)] if verdicts else []), Paragraph(doc["summary"], strong=True)]
    return markdown_renderer.render(blocks)


def write(out_dir: Path, doc: dict, text: str) -> tuple[Path, Path]:
    prepare_folder(out_dir, "verdict's folder")
    paths = out_dir / "verdict.md", out_dir / "verdict.json"
    for path, content in zip(paths, (text, json.dumps(doc, indent=1) + "\n")):
        write_text(path, content)
    return paths
