"""Resuming a run folder: what finished before, which launches to skip, old and new merged.

The previous state comes from the folder's bundle.json, or, when the controller never got
to write one (kill -9, power cut), from run.json and each host's raw.json files. The folder is
trusted for nothing: only raw.json and raw.NNN.json are read, each within the limits a bundle is
read within; a launch or run that the run's plan could not have made, or that disagrees with its
launch, is left out; and each thing left out is said in one line (Previous.left_out), so that a
launch run again is never a surprise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from bench.bundle import IMPORTED, read_agent_raw, read_bundle
from bench.common.algorithms import DEFAULT
from bench.common.protocol import START_PHASES, parse_launch_id
from bench.common.sampling import Precision, contradiction
from bench.common.selection import parse_variant, variant_parts
from bench.common.transports import PRESETS, backend_for, mismatch
from bench import schemas, suites
from bench.controller import plans
from bench.errors import UserError
from bench.inputfile import read_json_text
from bench.outputs import refuse_planted

# raw.json of the agent now, raw.NNN.json of the runs it resumes (see keep_raw_files), oldest first by number.
RAW_NAME = re.compile(r"raw(?:\.([0-9]{3,6}))?\.json")
MOST_KEPT = 999_999


@dataclass
class Previous:
    run_dir: Path
    run_id: str
    started_at: str
    plan: dict
    smoke: bool = False  # a smoke run's (`ddpbench run --smoke`): its bundle says so again
    entries: dict = field(default_factory=dict)  # host name -> its host_result (from the bundle) or the same shape from raw.json
    left_out: list = field(default_factory=list)  # what the folder held that the resume does not take, one line each

    def take_raw(self, host: str, path: Path) -> None:
        """A host's raw file, its launches and runs checked against the plan, merged over what came before."""
        try:
            raw = read_agent_raw(path)
        except UserError as err:
            self.left_out.append(f"host {host}: {err}; its launches run again")
            return
        entry = self.checked({
            "name": host, "status": "ok" if raw["complete"] else "partial", "error": None,
            "fingerprint": raw["fingerprint"], "launches": raw["launches"], "runs": raw["runs"],
        }, path.name)
        self.entries[host] = merge_entry(self.entries[host], entry) if host in self.entries else entry

    def checked(self, entry: dict, source: str) -> dict:
        """The entry without the launches (and their runs) that this run's plan could not have made or
        that its runs disagree with: what a resume seals into the bundle is what this plan measured,
        whatever else the folder holds."""
        host = entry["name"]
        launches, dropped = {}, set()
        recorded = {launch["id"]: launch for launch in entry["launches"]}
        for launch in entry["launches"]:
            problem = launch_problem(launch, self.plan) or job_problem(launch, recorded)
            if problem:
                dropped.add(launch["id"])
                self.left_out.append(f"host {host}: {problem}; left out of the bundle")
            else:
                launches[launch["id"]] = launch
        for run in entry["runs"]:
            if run["launch_id"] in dropped:
                continue
            launch = launches.get(run["launch_id"])
            if launch is None:
                problem = (f"runs of launch {run['launch_id']!r}, which {source} does not record"
                           if launch_of_plan(run["launch_id"], self.plan) else f"launch {run['launch_id']!r} is not one the run's plan makes")
                self.left_out.append(f"host {host}: {problem}; left out of the bundle")
            else:
                problem = run_problem(run, launch, self.plan, bool((entry["fingerprint"] or {}).get("gpus")))
                if problem:
                    self.left_out.append(f"host {host}: {source}: {problem}; the launch and its runs are left out: it runs again")
            if problem:
                dropped.add(run["launch_id"])
        launches = {name: launch for name, launch in launches.items() if name not in dropped}
        return {**entry, "launches": [l for l in entry["launches"] if l["id"] in launches],
                "runs": [r for r in entry["runs"] if r["launch_id"] in launches]}


def load_previous(run_dir: Path) -> Previous:
    if not run_dir.is_dir():
        raise UserError(f"--resume {run_dir}: not a folder; give a run folder that `ddpbench run` wrote (results/<run-id>)")
    refuse_planted(run_dir, "run folder")  # a resume writes into it: through a planted link it would write anywhere
    bundle_path, run_path = run_dir / "bundle.json", run_dir / "run.json"
    if bundle_path.exists():
        bundle = read_bundle(bundle_path)
        if bundle["kind"] == IMPORTED:
            raise UserError(f"--resume {run_dir}: its bundle was imported (ddpbench import), not run: nothing is there to resume")
        previous = Previous(run_dir, bundle["run_id"], bundle["started_at"], plans.check(bundle["plan"], f"{bundle_path}: plan"),
                            bundle.get("smoke", False))
        previous.entries = {entry["name"]: previous.checked(entry, "bundle.json") for entry in bundle["hosts"]}
        return previous
    if not run_path.exists():
        raise UserError(f"{run_dir}: neither bundle.json nor run.json is there; give a run folder that `ddpbench run` wrote (results/<run-id>)")
    run = read_json_text(run_path, "run.json")
    problem = schemas.first_problem(run, "bundle", "run_state")
    if problem:
        raise UserError(f"{run_path}: damaged or not written by `ddpbench run` ({problem}); start a new run instead")
    previous = Previous(run_dir, run["run_id"], run["started_at"], plans.check(run["plan"], str(run_path)), run.get("smoke", False))
    for host_dir in sorted(run_dir.glob("hosts/*/")):
        for path in raw_files(host_dir, previous.left_out):
            previous.take_raw(host_dir.name, path)
    return previous


