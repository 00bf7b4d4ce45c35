"""Copy suite against nvbandwidth on the same machine: the ratio table for host<->device copies.

nvbandwidth is not part of ddpbench and is never committed: build it on the GPU host (it needs
CUDA, NVML's header and Boost program_options) and pass its JSON outputs, one per buffer size:

    nvbandwidth -b 64 -j -t host_to_device_memcpy_ce device_to_host_memcpy_ce \\
        host_to_device_bidirectional_memcpy_ce device_to_host_bidirectional_memcpy_ce \\
        host_to_device_memcpy_sm device_to_host_memcpy_sm > nvb-64.json      # and -b 256, -b 1024
    python -m bench.agent run --plan copy.json --out copy                   # bench/plans/copy.yaml, resolved
    python benchmarks/copy_parity.py copy/raw.json nvb-64.json nvb-256.json nvb-1024.json

Without nvbandwidth output the figures stand beside the GPU's PCIe link peak alone.
The copy suite's bidirectional figure sums both directions; nvbandwidth's reports the one
direction it names while the other runs, so the table halves ours (the mean of the two
directions): comparable, not identical.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._agent import median, table  # noqa: E402
from bench.bundle.links import link_summary  # noqa: E402

MIB = 1 << 20
# nvbandwidth testcase -> (direction, engine, bidirectional) of the copy suite
TESTCASES = {
    "host_to_device_memcpy_ce": ("h2d", "ce", False),
    "device_to_host_memcpy_ce": ("d2h", "ce", False),
    "host_to_device_bidirectional_memcpy_ce": ("h2d", "ce", True),
    "device_to_host_bidirectional_memcpy_ce": ("d2h", "ce", True),
    "host_to_device_memcpy_sm": ("h2d", "sm", False),
    "device_to_host_memcpy_sm": ("d2h", "sm", False),
}
GOAL = 0.95  # of nvbandwidth, copy-engine copies of 64 MiB and more


def nvbandwidth_figures(paths: list[Path]) -> dict:
    """(testcase, MiB) -> GB/s of GPU 0, from nvbandwidth -j outputs named nvb-<MiB>.json."""
    found = {}
    for path in paths:
        size = int(path.stem.split("-")[-1])
        for case in json.loads(path.read_text())["nvbandwidth"]["testcases"]:
            if case["name"] in TESTCASES and case["status"] == "Passed":
                found[(case["name"], size)] = float(case["bandwidth_matrix"][0][0])
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("raw", type=Path, help="the agent's raw.json of a copy run")
    parser.add_argument("nvbandwidth", type=Path, nargs="*", help="nvbandwidth -j outputs, named nvb-<MiB>.json")
    args = parser.parse_args()
    raw = json.loads(args.raw.read_text())
    nvb = nvbandwidth_figures(args.nvbandwidth)
    peak = link_summary(raw["fingerprint"])["link_peak_gbps"]
    rows = []
    for (name, size), theirs in sorted(nvb.items(), key=lambda item: (list(TESTCASES).index(item[0][0]), item[0][1])):
        direction, engine, both = TESTCASES[name]
        run = next((r for r in raw["runs"] if r["status"] == "ok" and r["params"]["src"] in ("host", "gpu0")
                    and (r["params"]["direction"], r["params"]["engine"], r["params"]["bidirectional"], r["params"]["size_bytes"])
                    == (direction, engine, both, size * MIB)), None)
        ours = median(run, "copy_gbps") if run else None
        if ours is not None and both:
            ours /= 2
        ratio = None if ours is None else ours / theirs
        goal = "-" if engine != "ce" or both or size < 64 or ratio is None else ("yes" if ratio >= GOAL else "NO")
        rows.append([name, f"{size} MiB", "-" if ours is None else f"{ours:.2f}", f"{theirs:.2f}",
                     "-" if ratio is None else f"{ratio:.3f}", "-" if ours is None or not peak else f"{ours / peak:.2f}", goal])
    print(f"PCIe peak per direction (link under load): {peak} GB/s\n")
    print(table(["nvbandwidth testcase", "size", "ddpbench GB/s", "nvbandwidth GB/s", "ratio", "of PCIe peak",
                 f">= {GOAL} (CE, >= 64 MiB)"], rows))


if __name__ == "__main__":
    main()
