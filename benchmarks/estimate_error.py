"""Each launch's estimate by the cost model against its measured duration, from bundles: the plan the
bundle holds, priced on the host its fingerprint describes, in the jobs the agent ran it in.

    python3 benchmarks/estimate_error.py BUNDLE.json [BUNDLE.json ...]

Prints a table per bundle and host (launch, measured s, estimated s, measured / estimated - 1) and the
plan's launches in all. What a changed cost model is checked against: a plan's estimate within +-15% of
its measured time on the GPU kind it was fitted on. The fixed costs of the estimate are the ones in
bench/common/launch_costs.py now, fitted perhaps from these very bundles.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._venv import imports_of_the_venv  # noqa: E402

with imports_of_the_venv():
    from bench.agent.estimate import plan_modelled  # noqa: E402
    from bench.agent.planning import plan_launches  # noqa: E402
    from bench.bundle import read_bundle  # noqa: E402
    from bench.common.host import Capabilities  # noqa: E402
    from bench.common.protocol import Placement  # noqa: E402
    from bench.errors import PlanError, UserError  # noqa: E402


def rows(bundle: dict) -> "list[tuple[str, list[tuple[str, float, float]]]]":
    """(host name, [(launch id, measured s, estimated s)]) of each host's ok launches."""
    found = []
    for host in bundle["hosts"]:
        capabilities = Capabilities.of(host["fingerprint"])
        modelled = plan_modelled(plan_launches(bundle["plan"], capabilities, Placement(nnodes=1)), capabilities)
        found.append((host["name"], [(l["id"], l["duration_s"], modelled[l["id"]].seconds) for l in host["launches"]
                                     if l["status"] == "ok" and l["id"] in modelled]))
    return found


def main(argv: "list[str]") -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundles", nargs="+", type=Path)
    for path in parser.parse_args(argv).bundles:
        try:
            bundle = read_bundle(path)  # its errors name the file
            priced = rows(bundle)
        except UserError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        except PlanError as err:
            print(f"error: {path}: its plan cannot be priced by this version: {err}", file=sys.stderr)
            return 2
        for host, launches in priced:
            print(f"\n{bundle['run_id']} ({bundle['plan']['name']}), host {host}\n")
            print("| launch | measured s | estimated s | off |\n|---|---|---|---|")
            for launch, measured, estimated in launches:
                print(f"| {launch} | {measured:.1f} | {estimated:.1f} | {measured / estimated - 1:+.0%} |")
            measured, estimated = sum(m for _, m, _ in launches), sum(e for _, _, e in launches)
            if estimated:
                print(f"| all {len(launches)} | {measured:.1f} | {estimated:.1f} | {measured / estimated - 1:+.0%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
