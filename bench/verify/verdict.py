"""The verdict of a comparison as a table (verdict.md, printed) and as data (verdict.json)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from bench import suites
from bench.common.files import write_text
from bench.common.stats import METHOD, family_method, percent
from bench.outputs import prepare_folder, refuse_non_files
from bench.report import markdown as markdown_renderer
from bench.report.document import Bullets, Heading, Paragraph, Table
from bench.common.units import human_bytes
from bench.verify.compare import VERDICTS, RunVerdict, fitting_tolerance, higher_is_better, stopped_before
from bench.verify.machines import differs_text, said



def _param(key: str, value) -> str:
    if key.endswith("_bytes") and isinstance(value, (int, float)):
        return f"{key[:-len('_bytes')]}={human_bytes(value)}"
    return f"{key}={said(value)}"


def _shown_params(verdicts: "list[RunVerdict]", suite: str) -> list:
    """The params that tell a suite's rows apart, the same way for every suite: its identity params, then each
    other param that splits rows no param before it and no other column (host, transport, ranks, metric) tells
    apart; a plan's scalar params before sweep lists and before what a run records of itself (recorded_params)."""
    mine = [v for v in verdicts if v.suite == suite]
    shown = list(suites.get(suite).identity_params)

    def rows(keys: list) -> int:
        return len({(v.host, v.new_host, v.transport, v.world_size, v.metric,
                     *(json.dumps(v.params.get(k), sort_keys=True) for k in keys)) for v in mine})

    recorded = suites.get(suite).recorded_params
    others = sorted({k for v in mine for k in v.params if k not in shown},
                    key=lambda k: (any(isinstance(v.params.get(k), (list, dict)) for v in mine), k in recorded, k))
    for key in others:
        if rows([*shown, key]) > rows(shown):
            shown.append(key)
    return shown


def params_labels(verdicts: "list[RunVerdict]") -> list[str]:
    """Each run's identifying parameters (_shown_params of its suite)."""
    shown = {suite: _shown_params(verdicts, suite) for suite in {v.suite for v in verdicts}}
    return [" ".join(_param(k, v.params[k]) for k in shown[v.suite] if k in v.params) for v in verdicts]


def _num(x: "float | None") -> str:
    return "-" if x is None else f"{x:.4g}"


def _ratio(v: RunVerdict) -> str:
    if v.ratio is None:
        return "-"
    interval = f" [{v.ci_low:.3f}, {v.ci_high:.3f}]" if v.ci_low is not None else ""
    return f"{v.ratio:.3f}{interval}"


def _verdict(v: RunVerdict) -> str:
    if v.differs:
        return v.verdict + ": " + differs_text(v.differs)
    return v.verdict + (f": {v.reason}" if v.reason else "")


def _between(side: dict) -> str:
    """"3 launches: 1.2%" (measured), "1 launch: floor 2.2%", "1 launch: default 5%": the spread between
    launches a side's interval took."""
    if side["measured_fraction"] is not None:
        return f"{side['launches']} launches: {side['measured_fraction']:.1%}"
    return f"1 launch: {'floor' if side['floor_measured'] else 'default'} {side['floor_fraction']:.1%}"


def _between_cell(v: RunVerdict) -> str:
    if v.between_launches is None:
        return "-"
    return f"original {_between(v.between_launches['original'])}; new {_between(v.between_launches['new'])}"


def _sampled_cell(v: RunVerdict) -> str:
    """Whether each side's sampling met the plan's precision target: "met / not met: budget share"."""
    if v.sampled is None or v.sampled == {"original": None, "new": None}:
        return "-"
    return " / ".join(v.sampled[side] or "none asked" for side in ("original", "new"))


def table(verdicts: "list[RunVerdict]") -> Table:
    levels = {v.level for v in verdicts if v.level is not None}
    label = f"ratio [{percent(levels.pop())} CI]" if len(levels) == 1 else "ratio [CI]"
    paced = any(v.pacing for v in verdicts)
    header = ["host", "suite", "params", "transport", "ranks", "metric", "original", "new", label, "between launches",
              "precision target met (original / new)", *(["paced by (original / new)"] if paced else []), "verdict"]
    rows = []
    for v, params in zip(verdicts, params_labels(verdicts)):
        host = v.host if v.new_host in (v.host, None) else f"{v.host} -> {v.new_host}"
        rows.append([host, v.suite, params, v.transport, str(v.world_size), v.metric,
                     _num(v.original_median), _num(v.new_median), _ratio(v), _between_cell(v), _sampled_cell(v),
                     *([_pacing_cell(v)] if paced else []), _verdict(v)])
    return Table(header, rows)


