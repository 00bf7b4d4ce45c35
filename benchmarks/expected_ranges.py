"""This project's own expected ranges ("is my number normal?") from its bundles in benchmarks/results/bundles/.

    python benchmarks/expected_ranges.py            # say which suites' expected.json the bundles would change
    python benchmarks/expected_ranges.py --write    # and write them

Every GPU bundle there (.json or .json.gz) becomes a source (its run id, date and machine) and its runs'
figures ranges (bench/judging/own_ranges.py): per suite, figure, GPU model, link and key (ranks, nodes, NCCL
algorithm, protocol and env, path, dtype, size, recipe), from the lowest median to the highest, each widened
by 5% either way or, where wider, by the launch-to-launch spread of its kind, or to its run's p5-p95 where
wider still (docs/report.md, "Is my number normal?"). Each suite's bench/suites/NAME/expected.json keeps its
rows written by hand (those without `runs`) and gets these. To add a box (4x H200, say), copy its bundle into
benchmarks/results/bundles/ and run this with --write; tests/judging/test_ranges.py fails while the files and
the bundles disagree. It ends with the runs that fill the table (TABLE_RUNS) and how many bundles of each
are here. Standard library and bench only; no GPU.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import suites  # noqa: E402
from bench.common.links import link_summary  # noqa: E402
from bench.judging.own_ranges import measured_ranges  # noqa: E402
from bench.judging.ranges import FILE  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
BUNDLES = REPO / "benchmarks" / "results" / "bundles"
# The runs that give a range to every figure the shipped plans quick, scaling, pairs, copy and
# collectives-sweep print on 1, 2 or 4 GPUs of a model this project is lent: (plan, GPUs) each, on
# each of LENT_GPUS. A 1-GPU machine's figures are the 1-rank runs of these; pairs' are quick's
# 2-rank all-reduce and copy's device-to-device copies, every pair of an NV18 box being alike.
# tests/judging/test_own_ranges.py holds that ranges made of these alone judge every figure of those
# plans on 1, 2 and 4 GPUs, and that each is needed.
TABLE_RUNS = (("quick", 2), ("quick", 4), ("scaling", 2), ("scaling", 4), ("copy", 2), ("collectives-sweep", 2),
              ("collectives-sweep", 4))
LENT_GPUS = ("NVIDIA H100 80GB HBM3", "NVIDIA H200")
# Bundles of each wanted: a configuration measured in two launches shows its kind's launch-to-launch spread.
TABLE_BUNDLES = 2


def read(path: Path) -> dict:
    data = path.read_bytes()
    return json.loads(gzip.decompress(data) if path.suffix == ".gz" else data)


def gpu_bundles() -> list[tuple[str, Path, dict]]:
    """(source name, path, bundle) of every bundle whose first host has GPUs, by run id."""
    found = []
    for path in sorted(BUNDLES.glob("*.bundle.json*")):
        bundle = read(path)
        fp = bundle["hosts"][0].get("fingerprint") or {}
        gpus = fp.get("gpus") or []
        if not gpus:
            continue
        model = re.search(r"\b([A-Z]+\d+)\b", gpus[0]["name"])
        found.append((f"ddpbench-{(model[1] if model else 'gpu').lower()}x{len(gpus)}-{bundle['run_id'][-6:]}", path, bundle))
    return sorted(found, key=lambda item: item[2]["run_id"])


def bundle_source(path: Path, bundle: dict) -> dict:
    """A bundle as a source: its run id, plan, date and machine."""
    return {"title": f"ddpbench bundle {bundle['run_id']}, plan {bundle['plan']['name']}", "path": str(path.relative_to(REPO)),
            "bundle": bundle["run_id"], "date": bundle["started_at"][:10],
            "machine": link_summary(bundle["hosts"][0]["fingerprint"])["link_label"],
            "says": "its runs' medians and p5-p95, which this project's measured ranges take (benchmarks/expected_ranges.py)"}


def documents() -> dict:
    """Suite folder -> its expected.json as the bundles make it: its rows written by hand and their sources,
    then the bundles' rows and the bundles they cite; a suite the bundles give no range has its file as it is."""
    bundles = gpu_bundles()
    sources = {name: bundle_source(path, bundle) for name, path, bundle in bundles}
    made: dict = {}
    for row in measured_ranges([(name, bundle) for name, _, bundle in bundles]):
        made.setdefault(row.pop("suite"), []).append(row)
    found = {}
    for name, suite in suites.registry().items():
        if not suite.folder.is_relative_to(REPO):  # a suite on DDPBENCH_SUITES_PATH keeps the ranges its author wrote
            continue
        path = suite.folder / FILE
        document = json.loads(path.read_text()) if path.is_file() else {"ranges": []}
        rows = made.get(name, [])
        if not rows and not path.is_file():
            continue
        by_hand = [row for row in document["ranges"] if "runs" not in row]
        cited = {source: sources[source] for row in rows for source in row["sources"]}
        kept = {source: said for source, said in document.get("sources", {}).items() if "bundle" not in said}
        found[suite.folder] = {"sources": {**kept, **cited}, "ranges": by_hand + rows}
    return found


def dump(document: dict) -> str:
    """expected.json's text: a source and a range a line, so that a change of one shows as its line."""
    parts = []
    if document.get("sources"):
        lines = [f"    {json.dumps(name)}: {json.dumps(source, ensure_ascii=False)}" for name, source in document["sources"].items()]
        parts.append('  "sources": {\n' + ",\n".join(lines) + "\n  }")
    parts.append('  "ranges": [\n' + ",\n".join(f"    {json.dumps(row, ensure_ascii=False)}" for row in document["ranges"]) + "\n  ]")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write each suite's expected.json")
    args = parser.parse_args()
    changed = 0
    for folder, document in documents().items():
        path, text = folder / FILE, dump(document)
        if path.is_file() and path.read_text() == text:
            continue
        changed += 1
        rows = sum("runs" in row for row in document["ranges"])
        print(f"{path.relative_to(REPO)}: {rows} range(s) of this project's bundles" + (", written" if args.write else ", to write"))
        if args.write:
            path.write_text(text)
    print(f"{changed} file(s) {'written' if args.write else 'differ from what the bundles make'}")
    print("\n".join(table_lines(gpu_bundles())))
    return 0


def table_lines(bundles: list) -> list[str]:
    """A line per run of TABLE_RUNS on each of LENT_GPUS: how many of its bundles are here."""
    here = Counter((bundle["plan"]["name"], bundle["hosts"][0]["fingerprint"]["gpus"][0]["name"],
                    bundle["hosts"][0]["fingerprint"]["gpu_count"]) for _, _, bundle in bundles)
    lines = [f"The runs that fill the table ({TABLE_BUNDLES} bundles each; `python3 -m bench run --plan PLAN` on the machine):"]
    for gpu in LENT_GPUS:
        for plan, count in TABLE_RUNS:
            found = here[plan, gpu, count]
            lines.append(f"  {plan} on {count}x {gpu}: {found} bundle(s) here" + ("" if found >= TABLE_BUNDLES else ", run it"
                         + (f" {TABLE_BUNDLES - found} more time(s)" if found else "")))
    return lines


if __name__ == "__main__":
    sys.exit(main())
