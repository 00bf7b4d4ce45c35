"""The newest earlier bundle in the results folder with the same plan and host: its launch
durations refine the next run's estimate (bench/common/history.py)."""

from __future__ import annotations

import json
from pathlib import Path

from bench.common.history import machine_key

NEWEST_LOOKED_AT = 20  # run folders are named by UTC start time: the newest first, a few only


def launch_history(out_root: Path, plan: dict, host_name: str, run_dir: Path) -> "dict | None":
    folders = sorted((p for p in out_root.glob("*/bundle.json") if p.parent != run_dir), reverse=True)
    for path in folders[:NEWEST_LOOKED_AT]:
        try:
            bundle = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(bundle, dict) or bundle.get("plan") != plan:
            continue
        for host in bundle.get("hosts") or []:
            durations = {l["id"]: l["duration_s"] for l in host.get("launches") or []
                         if l.get("status") == "ok" and l.get("duration_s")}
            if host.get("name") == host_name and host.get("fingerprint") and durations:
                return {"machine": machine_key(host["fingerprint"]), "durations_s": durations}
    return None