def _pacing_cell(v: RunVerdict) -> str:
    """"GPU-bound 97% / host-paced 41%": what paced each side's steps."""
    if not v.pacing:
        return "-"
    return " / ".join(v.pacing[side] or "-" for side in ("original", "new"))


def floors_line(verdicts: "list[RunVerdict]") -> "str | None":
    """The launch-to-launch floors the sides of one launch took, each once, in one line; where each was
    measured is in verdict.json (each run's between_launches)."""
    taken = []
    for v in verdicts:
        for side in (v.between_launches or {}).values():
            said = f"{side['floor_fraction']:.1%}" + ("" if side["floor_measured"] else " (a default)")
            if side["measured_fraction"] is None and said not in taken:
                taken.append(said)
    if not taken:
        return None
    return (f"Launch-to-launch floors taken by sides of one launch, which cannot show their own: {', '.join(taken)} (each row's "
            "in its between launches column; where each was measured: verdict.json, each run's between_launches).")


# How the summary names each reason an interval was too wide (compare.INCONCLUSIVE_BECAUSE).
BECAUSE_WORDS = {
    "busy machine": "a busy machine (rerun on an idle one)",
    "host-paced": "steps the host paced, not the GPU (make the GPU's work per launch larger to judge the link)",
    "launches differ": "launches that differ more than samples do (more launches settle it, more samples do not)",
    "noise floor": "a noise floor above the tolerance",
    "too few samples": "too few samples (more settle it)",
    "no interval": "samples that give no interval",
}


def _inconclusive_reasons(verdicts: "list[RunVerdict]", advise: bool) -> str:
    """The rows' reasons, counted; where the original's own spread is wider than the band (not a busy
    machine's), what a rerun identical to it could be judged to; and, with `advise`, the tolerance that
    judges every one of them, or that none does."""
    counts = Counter(v.inconclusive_because for v in verdicts if v.verdict == "inconclusive")
    parts = [f"{counts[name]} for {words}" for name, words in BECAUSE_WORDS.items() if counts[name]]
    floors = sorted(v.noise_floor for v in verdicts if v.verdict == "inconclusive" and v.inconclusive_because != "busy machine"
                    and v.noise_floor is not None and v.noise_floor > v.tolerance)
    if floors:
        low, high = f"{floors[0]:.0%}", f"{floors[-1]:.0%}"
        many = len(floors) > 1
        parts.append(f"{f'{len(floors)} of them' if many else 'one of them'} cannot be judged to the tolerance even against a "
                     f"rerun identical to the original, which would be judged to about {low if low == high else f'{low} to {high}'}")
    if advise:
        parts.append(settling_advice(verdicts))
    return "; ".join(parts)


def settling_advice(verdicts: "list[RunVerdict]") -> str:
    """The --tolerance, per metric, within which every inconclusive run's interval lies, so that the
    same bundles judged with it are reproduced; and how many runs no tolerance settles (no interval)."""
    inconclusive = [v for v in verdicts if v.verdict == "inconclusive"]
    fitting = {}
    for v in inconclusive:
        percent = fitting_tolerance(v.ci_low, v.ci_high)
        if percent is not None:
            fitting[v.metric] = max(fitting.get(v.metric, 0), percent)
    unsettled = len(inconclusive) - sum(1 for v in inconclusive if fitting_tolerance(v.ci_low, v.ci_high) is not None)
    said = []
    if fitting:
        options = " ".join(f"--tolerance {metric}={percent}%" for metric, percent in fitting.items())
        said.append(f"judged with {options}, {'each of them' if len(inconclusive) - unsettled > 1 else 'it'} is reproduced "
                    "(its interval lies within)")
    if unsettled:
        said.append(f"no tolerance settles {'the one' if unsettled == 1 else f'the {unsettled}'} without an interval")
    return "; ".join(said)


def _not_compared(verdicts: "list[RunVerdict]") -> str:
    """Why runs could not be compared: the fields that differ or the reasons, each said once."""
    said = []
    for v in verdicts:
        if v.verdict == "not comparable":
            text = differs_text(v.differs) or v.reason or ""
            if text and text not in said:
                said.append(text)
    return " | ".join(said[:3]) + (f" | and {len(said) - 3} more" if len(said) > 3 else "")


