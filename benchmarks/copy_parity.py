"""Copy suite against nvbandwidth on the same machine: the ratio table, per GPU and per GPU pair.

nvbandwidth is not part of ddpbench and is never committed: build it on the GPU host (it needs
CUDA, NVML's header and Boost program_options) and pass its JSON outputs, one per buffer size:

    nvbandwidth -b 64 -j -t host_to_device_memcpy_ce device_to_host_memcpy_ce \\
        host_to_device_bidirectional_memcpy_ce device_to_host_bidirectional_memcpy_ce \\
        host_to_device_memcpy_sm device_to_host_memcpy_sm \\
        device_to_device_memcpy_read_ce device_to_device_memcpy_write_ce \\
        device_to_device_bidirectional_memcpy_read_ce device_to_device_bidirectional_memcpy_write_ce \\
        device_to_device_memcpy_read_sm device_to_device_memcpy_write_sm > nvb-64.json   # and -b 256, -b 1024
    python -m bench.agent run --plan copy.json --out copy                   # bench/plans/copy.yaml, resolved
    python benchmarks/copy_parity.py copy/raw.json nvb-64.json nvb-256.json nvb-1024.json

Without nvbandwidth output the figures stand beside the link's peak alone (PCIe for host
copies, NVLink where it joins the GPUs for device copies).
The copy suite's bidirectional figure sums both directions. nvbandwidth's device pairs give that
total too; its host cases give the one direction they name while the other runs, so there the
table halves ours (the mean of the two directions): comparable, not identical. ddpbench issues
a device-to-device copy from its source GPU; nvbandwidth's "read" and "write" cases issue it from
one end or the other, and both are set beside the same ddpbench copy.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._agent import median, table  # noqa: E402
from bench.common.links import link_summary, pcie_peak_gbps  # noqa: E402
from bench.common.links import pcie_links  # noqa: E402

MIB = 1 << 20
# nvbandwidth testcase -> (direction, engine, bidirectional) of the copy suite
TESTCASES = {
    "host_to_device_memcpy_ce": ("h2d", "ce", False),
    "device_to_host_memcpy_ce": ("d2h", "ce", False),
    "host_to_device_bidirectional_memcpy_ce": ("h2d", "ce", True),
    "device_to_host_bidirectional_memcpy_ce": ("d2h", "ce", True),
    "host_to_device_memcpy_sm": ("h2d", "sm", False),
    "device_to_host_memcpy_sm": ("d2h", "sm", False),
    "device_to_device_memcpy_read_ce": ("d2d", "ce", False),
    "device_to_device_memcpy_write_ce": ("d2d", "ce", False),
    "device_to_device_bidirectional_memcpy_read_ce": ("d2d", "ce", True),
    "device_to_device_bidirectional_memcpy_write_ce": ("d2d", "ce", True),
    "device_to_device_memcpy_read_sm": ("d2d", "sm", False),
    "device_to_device_memcpy_write_sm": ("d2d", "sm", False),
}
GOAL = 0.95  # of nvbandwidth, copy-engine copies of 64 MiB and more
# "memcpy CE GPU(row) <- GPU(column) bandwidth (GB/s)": which way the bytes go between row and column
ARROW = re.compile(r"(CPU|GPU)\(row\) (<->|->|<-) GPU\(column\)")


def _cells(case: dict) -> list[tuple]:
    """(src, dst, GB/s, both directions summed) per cell of one nvbandwidth testcase, named as the
    copy suite names its endpoints. A device pair's bidirectional case holds a block of rows per
    direction and a last one with their total; a host one holds the named direction alone."""
    row_kind, arrow = ARROW.search(case["bandwidth_description"]).groups()
    matrix = case["bandwidth_matrix"]
    summed = "Total" in case["bandwidth_description"]
    if summed:
        matrix = matrix[-len(matrix[0]):]
    cells = []
    for row, values in enumerate(matrix):
        for column, value in enumerate(values):
            if value in ("N/A", None) or (row_kind == "GPU" and row == column):
                continue
            ends = ("host" if row_kind == "CPU" else f"gpu{row}", f"gpu{column}")
            toward_row = arrow == "<-" or (arrow == "<->" and TESTCASES[case["name"]][0] == "d2h")
            cells.append((*(ends[::-1] if toward_row else ends), float(value), summed))
    return cells


def nvbandwidth_figures(paths: list[Path]) -> dict:
    """(testcase, MiB, src, dst) -> (GB/s, both directions summed), from nvbandwidth -j outputs
    named nvb-<MiB>.json."""
    found = {}
    for path in paths:
        size = int(path.stem.split("-")[-1])
        for case in json.loads(path.read_text())["nvbandwidth"]["testcases"]:
            if case["name"] in TESTCASES and case["status"] == "Passed":
                for src, dst, gbps, summed in _cells(case):
                    found[(case["name"], size, src, dst)] = (gbps, summed)
    return found


def link_peaks(fingerprint: dict) -> dict:
    """Theoretical GB/s per direction of the link a copy crosses: PCIe for host copies (the
    slowest GPU's), NVLink for device copies where it joins the GPUs, else PCIe."""
    pcie = [pcie_peak_gbps(link["gen"], link["width"]) for link in pcie_links(fingerprint)]
    pcie_peak = min(pcie) if pcie and None not in pcie else None
    summary = link_summary(fingerprint)
    return {"h2d": pcie_peak, "d2h": pcie_peak, "d2d": summary["link_peak_gbps"] if summary["link_class"] == "nvlink" else pcie_peak}


def ratio_rows(raw: dict, nvb: dict) -> list[list[str]]:
    peaks = link_peaks(raw["fingerprint"])
    ours_by_point = {
        (r["params"]["direction"], r["params"]["engine"], r["params"]["bidirectional"], r["params"]["src"],
         r["params"]["dst"], r["params"]["size_bytes"]): median(r, "copy_gbps")
        for r in raw["runs"] if r["status"] == "ok"}
    rows = []
    for (name, size, src, dst), (theirs, summed) in sorted(nvb.items(), key=lambda item: (list(TESTCASES).index(item[0][0]), item[0][1:])):
        direction, engine, both = TESTCASES[name]
        ours = ours_by_point.get((direction, engine, both, src, dst, size * MIB))
        if ours is not None and both and not summed:
            ours /= 2
        ratio = None if ours is None else ours / theirs
        goal = "-" if engine != "ce" or size < 64 or ratio is None else ("yes" if ratio >= GOAL else "NO")
        peak = peaks[direction] * (2 if summed else 1) if peaks[direction] else None
        rows.append([name, f"{src} {'↔' if summed else '→'} {dst}", f"{size} MiB", "-" if ours is None else f"{ours:.2f}",
                     f"{theirs:.2f}", "-" if ratio is None else f"{ratio:.3f}", "-" if ours is None or not peak else f"{ours / peak:.2f}",
                     goal])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("raw", type=Path, help="the agent's raw.json of a copy run")
    parser.add_argument("nvbandwidth", type=Path, nargs="*", help="nvbandwidth -j outputs, named nvb-<MiB>.json")
    args = parser.parse_args()
    raw = json.loads(args.raw.read_text())
    peaks = link_peaks(raw["fingerprint"])
    print(f"Link peak per direction: host copies {peaks['h2d']} GB/s (PCIe), device copies {peaks['d2d']} GB/s\n")
    print(table(["nvbandwidth testcase", "copy", "size", "ddpbench GB/s", "nvbandwidth GB/s", "ratio", "of link peak",
                 f">= {GOAL} (CE, >= 64 MiB)"], ratio_rows(raw, nvbandwidth_figures(args.nvbandwidth))))


if __name__ == "__main__":
    main()
