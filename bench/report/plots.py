"""Plots (matplotlib, no display needed)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

from bench.report.tables import human_bytes, transport_label  # noqa: E402


def plot_busbw(bundles: list[dict], out_dir: Path) -> "Path | None":
    """busbw against message size, log x, one line per host/op/dtype/transport/ranks, p5-p95 as bars."""
    series = defaultdict(list)
    for bundle in bundles:
        for host in bundle["hosts"]:
            for run in host["runs"]:
                if run["suite"] != "collectives" or run["status"] != "ok" or run["params"]["op"] == "sendrecv":
                    continue
                p = run["params"]
                place = "in-place" if p["in_place"] else "out-of-place"
                label = f"{host['name']} {p['op']} {p['dtype']} {place} {transport_label(run)} x{run['world_size']}"
                series[label].append((p["size_bytes"], run["metrics"]["busbw_gbps"]["summary"]))
    if not series:
        return None
    fig, ax = plt.subplots(figsize=(8, 4.8), dpi=120)
    for label, points in sorted(series.items()):
        points.sort(key=lambda point: point[0])
        sizes = [s for s, _ in points]
        med = [m["median"] for _, m in points]
        low = [m["median"] - m["p5"] for _, m in points]
        high = [m["p95"] - m["median"] for _, m in points]
        ax.errorbar(sizes, med, yerr=[low, high], marker="o", markersize=3, capsize=2, label=label)
    ax.set_xscale("log", base=2)
    ticks = sorted({s for points in series.values() for s, _ in points})
    ax.set_xticks(ticks[:: max(1, len(ticks) // 8)])
    ax.set_xticklabels([human_bytes(t) for t in ticks[:: max(1, len(ticks) // 8)]])
    ax.set_xlabel("message size (bytes, log scale)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_title("Collective bus bandwidth against message size")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = out_dir / "busbw.png"
    fig.savefig(path)
    plt.close(fig)
    return path