def raw_files(host_dir: Path, left_out: list) -> list[Path]:
    """A host folder's raw.NNN.json by number (the runs it kept, oldest first), then raw.json; any
    other raw*.json is no file ddpbench writes, and is said and left out."""
    found = []
    for path in sorted(host_dir.glob("raw*.json")):
        number = _kept_number(path.name)
        if number is None:
            shown = path.name if len(path.name) <= 60 else f"{path.name[:40]}...{path.name[-12:]}"
            left_out.append(f"host {host_dir.name}: {shown!r} is no file ddpbench writes (raw.json, raw.NNN.json); left out")
        else:
            found.append((number, path))
    return [path for _, path in sorted(found)]


def _kept_number(name: str) -> "int | None":
    """NNN of raw.NNN.json, MOST_KEPT + 1 for raw.json (the newest), None for any other name."""
    found = RAW_NAME.fullmatch(name)
    if not found:
        return None
    return int(found.group(1)) if found.group(1) else MOST_KEPT + 1


def launch_of_plan(text: str, plan: dict) -> bool:
    """Whether a launch id is one the plan makes: its entry's index, suite, one of its transports, a
    variant its algorithms, protocols, nodes and GPUs could make, and at most its launch repeats (on a
    GPU host or a CPU one)."""
    return _entry_of(text, plan) is not None


def _entry_of(text: str, plan: dict) -> "dict | None":
    """The plan entry that makes a launch of this id, or None where none could."""
    parsed = parse_launch_id(text)
    if parsed is None:
        return None
    index, suite, preset, variant, _, repeat = parsed
    if index >= len(plan["suites"]):
        return None
    entry = plan["suites"][index]
    sides = _sides(entry)
    transports = {t for side in sides for t in side.get("transports", [])}
    repeats = max(side.get("launch_repeats", 1) for side in sides)
    parts, pairs = variant_parts(sides), any("pairs" in side for side in sides)
    made = suite == entry["suite"] and preset in transports and repeat <= repeats and all(
        part in parts or (pairs and part.startswith("g")) for part in variant)
    return entry if made else None


def _sides(entry: dict) -> list[dict]:
    """The entry as a GPU host and a CPU host may run it: itself, and its gpu: and cpu: overrides."""
    return [entry, *(entry[side] for side in ("gpu", "cpu") if side in entry)]


