"""The predictor's signed error on every measured DDP run of a bundle, per world size, nodes, link and algorithm;
and the table of its validated error that the report cites, from this project's bundles.

    python3 benchmarks/predictor_error.py BUNDLE [BUNDLE ...]            # print each bundle's table (markdown)
    python3 benchmarks/predictor_error.py BUNDLE --out benchmarks/results/predictor_error_h100x4.md
    python3 benchmarks/predictor_error.py --write      # bench/suites/ddp/predictor_error.json from benchmarks/results/bundles/

A bundle of benchmarks/plans/predictor-error.yaml (`make bench PLAN=benchmarks/plans/predictor-error.yaml`)
puts 3 launches behind every row: 2 and 4 GPUs over NVLink, with P2P off and over sockets, and 2 emulated nodes
of 2 with ring and with tree.

For each host: every N-GPU DDP run replayed on what it crossed (the bundle's all_reduce sweep at its preset,
world size, node count and algorithm; on emulated or real nodes without one, the sweeps of the links inside and
between nodes under NCCL's ring or tree, bench/common/allreduce.py), from the 1-GPU timeline and from its own
steps without all-reduce, against its measured median step: error = predicted / measured - 1 (`ddpbench
predict`'s "The predictor's error"). A row holds every launch of its world size, nodes, link and algorithm in
the bundle (launch repeats, several plan entries). Beside each row, the target it is held to: within 3% on one
node over NVLink, within 5% on every other topology and link; a row of fewer than 3 launches (validated.py) is
"unvalidated" whatever its error (launch to launch, one configuration moves by several percent: one launch
proves nothing). And what a miss comes from, measured: the all-reduces inside the steps against their sweep
alone (each run's own two arms; 1.00x: as the sweep says), and the share of the 1-GPU step its GPU computed
(the profiled steps; well under 100%, that step is its CPU's pace, which moves from launch to launch and which
the N-GPU runs do not keep where their GPUs wait for an all-reduce). benchmarks/predictor_diagnosis.py BUNDLE
breaks each run down part by part.

--write pools every GPU bundle of benchmarks/results/bundles/ per machine (bench/suites/ddp/predict/validated.py):
its rows are what a report row of a prediction says as "the predictor's error on runs like this one";
tests/suites/test_predictor_validated.py fails while the file and the bundles disagree. A bundle (.json, or
.json.gz as benchmarks/results/bundles/ keeps some) read here is not validated: `ddpbench validate` it first if
it is not this project's.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common.links import link_summary  # noqa: E402
from bench.suites.ddp.predict import predict  # noqa: E402
from bench.suites.ddp.predict.results import error_table, relative  # noqa: E402
from bench.suites.ddp.predict.validated import FILE, rows_of, unvalidated  # noqa: E402
from benchmarks._agent import table  # noqa: E402
from benchmarks.expected_ranges import REPO, bundle_source, gpu_bundles, read  # noqa: E402

NVLINK_TARGET, OTHER_TARGET = 0.03, 0.05


def target(nvlink_host: bool, shape: str, link: str) -> float:
    one_node = shape.startswith("1 node")
    return NVLINK_TARGET if nvlink_host and one_node and link.startswith("default") else OTHER_TARGET


def verdict(errors: tuple, bound: float, launches: int) -> str:
    if not errors:
        return "-"
    return unvalidated(launches) or ("met" if max(abs(errors[1]), abs(errors[2])) <= bound else "missed")


def signed(errors: tuple) -> str:
    return "-" if not errors else f"{relative(errors[0])} ({relative(errors[1])} to {relative(errors[2])})"


def times(value: "float | None") -> str:
    return "-" if value is None else f"{value:.2f}x"


def share(value: "float | None") -> str:
    return "-" if value is None else f"{value:.0%}"


def report(paths: list[Path]) -> str:
    lines = []
    for path in paths:
        bundle = read(path)
        for found in predict([bundle], scaling=None):
            host = next(h for h in bundle["hosts"] if h["name"] == found.host)
            nvlink = bool(host.get("fingerprint")) and link_summary(host["fingerprint"])["link_class"] == "nvlink"
            machine = link_summary(host["fingerprint"])["link_label"] if host.get("fingerprint") else "no fingerprint"
            lines += [f"## {bundle['run_id']} ({bundle['plan']['name']}), host {found.host}: {machine}", ""]
            rows = []
            for row in error_table([found]):
                bound = target(nvlink, row.shape, row.link)
                rows.append([str(row.gpus), str(row.nodes), row.shape, row.link, row.algorithm, str(row.launches), str(row.runs),
                             signed(row.from_one_gpu), verdict(row.from_one_gpu, bound, row.launches), signed(row.from_own_steps),
                             verdict(row.from_own_steps, bound, row.launches), signed(row.exposed_model), f"{bound:.0%}",
                             times(row.in_step_over_sweep), share(row.one_gpu_busy)])
            if rows:
                lines += table(["GPUs", "nodes", "topology", "link replayed", "algorithm", "launches", "runs",
                                "from the 1-GPU timeline: mean (least to most)", "1-GPU timeline", "from its own steps without all-reduce",
                                "own steps", "compute + exposed communication model", "target",
                                "all-reduce in the step / its sweep alone", "1-GPU step's GPU busy"], rows).splitlines()
            else:
                lines.append("No measured N-GPU DDP run to set a prediction against.")
            lines += [""] + [f"- {note}" for note in found.notes] + [""]
    return "\n".join(lines)


def document() -> dict:
    """predictor_error.json as the bundles make it: each GPU bundle's predictions pooled per machine."""
    sources, measured = {}, []
    for name, path, bundle in gpu_bundles():
        for host in bundle["hosts"]:
            if not host.get("fingerprint"):
                continue
            summary = link_summary(host["fingerprint"])
            for found in predict([{**bundle, "hosts": [host]}], scaling=None):
                measured.append((name, bundle["run_id"], summary["link_label"], summary["gpu"], host["fingerprint"], found))
        sources[name] = {**bundle_source(path, bundle),
                         "says": "its DDP runs' median steps, against which the predictor's error is taken (benchmarks/predictor_error.py)"}
    rows = rows_of(measured)
    cited = sorted({source for row in rows for source in row["sources"]})
    return {"sources": {name: sources[name] for name in cited}, "errors": rows}


def dump(found: dict) -> str:
    """The file's text: a source and a row a line, so that a change of one shows as its line."""
    sources = ",\n".join(f"    {json.dumps(name)}: {json.dumps(source, ensure_ascii=False)}" for name, source in found["sources"].items())
    rows = ",\n".join(f"    {json.dumps(row, ensure_ascii=False)}" for row in found["errors"])
    return "{\n" + f'  "sources": {{\n{sources}\n  }},\n  "errors": [\n{rows}\n  ]\n' + "}\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundles", nargs="*", type=Path)
    parser.add_argument("--out", type=Path, help="also write the tables to this markdown file")
    parser.add_argument("--write", action="store_true", help=f"write {FILE.relative_to(REPO)} from benchmarks/results/bundles/")
    args = parser.parse_args()
    if not args.bundles and not args.write:
        parser.error("give a BUNDLE, or --write")
    if args.bundles:
        text = report(args.bundles)
        print(text)
        if args.out:
            args.out.write_text(f"# The predictor's signed error\n\n`python3 benchmarks/predictor_error.py "
                                f"{' '.join(str(p) for p in args.bundles)}`\n\n{text}\n")
    if args.write:
        found = document()
        FILE.write_text(dump(found))
        print(f"{FILE.relative_to(REPO)}: {len(found['errors'])} row(s) of {len(found['sources'])} bundle(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
