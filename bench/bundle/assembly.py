"""A bundle put together from what each host's agent wrote: the host entries, the figures each
suite derives across a host's runs and its plausibility warnings, each host's status, and the
document around them. The orchestrator (bench/controller/run.py) and a compose topology
(bench/docker/compose.py) both assemble their bundles here."""

from __future__ import annotations

import datetime
import secrets
import subprocess

from bench import __version__, suites
from bench.bundle import SCHEMA_VERSION
from bench.common.paths import SOURCE_ROOT
from bench.common.run import Run
from bench.common.timestamps import utc_timestamp
from bench.judging import machine, shared_machine
from bench.suites.base import HostResults


def new_run_id() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def tool_info() -> dict:
    def git(*args: str) -> "str | None":
        try:
            done = subprocess.run(["git", "-C", str(SOURCE_ROOT), *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no") if commit else None
    return {"name": "ddpbench", "version": __version__, "git_commit": commit, "git_dirty": None if status is None else bool(status)}


def host_entry(*, name: str, runtime: str, labels: tuple, raw: "dict | None", error: "str | None",
               group: "str | None" = None, node_rank: "int | None" = None, pin_mismatches: tuple = (),
               scheduler_job: "dict | None" = None, price_per_hour: "float | None" = None) -> dict:
    """One host's entry in the bundle, from whatever its agent managed to write (status comes later)."""
    raw = raw or {}
    return {
        "name": name, "runtime": runtime, "labels": list(labels), "group": group, "node_rank": node_rank,
        "pin_mismatches": list(pin_mismatches), "status": "failed", "error": error,
        "fingerprint": raw.get("fingerprint"), "launches": raw.get("launches", []), "runs": raw.get("runs", []),
        **({"scheduler_job": scheduler_job} if scheduler_job else {}),
        **({"price_per_hour": price_per_hour} if price_per_hour is not None else {}),
    }


def derive(entry: dict) -> None:
    """Each suite's figures derived across the host's runs, then the warnings on every ok run with an
    implausible figure or a host that made its figure doubtful (bench/judging/machine.py); taken off
    the runs that no longer have one: a resumed run derives again."""
    results = HostResults([Run(run) for run in entry["runs"]], entry["launches"], entry["fingerprint"],
                          shared_machine.busy_shares(entry["launches"]))
    present = [suites.get(name, f"host {entry['name']}'s runs") for name in sorted({run.suite for run in results.runs})]
    for suite in present:
        suite.derive(results)
    for run in results.runs:
        if not run.ok:
            continue
        suite = suites.get(run.suite)
        found = suite.warnings(run, results) + machine.warnings(run, results, suite)
        if found:
            run.record["warnings"] = found
        else:
            run.record.pop("warnings", None)


def settle(entry: dict, complete: bool) -> None:
    """Fills in an entry's derived figures and warnings, then its status and error from its launches and runs."""
    derive(entry)
    entry["status"], entry["error"] = _status(entry, complete)


def _status(entry: dict, complete: bool) -> tuple[str, "str | None"]:
    """failed (nothing ran), partial (a failure, or the agent stopped early) or ok, and the error that says why."""
    troubles = [l for l in entry["launches"] if l["status"] not in ("ok", "skipped")] + [r for r in entry["runs"] if r["status"] != "ok"]
    error = entry["error"]
    if error and not entry["launches"]:
        status = "failed"
    elif error or troubles or not complete:
        status = "partial"
    else:
        status = "ok"
    error = error or next((t.get("error") for t in troubles if t.get("error")), None)
    if status == "partial" and not error:
        error = "the agent stopped before every launch had run"
    return status, error


def gather_group_runs(entries: dict, groups: tuple) -> None:
    """A group's runs all go on its first member's entry (see host_result.group in the bundle schema);
    each group is a sequence of its hosts' names, the first node's first."""
    for hosts in groups:
        first = entries.get(hosts[0])
        if first is None:
            continue
        for name in hosts[1:]:
            if name in entries:
                first["runs"] += entries[name]["runs"]
                entries[name]["runs"] = []
        first["runs"].sort(key=lambda run: run["launch_id"])


def new_bundle(run_id: str, started: str, plan: dict, hosts: list, incomplete_reason: "str | None" = None,
               smoke: bool = False) -> dict:
    """The bundle document around its host entries (each one settled); `smoke`: a smoke run's, whose
    figures are no measurements (`ddpbench run --smoke`)."""
    return {
        "schema_version": SCHEMA_VERSION, "kind": "ddpbench.bundle", "run_id": run_id,
        "started_at": started, "finished_at": utc_timestamp(),
        "complete": incomplete_reason is None, "incomplete_reason": incomplete_reason,
        **({"smoke": True} if smoke else {}),
        "tool": tool_info(), "plan": plan, "hosts": hosts,
    }
