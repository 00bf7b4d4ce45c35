"""`ddpbench run`: the plan on every host, in parallel, merged into one bundle and a report.

A host that fails does not stop the others; Ctrl-C ends every agent and still writes the
bundle of what finished, marked incomplete.
"""

from __future__ import annotations

import datetime
import json
import secrets
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from bench import __version__
from bench.analysis import derive_scaling
from bench.bundle import SCHEMA_VERSION, write_bundle
from bench.controller.hosts import Host, Inventory
from bench.controller.progress import HostProgress
from bench.controller.runtimes import RUNTIMES, AgentJob, HostError
from bench.errors import UserError

REPO_ROOT = Path(__file__).resolve().parents[2]


def utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_run_id() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def tool_info() -> dict:
    def git(*args: str) -> "str | None":
        try:
            done = subprocess.run(["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no") if commit else None
    return {"name": "ddpbench", "version": __version__, "git_commit": commit, "git_dirty": None if status is None else bool(status)}


def host_result(host: Host, raw: "dict | None", error: "str | None") -> dict:
    """One host's entry in the bundle, from whatever its agent managed to write."""
    raw = raw or {}
    launches, runs = raw.get("launches", []), raw.get("runs", [])
    derive_scaling(runs)
    troubles = [l for l in launches if l["status"] not in ("ok", "skipped")] + [r for r in runs if r["status"] != "ok"]
    if error and not launches:
        status = "failed"
    elif error or troubles or not raw.get("complete", False):
        status = "partial"
    else:
        status = "ok"
    first_trouble = next((t.get("error") for t in troubles if t.get("error")), None)
    return {
        "name": host.name, "runtime": host.runtime, "group": None, "labels": list(host.labels),
        "status": status, "error": error or first_trouble,
        "fingerprint": raw.get("fingerprint"), "launches": launches, "runs": runs,
    }


@dataclass
class HostRun:
    host: Host
    runtime: object
    raw: "dict | None" = None
    error: "str | None" = None


def _run_host(item: HostRun, plan: dict, run_dir: Path, progress: HostProgress) -> None:
    job = AgentJob(
        host=item.host, plan=plan, result_dir=run_dir / "hosts" / item.host.name,
        progress=lambda event: progress.update(item.host.name, event),
    )
    try:
        item.raw = item.runtime.run(job)
    except HostError as err:
        item.error = str(err)
        raw_path = job.result_dir / "raw.json"
        if raw_path.exists():  # keep what the agent finished before the failure
            item.raw = json.loads(raw_path.read_text())
    progress.finish(item.host.name, item.error)


def execute(inventory: Inventory, plan: dict, out_root: Path, verification: "dict | None" = None) -> tuple[Path, dict]:
    """Run the plan everywhere; returns the bundle's path and the bundle. `verification`: what a
    rerun of a published bundle records about that bundle (`ddpbench verify`)."""
    unknown = [h for h in inventory.hosts if h.runtime not in RUNTIMES]
    if unknown:
        raise UserError(
            f"host {unknown[0].name!r}: runtime {unknown[0].runtime!r} is not available in this version; use runtime: local"
        )
    run_id, started = new_run_id(), utc_now()
    run_dir = out_root / run_id
    items = [HostRun(host, RUNTIMES[host.runtime]()) for host in inventory.hosts]
    interrupted = False
    with HostProgress([h.name for h in inventory.hosts]) as progress:
        pool = ThreadPoolExecutor(max_workers=len(items), thread_name_prefix="host")
        futures = [pool.submit(_run_host, item, plan, run_dir, progress) for item in items]
        try:
            for future in futures:
                while not future.done():
                    threading.Event().wait(0.2)  # wakes for Ctrl-C, unlike a blocking result()
                future.result()
        except KeyboardInterrupt:
            interrupted = True
            for item in items:
                item.runtime.cancel()
            for future in futures:
                future.exception()
        finally:
            pool.shutdown(wait=True)
    bundle = {
        "schema_version": SCHEMA_VERSION, "kind": "ddpbench.bundle", "run_id": run_id,
        "started_at": started, "finished_at": utc_now(),
        "complete": not interrupted, "incomplete_reason": "interrupted (Ctrl-C)" if interrupted else None,
        "tool": tool_info(), "plan": plan,
        "hosts": [host_result(i.host, i.raw, i.error or ("interrupted" if interrupted else None)) for i in items],
    }
    if verification is not None:
        bundle["verification"] = verification
    path = run_dir / "bundle.json"
    return path, write_bundle(path, bundle)
