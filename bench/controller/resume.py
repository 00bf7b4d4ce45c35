"""Resuming a run folder: what finished before, which launches to skip, old and new merged.

The previous state comes from the folder's bundle.json, or, when the controller never got
to write one (kill -9, power cut), from run.json and each host's raw.json files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bench.bundle import agent_raw_problem, read_bundle
from bench.common.protocol import parse_launch_id
from bench.common.selection import variant_parts
from bench import schemas
from bench.controller import plans
from bench.errors import UserError
from bench.inputfile import read_json_text
from bench.outputs import refuse_links

RAW_GLOB = "raw*.json"  # raw.json of the agent now, raw.NNN.json of the runs it resumes (see keep_raw_files); oldest first by name


@dataclass
class Previous:
    run_dir: Path
    run_id: str
    started_at: str
    plan: dict
    entries: dict  # host name -> its host_result (from the bundle) or the same shape from raw.json
    left_out: list = field(default_factory=list)  # launches found there that the run's plan never had, in words


def load_previous(run_dir: Path) -> Previous:
    if not run_dir.is_dir():
        raise UserError(f"--resume {run_dir}: not a folder; give a run folder that `ddpbench run` wrote (results/<run-id>)")
    refuse_links(run_dir, "run folder")  # a resume writes into it: through a planted link it would write anywhere
    bundle_path, run_path = run_dir / "bundle.json", run_dir / "run.json"
    if bundle_path.exists():
        bundle = read_bundle(bundle_path)
        previous = Previous(run_dir, bundle["run_id"], bundle["started_at"], bundle["plan"], {})
        previous.entries = {entry["name"]: _of_the_plan(entry, previous) for entry in bundle["hosts"]}
        return previous
    if not run_path.exists():
        raise UserError(f"{run_dir}: neither bundle.json nor run.json is there; give a run folder that `ddpbench run` wrote (results/<run-id>)")
    run = read_json_text(run_path, "run.json")
    problem = schemas.first_problem(run, "bundle", "run_state")
    if problem:
        raise UserError(f"{run_path}: damaged or not written by `ddpbench run` ({problem}); start a new run instead")
    previous = Previous(run_dir, run["run_id"], run["started_at"], plans.check(run["plan"], str(run_path)), {})
    entries = previous.entries
    for host_dir in sorted(run_dir.glob("hosts/*/")):
        for raw in filter(None, map(_read_raw, sorted(host_dir.glob(RAW_GLOB), key=_raw_order))):  # older runs first
            entry = _of_the_plan({
                "name": host_dir.name, "status": "ok" if raw["complete"] else "partial", "error": None,
                "fingerprint": raw["fingerprint"], "launches": raw["launches"], "runs": raw["runs"],
            }, previous)
            entries[host_dir.name] = merge_entry(entries[host_dir.name], entry) if host_dir.name in entries else entry
    return previous


def _of_the_plan(entry: dict, previous: Previous) -> dict:
    """The entry without the launches (and their runs) that the run's plan could not have made: what a
    resume seals into the bundle is what this plan measured, whatever else a folder holds."""
    foreign = sorted({l["id"] for l in entry["launches"] if not launch_of_plan(l["id"], previous.plan)}
                     | {r["launch_id"] for r in entry["runs"] if not launch_of_plan(r["launch_id"], previous.plan)})
    previous.left_out += [f"host {entry['name']}: launch {name!r}" for name in foreign]
    return {**entry, "launches": [l for l in entry["launches"] if l["id"] not in foreign],
            "runs": [r for r in entry["runs"] if r["launch_id"] not in foreign]}


def launch_of_plan(text: str, plan: dict) -> bool:
    """Whether a launch id is one the plan makes: its entry's index, suite, one of its transports, a
    variant its algorithms, protocols, nodes and GPUs could make, and at most its launch repeats (on a
    GPU host or a CPU one)."""
    parsed = parse_launch_id(text)
    if parsed is None:
        return False
    index, suite, preset, variant, _, repeat = parsed
    if index >= len(plan["suites"]):
        return False
    entry = plan["suites"][index]
    sides = [entry, *(entry[side] for side in ("gpu", "cpu") if side in entry)]
    transports = {t for side in sides for t in side.get("transports", [])}
    repeats = max(side.get("launch_repeats", 1) for side in sides)
    parts, pairs = variant_parts(sides), any("pairs" in side for side in sides)
    return suite == entry["suite"] and preset in transports and repeat <= repeats and all(
        part in parts or (pairs and part.startswith("g")) for part in variant)


def _raw_order(path: Path) -> tuple:
    """raw.NNN.json by its number (the runs it kept, oldest first), raw.json last."""
    number = path.name.split(".")[1] if path.name.count(".") == 2 else ""
    return (0, int(number)) if number.isdigit() else (1, 0)


def _read_raw(path: Path) -> "dict | None":
    try:
        raw = read_json_text(path, "raw.json")
    except UserError:
        return None  # a file cut short: its launches run again
    return raw if agent_raw_problem(raw) is None else None


def keep_raw_files(run_dir: Path) -> None:
    """Before a resumed run's agents overwrite raw.json: the earlier ones move aside (raw.NNN.json)
    and stay readable, so a resume killed in turn loses nothing that finished before it."""
    for raw_path in run_dir.glob("hosts/*/raw.json"):
        # After the highest number kept, whatever gaps lie below it: never onto a file already there.
        numbers = [_raw_order(p)[1] for p in raw_path.parent.glob(RAW_GLOB) if _raw_order(p)[0] == 0]
        kept = raw_path.with_name(f"raw.{max(numbers, default=0) + 1:03d}.json")
        while kept.exists():
            kept = kept.with_name(f"raw.{int(kept.name.split('.')[1]) + 1:03d}.json")
        raw_path.rename(kept)


def finished_launch_ids(entries: list) -> frozenset:
    """Launches that finished on every host of a unit (one host, or a group's members): skipped on resume."""
    finished = [frozenset(l["id"] for l in entry["launches"] if l["status"] == "ok") if entry else frozenset() for entry in entries]
    return frozenset.intersection(*finished) if finished else frozenset()


def merge_entry(old: dict, new: dict) -> dict:
    """The new entry, with the old launches and runs that were not run again."""
    rerun = {l["id"] for l in new["launches"]}
    launches = [l for l in old["launches"] if l["id"] not in rerun] + new["launches"]
    runs = [r for r in old["runs"] if r["launch_id"] not in rerun] + new["runs"]
    return {
        **new,
        "fingerprint": new["fingerprint"] or old["fingerprint"],
        "launches": sorted(launches, key=lambda launch: launch["id"]),
        "runs": sorted(runs, key=lambda run: run["launch_id"]),
    }
