"""Reports: bundles in, report.md with tables and plots out."""

from __future__ import annotations

from pathlib import Path

from bench.report.plots import plot_busbw
from bench.report.tables import collectives_table, ddp_table, hosts_table


def write_report(bundles: list[dict], out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    ids = ", ".join(b["run_id"] for b in bundles)
    lines = [f"# ddpbench report", "", f"Bundles: {ids}", ""]
    incomplete = [b["run_id"] for b in bundles if not b["complete"]]
    if incomplete:
        lines += [f"**Incomplete:** {', '.join(incomplete)} stopped early; the tables hold what finished.", ""]
    lines += ["## Hosts", "", *hosts_table(bundles), ""]
    collectives = collectives_table(bundles)
    if collectives:
        lines += ["## Collectives", "", "busbw as nccl-tests defines it; median over repetitions, [p5, p95] and n beside it.", ""]
        lines += collectives
        plot = plot_busbw(bundles, out_dir)
        if plot:
            lines += ["", f"![busbw against message size]({plot.name})", ""]
    ddp = ddp_table(bundles)
    if ddp:
        lines += ["## DDP training", "", "Per-sample time x #GPUs is seed 000's metric: lower is better, equal to 1 GPU's is perfect scaling.", ""]
        lines += ddp
    path = out_dir / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path
