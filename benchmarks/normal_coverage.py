"""How much of each bundle "Is my number normal?" judges, and why the rest has no reference.

    python benchmarks/normal_coverage.py BUNDLE... [--target 0.2]

Per bundle (its plan and machine): its figures, their verdicts, and the share with no reference
against the target; those grouped by what no range holds (bench/judging/normal.py MISSING: the GPU
model, ranks, transport, algorithm, nodes, size ...), each group with its reasons as the report
gives them. Then per plan, over its bundles: whether at most the target's share has no reference.
The figures are judged as the report judges them (bench/report/merge.py asks bench/judging/verdicts.py
of each host's runs), one bundle at a time. Standard library and bench only; no GPU. A file that is
not a bundle is one `error:` line, exit 2.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._venv import imports_of_the_venv  # noqa: E402

with imports_of_the_venv():
    from bench.errors import UserError  # noqa: E402
    from bench.judging.normal import MISSING, NO_REFERENCE, counts  # noqa: E402
    from bench.report.inputs import expand, load  # noqa: E402
    from bench.report.merge import merge  # noqa: E402

TARGET = 0.2  # at most this share of a plan's figures without a reference
REASONS_SHOWN = 3


def judged(bundle: dict) -> list:
    """Every Judgement the report makes of the bundle's figures."""
    return [found for entry in merge([bundle]).runs for found in entry.verdicts.figures]


def share(found: list) -> float:
    return sum(j.verdict == NO_REFERENCE for j in found) / len(found) if found else 0.0


def bundle_lines(path: Path, bundle: dict, found: list, target: float) -> list[str]:
    """The bundle's line and, under it, its figures with no reference by what no range holds."""
    machines = sorted({host.link["link_label"] for host in merge([bundle]).hosts})
    lines = [f"{bundle['run_id']} (plan {bundle['plan']['name']}, {'; '.join(machines)}): {len(found)} figure(s): "
             f"{counts(Counter(j.verdict for j in found))}; no reference {share(found):.0%} "
             f"({'within' if share(found) <= target else 'above'} the target {target:.0%}) [{path}]"]
    groups = defaultdict(list)
    for j in found:
        if j.verdict == NO_REFERENCE:
            groups[" + ".join(j.missing)].append(j.why)
    order = {name: i for i, name in enumerate(MISSING)}
    for what, reasons in sorted(groups.items(), key=lambda item: (-len(item[1]), order.get(item[0].split(" + ")[0], len(order)))):
        common = Counter(reasons).most_common()
        shown = "; ".join(f"{n} x {why}" for why, n in common[:REASONS_SHOWN]) + ("; ..." if len(common) > REASONS_SHOWN else "")
        lines.append(f"  no {what}: {len(reasons)} figure(s): {shown}")
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundles", nargs="+", help="bundle files or glob patterns (.json or .json.gz)")
    parser.add_argument("--target", type=float, default=TARGET, help=f"the largest share without a reference (default {TARGET})")
    args = parser.parse_args(argv)

    def warn(line: str) -> None:
        print(line, file=sys.stderr)

    try:
        loaded, _ = load(expand(args.bundles, warn), strict=True, warn=warn)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    plans = defaultdict(list)
    for item in loaded:
        found = judged(item.bundle)
        print("\n".join(bundle_lines(item.path, item.bundle, found, args.target)))
        plans[item.bundle["plan"]["name"]].append(found)
    print()
    for plan, each in sorted(plans.items()):
        found = [j for bundle in each for j in bundle]
        print(f"plan {plan}: {len(each)} bundle(s), {len(found)} figure(s), no reference {share(found):.0%}: "
              f"target (at most {args.target:.0%}) {'met' if share(found) <= args.target else 'missed'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