def launch_problem(launch: dict, plan: dict) -> "str | None":
    """Why the plan could not have made this launch record, in words, or None."""
    entry = _entry_of(launch["id"], plan)
    if entry is None:
        return f"launch {launch['id']!r} is not one the run's plan makes"
    _, suite, preset, _, world_size, _ = parse_launch_id(launch["id"])
    nodes = launch.get("nodes", 1)
    if (launch["suite"], launch["preset"], launch["world_size"]) != (suite, preset, world_size):
        return (f"launch {launch['id']!r} records suite {launch['suite']}, preset {launch['preset']} and world size "
                f"{launch['world_size']}, not what its id says")
    if "all" not in entry["world_sizes"] and (world_size % nodes or world_size // nodes not in entry["world_sizes"]):
        sizes = ", ".join(map(str, entry["world_sizes"]))
        return f"launch {launch['id']!r} ran {world_size} ranks on {nodes} node(s), the plan's world sizes are {sizes} per node"
    return phases_problem(launch, plan["timeout_s"])


def longest_launch_s(timeout_s: float) -> float:
    """The most a launch record can say it took: timeout_s while it runs, as much again after its end
    mark while its job's processes exit (bench/agent/launch.py run_processes), and their ending's grace."""
    return 2 * timeout_s + 60


def phases_problem(launch: dict, timeout_s: float) -> "str | None":
    """Why a launch's duration or phases cannot be what it took under the plan's timeout_s, in words, or
    None: the phases sum to its duration (each rounded to a millisecond), which the plan's timeout bounds."""
    duration = launch["duration_s"]
    if duration > longest_launch_s(timeout_s):
        return (f"launch {launch['id']!r} records {duration:.6g} s, more than a launch can take under the plan's timeout_s "
                f"of {timeout_s:g} s ({longest_launch_s(timeout_s):g} s with its processes' exit)")
    phases = launch.get("phases")
    if phases is not None and abs(sum(phases.values()) - duration) > 0.001 * len(phases) + 0.001:
        return (f"launch {launch['id']!r} records phases summing to {sum(phases.values()):.6g} s, its duration_s is "
                f"{duration:.6g} s")
    return None


def job_problem(launch: dict, recorded: dict) -> "str | None":
    """Why a launch's job cannot be the one it ran in, in words, or None: a job is named by its first
    launch, recorded beside it, of its world size and nodes; only that launch pays the job's start-up."""
    job = launch.get("job")
    if job is None or job == launch["id"]:
        return None
    first = recorded.get(job)
    if first is None or first.get("job") != job:
        return f"launch {launch['id']!r} names job {_shown(job)}, whose first launch the same file does not record"
    if (first["world_size"], first.get("nodes", 1)) != (launch["world_size"], launch.get("nodes", 1)):
        return (f"launch {launch['id']!r} names job {job!r}, whose first launch ran {first['world_size']} ranks on "
                f"{first.get('nodes', 1)} node(s), not its {launch['world_size']} on {launch.get('nodes', 1)}")
    started = [name for name in START_PHASES if (launch.get("phases") or {}).get(f"{name}_s")]
    if started:
        return (f"launch {launch['id']!r} records the start-up of job {job!r} ({', '.join(started)}), "
                "which only the job's first launch pays")
    return None


def run_problem(run: dict, launch: dict, plan: dict, gpus: bool) -> "str | None":
    """Why a run cannot have been measured by its launch (the record it names) on its host (`gpus`:
    whether it has any), in words, or None."""
    where = f"run of launch {launch['id']!r}"
    if run["world_size"] != launch["world_size"]:
        return f"a {where} claims world size {run['world_size']}, the launch ran {launch['world_size']}"
    if run["suite"] != launch["suite"]:
        return f"a {where} claims suite {run['suite']!r}, the launch ran {launch['suite']!r}"
    if run["transport"]["preset"] != launch["preset"]:
        return f"a {where} claims transport preset {run['transport']['preset']!r}, the launch ran {launch['preset']!r}"
    repeat = parse_launch_id(launch["id"])[5]
    if run.get("repeat", 1) != repeat:
        return f"a {where} claims repeat {run.get('repeat', 1)}, the launch is repeat {repeat}"
    if run.get("profiled_in") is not None and not _first_of(run["profiled_in"], launch["id"]):
        return f"a {where} claims its kernels were profiled by launch {_shown(run['profiled_in'])}, not its entry's first launch"
    entry = _entry_of(launch["id"], plan)
    suite = suites.get(run["suite"])
    for key in suite.identity_params:  # what tells its configurations apart
        value = suite.planned_value(run["params"], key)
        if not any(_param_allows(side.get("params", side), key, value) for side in _sides(entry)):
            return f"a {where} has {key} {_shown(value)}, which the plan's entry does not ask for"
    return setting_problem(run, launch, entry, gpus) or sampling_problem(run, launch, plan)


def _first_of(first_id: str, repeat_id: str) -> bool:
    """Whether launch first_id is the first launch of the entry's configuration that repeat_id repeats."""
    first, repeat = parse_launch_id(first_id), parse_launch_id(repeat_id)
    return first is not None and repeat is not None and first[5] == 1 < repeat[5] and first[:5] == repeat[:5]


def sampling_problem(run: dict, launch: dict, plan: dict) -> "str | None":
    """Why a run's sampling record is not what its launch sampled toward under the plan's precision, in
    words, or None: a record of every run that succeeded where the plan asks a precision (none where it
    asks none), toward the plan's target, within its budget and its launch's time, consistent in itself."""
    where = f"run of launch {launch['id']!r}"
    record, precision = run.get("sampling"), Precision.of(plan)
    if precision is None:
        return f"a {where} records sampling toward a precision target, and the plan asks none" if record else None
    if record is None:
        return (f"a {where} has no sampling record, and the plan's precision asks one of every run that succeeded"
                if run["status"] == "ok" else None)
    asked = precision.target(plan["timeout_s"], 1)
    targets = {asked.halfwidth_fraction, asked.scaled_halfwidth_fraction}
    if record["target_halfwidth_fraction"] not in targets:
        return (f"a {where} sampled toward +-{record['target_halfwidth_fraction']:.3g}, the plan's precision asks "
                + " or ".join(f"+-{target:.3g}" for target in sorted(targets)))
    if record["budget_s"] > asked.budget_s * (1 + 1e-9):
        return (f"a {where} had {record['budget_s']:.6g} s to sample, more than the plan's budget_fraction of timeout_s "
                f"({asked.budget_s:.6g} s)")
    if record["past_minimum_s"] > launch["duration_s"] + 1:  # a second for the clocks' and the rounding's differences
        return f"a {where} sampled {record['past_minimum_s']:.6g} s past its minimum, in a launch of {launch['duration_s']:.6g} s"
    found = contradiction(record)
    return f"a {where}: its sampling record {found}" if found else None


def setting_problem(run: dict, launch: dict, entry: dict, gpus: bool) -> "str | None":
    """Why a run's setting is not what its launch ran, in words, or None: NCCL's algorithm and protocol
    asked, its nodes and GPUs (its launch id's variant and the launch's nodes), its entry's env, the
    backend and environment of its preset, and a link it says matched its preset where its own record
    of what NCCL used says otherwise. Everything that tells a run's configuration apart is what ran."""
    where = f"run of launch {launch['id']!r}"
    algorithm, protocol, emulated, chosen = parse_variant(parse_launch_id(launch["id"])[3])
    transport = run["transport"]
    for name, asked in (("algorithm", algorithm), ("protocol", protocol)):
        claimed = transport.get(name, DEFAULT)
        if claimed != asked:
            said, ran = (f"NCCL's own {name}" if value == DEFAULT else f"NCCL {name} {_shown(value)}" for value in (claimed, asked))
            return f"a {where} claims {said}, the launch asked for {ran}"
    count = launch.get("nodes", 1) * emulated
    planned = {"count": count, "ranks_per_node": run["world_size"] // count, "emulated": emulated > 1} if count > 1 else {}
    nodes = transport.get("nodes") or {}
    if {key: nodes.get(key) for key in planned} != planned or bool(nodes) != bool(planned):
        said = f"{nodes.get('count')} node(s) of {nodes.get('ranks_per_node')} rank(s)" if nodes else "one node"
        ran = f"{count} node(s) of {planned['ranks_per_node']} rank(s)" if planned else "one node"
        return f"a {where} claims {said}, the launch ran {ran}"
    if run.get("gpus") != (list(chosen) if chosen is not None else None) or launch.get("gpus") != run.get("gpus"):
        return f"a {where} claims GPUs {_shown(run.get('gpus'))}, the launch ran on {list(chosen) if chosen else 'the first ones'}"
    if run.get("env", {}) != entry.get("env", {}):
        return f"a {where} claims env {_shown(run.get('env', {}))}, the plan's entry sets {_shown(entry.get('env', {}))}"
    backend = backend_for(launch["preset"], gpus)
    env = {**PRESETS[launch["preset"]].env_for(count), **({"NCCL_P2P_DISABLE": "1"} if transport.get("p2p_off_by_gate") else {})}
    if (transport["backend"], transport["env"]) != (backend, env if backend == "nccl" else {}):
        return (f"a {where} claims backend {_shown(transport['backend'])} with preset env {_shown(transport['env'])}, "
                f"its preset {launch['preset']!r} runs {backend} on this host")
    found = backend == "nccl" and run["world_size"] > 1 and transport["matches_preset"] and mismatch({**transport, "matches_preset": False})
    if found:
        return f"a {where} claims its link matched its preset, and its own record says otherwise ({found[:120]})"
    return None


def _shown(value, most: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= most else text[:most - 3] + "..."


def _param_allows(params: dict, key: str, value) -> bool:
    """Whether an entry's params (or an override of them) allow a run's value of key: the same value,
    one of a list the entry sweeps under that name or its plural (ops -> op), or a key the entry does
    not set (what the ranks choose: a collective's sizes)."""
    for name in (key, f"{key}s", f"{key}es"):
        if name in params:
            given = params[name]
            return value == given or (isinstance(given, list) and not isinstance(value, list) and value in given)
    return True


def keep_raw_files(run_dir: Path) -> None:
    """Before a resumed run's agents overwrite raw.json: the earlier ones move aside (raw.NNN.json)
    and stay readable, so a resume killed in turn loses nothing that finished before it."""
    for raw_path in run_dir.glob("hosts/*/raw.json"):
        keep_raw_file(raw_path)


def keep_raw_file(raw_path: Path) -> Path:
    """raw.json moved to raw.NNN.json, after the highest number kept (whatever gaps lie below it:
    never onto a file already there), and where it now is; past MOST_KEPT it stays raw.json."""
    numbers = [number for number in map(_kept_number, (p.name for p in raw_path.parent.glob("raw.*.json")))
               if number is not None and number <= MOST_KEPT]
    number = max(numbers, default=0) + 1
    while number <= MOST_KEPT and raw_path.with_name(f"raw.{number:03d}.json").exists():
        number += 1
    if number > MOST_KEPT:
        return raw_path
    kept = raw_path.with_name(f"raw.{number:03d}.json")
    raw_path.rename(kept)
    return kept


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
