"""A verdict (verdict.json of `compare` or `verify`) as JUnit XML, the report CI systems collect
(`--junit FILE`): a testcase per run the original holds, named by its host, suite, parameters, link
and ranks. reproduced passes; slower and faster fail; failed (the new bundle lost the run) is an
error; inconclusive and not comparable are skipped, with their reason. Valid against the JUnit schema
Jenkins reads (junit-10.xsd)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from bench import suites
from bench.common.escape import xml

FAILING = ("slower", "faster")
SKIPPED = ("inconclusive", "not comparable")


def case_name(run: dict, varying: "frozenset[str]" = frozenset()) -> str:
    """"op=all_reduce size_bytes=1048576 in_place=False over default, 2 ranks": the params its suite shows
    for every run, then those that differ between the verdict's runs (`varying`, shown_params')."""
    params = run["params"]
    shown = suites.get(run["suite"]).identity_params if run["suite"] in suites.names() else ()
    keys = [*shown, *sorted(varying - set(shown))] or sorted(params)
    named = " ".join(f"{key}={params[key]}" for key in keys if key in params)
    return f"{named} over {run['transport']}, {run['world_size']} ranks"


def shown_params(runs: list) -> dict:
    """suite -> the params whose values differ between its runs in the verdict."""
    found: dict = {}
    for run in runs:
        for key, value in run["params"].items():
            found.setdefault(run["suite"], {}).setdefault(key, set()).add(repr(value))
    return {suite: frozenset(key for key, values in keys.items() if len(values) > 1) for suite, keys in found.items()}


def message(run: dict) -> str:
    """The verdict in one line: its ratio and interval where it has one, and its reason."""
    said = [run["verdict"]]
    if run.get("ratio") is not None:
        said.append(f"{run['metric']} ratio {run['ratio']:.4g} [{run['ci_low']:.4g}, {run['ci_high']:.4g}], "
                    f"tolerance {run['tolerance']:g}")
    if run.get("reason"):
        said.append(run["reason"])
    if run.get("differs"):
        said.append("differs: " + ", ".join(f"{d['field']} {d['original']} -> {d['new']}" for d in run["differs"]))
    return "; ".join(said)


def text(verdict: dict) -> str:
    runs = verdict["runs"]
    counts = {kind: sum(run["verdict"] in kinds for run in runs) for kind, kinds in
              (("failures", FAILING), ("errors", ("failed",)), ("skipped", SKIPPED))}
    name = f"ddpbench verdict: {verdict['original']['run_id']} against {verdict['new']['run_id']}"
    suite = ET.Element("testsuite", name=xml(name), tests=str(len(runs)), **{k: str(v) for k, v in counts.items()})
    properties = ET.SubElement(suite, "properties")
    for key, value in (("outcome", verdict["outcome"]), ("summary", verdict["summary"]),
                       ("original_sha256", verdict["original"]["sha256"]), ("new_sha256", verdict["new"]["sha256"])):
        ET.SubElement(properties, "property", name=key, value=xml(value))
    varying = shown_params(runs)
    for run in runs:
        case = ET.SubElement(suite, "testcase", name=xml(case_name(run, varying[run["suite"]])), classname=xml(f"{run['host']}.{run['suite']}"))
        outcome = run["verdict"]
        if outcome in FAILING:
            ET.SubElement(case, "failure", type=outcome, message=xml(message(run)))
        elif outcome == "failed":
            ET.SubElement(case, "error", type=outcome, message=xml(message(run)))
        elif outcome in SKIPPED:
            ET.SubElement(case, "skipped", type=outcome, message=xml(message(run)))
    ET.indent(suite)
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"
