"""The predictor's signed error on every measured DDP run of a bundle, per world size, nodes, link and algorithm.

    python benchmarks/predictor_error.py BUNDLE [BUNDLE ...]            # print the table (markdown)
    python benchmarks/predictor_error.py BUNDLE --out benchmarks/results/predictor_error_h100x4.md

A bundle of benchmarks/plans/predictor-error.yaml (`make bench PLAN=benchmarks/plans/predictor-error.yaml`)
puts 3 launches behind every row: strong and weak scaling at 2 and every GPU, one node and 2 emulated nodes.

For each host: every N-GPU DDP run replayed on what it crossed (the bundle's all_reduce sweep at its preset,
world size and node count; on emulated or real nodes without one, the sweeps of the links inside and between
nodes under NCCL's ring or tree, bench/common/allreduce.py), from the 1-GPU timeline and from its own steps
without all-reduce, against its measured median step: error = predicted / measured - 1 (`ddpbench predict`'s
"The predictor's error"). A row holds every launch of its world size, nodes, link and algorithm in the bundle
(launch repeats, several plan entries). Beside each row, the target it is held to: within 3% on one node over
NVLink, within 5% on every other topology and link; a row of fewer than MIN_LAUNCHES launches is "unvalidated"
whatever its error (launch to launch, one configuration moves by several percent: one launch proves nothing).
A bundle (.json, or .json.gz as benchmarks/results/bundles/ keeps some) read here is not validated:
`ddpbench validate` it first if it is not this project's.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common.links import link_summary  # noqa: E402
from bench.suites.ddp.predict import predict  # noqa: E402
from bench.suites.ddp.predict.results import error_table, relative  # noqa: E402
from benchmarks._agent import table  # noqa: E402

NVLINK_TARGET, OTHER_TARGET = 0.03, 0.05
MIN_LAUNCHES = 3


def read(path: Path) -> dict:
    data = path.read_bytes()
    return json.loads(gzip.decompress(data) if path.suffix == ".gz" else data)


def target(nvlink_host: bool, shape: str, link: str) -> float:
    one_node = shape.startswith("1 node")
    return NVLINK_TARGET if nvlink_host and one_node and link.startswith("default") else OTHER_TARGET


def verdict(errors: tuple, bound: float, launches: int) -> str:
    if not errors:
        return "-"
    if launches < MIN_LAUNCHES:
        return f"unvalidated ({launches} of {MIN_LAUNCHES} launches)"
    return "met" if max(abs(errors[1]), abs(errors[2])) <= bound else "missed"


def signed(errors: tuple) -> str:
    return "-" if not errors else f"{relative(errors[0])} ({relative(errors[1])} to {relative(errors[2])})"


def report(paths: list[Path]) -> str:
    lines = []
    for path in paths:
        bundle = read(path)
        for found in predict([bundle]):
            host = next(h for h in bundle["hosts"] if h["name"] == found.host)
            nvlink = bool(host.get("fingerprint")) and link_summary(host["fingerprint"])["link_class"] == "nvlink"
            machine = link_summary(host["fingerprint"])["link_label"] if host.get("fingerprint") else "no fingerprint"
            lines += [f"## {bundle['run_id']} ({bundle['plan']['name']}), host {found.host}: {machine}", ""]
            rows = []
            for row in error_table([found]):
                bound = target(nvlink, row.shape, row.link)
                rows.append([str(row.gpus), str(row.nodes), row.shape, row.link, row.algorithm, str(row.launches), str(row.runs),
                             signed(row.from_one_gpu), signed(row.from_own_steps), signed(row.exposed_model), f"{bound:.0%}",
                             verdict(row.from_own_steps, bound, row.launches)])
            if rows:
                lines += table(["GPUs", "nodes", "topology", "link replayed", "algorithm", "launches", "runs",
                                "from the 1-GPU timeline: mean (least to most)", "from its own steps without all-reduce",
                                "compute + exposed communication model", "target", "own steps"], rows).splitlines()
            else:
                lines.append("No measured N-GPU DDP run to set a prediction against.")
            lines += [""] + [f"- {note}" for note in found.notes] + [""]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundles", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, help="also write the table to this markdown file")
    args = parser.parse_args()
    text = report(args.bundles)
    print(text)
    if args.out:
        args.out.write_text(f"# The predictor's signed error\n\n`python3 benchmarks/predictor_error.py "
                            f"{' '.join(str(p) for p in args.bundles)}`\n\n{text}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