def summary(verdicts: "list[RunVerdict]", result: str, plans_differ: "list[str]", stopped: str = "early") -> str:
    """The verdict's last line; `stopped`: why the new bundle's run stopped before its end (its incomplete_reason)."""
    if result == "same bundle":
        return ("SAME BUNDLE: the original and the new bundle are one bundle (one sha256): a bundle always matches "
                "itself, so nothing was judged; compare it with a rerun (ddpbench verify reruns it)")
    if plans_differ:
        return f"NOT COMPARABLE: the plans differ ({', '.join(plans_differ)}); compare bundles of one plan"
    counts = Counter(v.verdict for v in verdicts)
    figures = ", ".join(f"{counts[name]} {name}" for name in VERDICTS if counts[name])
    compared = sum(counts[name] for name in VERDICTS if name not in ("not comparable", "incomplete"))
    if result == "not comparable":
        return f"NOT COMPARABLE: no run could be compared ({figures}): {_not_compared(verdicts)}"
    uncompared = f"; {counts['not comparable']} not comparable: {_not_compared(verdicts)}" if counts["not comparable"] else ""
    unreached = f"; {counts['incomplete']} incomplete: {stopped_before(stopped, 'them')}" if counts["incomplete"] else ""
    undecided = f"; the inconclusive ones: {_inconclusive_reasons(verdicts, advise=False)}" if counts["inconclusive"] else ""
    if result == "passed":
        return f"PASS: every compared run reproduced ({figures}){uncompared}"
    if result == "incomplete":
        unmeasured = f"{counts['incomplete']} of {compared + counts['incomplete']} runs"
        judged = f"none of the {compared} compared differed" if compared else "nothing was compared"
        return f"INCOMPLETE: {stopped_before(stopped, unmeasured)}, no evidence either way; {judged} ({figures}){undecided}{uncompared}"
    if result == "inconclusive":
        return (f"INCONCLUSIVE: {counts['inconclusive']} of {compared} compared runs could not be judged, none differed "
                f"({figures}): {_inconclusive_reasons(verdicts, advise=True)}{uncompared}")
    differed = compared - counts["reproduced"] - counts["inconclusive"]
    return f"FAIL: {differed} of {compared} compared runs did not reproduce ({figures}){undecided}{unreached}{uncompared}"


def document(context: dict, verdicts: "list[RunVerdict]", result: str) -> dict:
    """verdict.json: the context (bundles, signatures, host pairs, deviations, tolerances), the method and each run."""
    judged = [v for v in verdicts if v.level is not None]
    method = family_method(judged[0].level, len(judged)) if judged else METHOD
    return {
        "kind": "ddpbench.verdict", **context, "method": "ratio = new median / original median; " + method,
        "outcome": result, "passed": result == "passed",
        "summary": summary(verdicts, result, context["plans_differ"], context["rerun_stopped"] or "early"), "runs": [v.to_json() for v in verdicts],
    }


def left_out_name(item: dict) -> str:
    """"host gpubox" or "suites[1]": what a rerun left out."""
    return f"host {item['host']}" if "host" in item else f"suites[{item['entry']}]"


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
    items += [f"deviation: {d['field']}{' on ' + d['host'] if d.get('host') else ''}: {said(d['original'])} -> {said(d['used'])} "
              f"({d['note']})" for d in doc["deviations"]]
    items += [f"left out of the rerun: {left_out_name(item)}: {item['reason']}" for item in doc.get("left_out", [])]
    items += [
        f"method: {doc['method']}",
        f"tolerance: reproduced when the ratio's whole interval lies within a factor 1 + tolerance either way, "
        f"slower or faster when it lies wholly outside, inconclusive otherwise; {tolerances}",
    ]
    floors = floors_line(verdicts)
    blocks = [Heading(1, f"Verdict: {original['run_id']} against {new['run_id']}"), Bullets(items),
              *([table(verdicts)] if verdicts else []), *([Paragraph(floors)] if floors else []),
              Paragraph(doc["summary"], strong=True)]
    return markdown_renderer.render(blocks)


def write(out_dir: Path, doc: dict, text: str) -> tuple[Path, Path]:
    prepare_folder(out_dir, "verdict's folder")
    paths = out_dir / "verdict.md", out_dir / "verdict.json"
    refuse_non_files(paths, "verdict")
    for path, content in zip(paths, (text, json.dumps(doc, indent=1) + "\n")):
        write_text(path, content)
    return paths
