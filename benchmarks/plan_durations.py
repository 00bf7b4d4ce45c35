"""Each shipped plan's estimated duration (each suite's cost model, and the measured fixed costs of its
jobs and launches: bench/common/launch_costs.py) on the machines its description names: 2x H200 (NVLink
NV18, PCIe 5), 4x H100 (NV18) and 2x RTX 3090 (no NVLink, PCIe 4), and a 2-core CPU. The controller's
start-up, the fingerprint and the report (seconds to tens of seconds) are not in it; the P2P gate is.
A plan for a hosts file's group (two-nodes) is estimated on its first host with --nodes: each machine
then one node of that many, which runs every launch (its span: first_node ones too).

    python benchmarks/plan_durations.py [--nodes N] [PLAN or plan file ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._venv import imports_of_the_venv  # noqa: E402

with imports_of_the_venv():
    from bench.agent.estimate import gate_seconds, plan_modelled  # noqa: E402
    from bench.agent.planning import plan_launches  # noqa: E402
    from bench.common.host import Capabilities  # noqa: E402
    from bench.common.protocol import Placement  # noqa: E402
    from bench.controller.plans import load_plan, plan_names  # noqa: E402
    from bench.controller.progress import describe_s  # noqa: E402

GIB = 1 << 30


def gpus(name: str, count: int, memory_gib: int, nvlink_links: int, pcie_gen: int) -> dict:
    gpu = {"name": name, "memory_total_bytes": memory_gib * GIB, "nvlink": {"active_links": nvlink_links},
           "pcie": {"gen_max": pcie_gen}}
    return {"gpus": [dict(gpu, index=i) for i in range(count)], "cpu": {"logical_cpus": 32}, "network": {}}


MACHINES = {
    "2x H200 (NV18)": gpus("NVIDIA H200", 2, 141, 18, 5),
    "4x H100 (NV18)": gpus("NVIDIA H100 80GB HBM3", 4, 80, 18, 5),
    "2x RTX 3090 (PCIe 4)": gpus("NVIDIA GeForce RTX 3090", 2, 24, 0, 4),
    "CPU, 2 cores (idle)": {"gpus": [], "cpu": {"logical_cpus": 2}, "network": {}},
}


def plan_seconds(plan: dict, fingerprint: dict, nodes: int = 1) -> tuple[float, int, int, float]:
    """(estimated seconds, launches run, configurations, the share of the launches' time measured) of the
    plan on that machine, the first of `nodes` nodes of a group, in the jobs its launches share; the P2P
    gate in the seconds."""
    host = Capabilities.of(fingerprint)
    launches = plan_launches(plan, host, Placement(nnodes=nodes))
    found = plan_modelled(launches, host).values()
    seconds = sum(m.seconds for m in found)
    return (seconds + gate_seconds([l for l in launches if not l.skipped_reason], host), len(found), sum(m.configurations for m in found),
            sum(m.measured_s for m in found) / seconds if seconds else 0.0)


def main(args: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1, help="each machine one node of a group of this many")
    parser.add_argument("plans", nargs="*", help="shipped plan names or plan files (default: every shipped plan)")
    options = parser.parse_args(args)
    each = f" a node of {options.nodes}" if options.nodes > 1 else ""
    print("| plan | timeout_s | " + " | ".join(f"{name}{each}" for name in MACHINES) + " |")
    print("|---|---|" + "---|" * len(MACHINES))
    for name in options.plans or plan_names():
        plan = load_plan(name)
        cells = []
        for fingerprint in MACHINES.values():
            seconds, launches, points, measured = plan_seconds(plan, fingerprint, options.nodes)
            cells.append(f"{describe_s(seconds)} ({launches} launch{'' if launches == 1 else 'es'}, {points} configurations, "
                         f"{measured:.0%} measured)")
        print(f"| {name} | {plan['timeout_s']:g} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
