"""`ddpbench run`: the plan on every host, in parallel, merged into one bundle and a report.

A host that fails does not stop the others; Ctrl-C, SIGTERM or SIGHUP ends every agent and
still writes the bundle of what finished, marked incomplete with the signal's name. A run folder can be resumed: launches that
finished are skipped, the new runs are merged with the old ones into the same folder.
"""

from __future__ import annotations

import itertools
import json
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from bench import suites
from bench.bundle import agent_raw_problem, write_bundle
from bench.bundle.assembly import gather_group_runs, host_entry, new_bundle, new_run_id, settle
from bench.common import algorithms
from bench.common.files import write_text
from bench.common.selection import side_of
from bench.common.timestamps import utc_timestamp
from bench.controller.earlier_runs import launch_history
from bench.controller.groups import run_group
from bench.controller.inventory import Group, Host, Inventory
from bench.controller.pricing import Price, price, probe_all
from bench.controller.progress import HostProgress
from bench.controller.resume import Previous, finished_launch_ids, keep_raw_file, keep_raw_files, merge_entry
from bench.controller.runtimes import RUNTIMES, AgentJob, HostError, Runtime
from bench.controller import stop_signals
from bench.errors import PlanError, UserError
from bench.outputs import new_folder

RUN_FILE = "run.json"  # the run's id, start and plan, written first: what a resume needs when no bundle was written


@dataclass
class HostRun:
    host: Host
    runtime: Runtime
    job: "AgentJob | None" = None
    group: "Group | None" = None
    node_rank: "int | None" = None
    raw: "dict | None" = None
    error: "str | None" = None


def run_one(item: HostRun) -> None:
    """Run the agent on one host; keep what it wrote even when it failed."""
    try:
        item.raw = item.runtime.run(item.job)
    except HostError as err:
        item.error = str(err)
        raw_path = item.job.result_dir / "raw.json"
        try:
            item.raw = json.loads(raw_path.read_text()) if raw_path.exists() else None
        except ValueError as bad:
            item.error += f"; its raw.json is not JSON ({bad}) and stays in the run folder"
    if item.raw is not None:
        problem = agent_raw_problem(item.raw)
        if problem:
            item.raw = None
            item.error = (f"{item.error + '; ' if item.error else ''}the agent's raw.json does not follow the bundle schema "
                          f"({problem}): another agent version, or a damaged file; it stays in the run folder")


def host_entry_of(item: HostRun) -> dict:
    """One host's entry in the bundle, from whatever its agent managed to write (status comes later)."""
    return host_entry(
        name=item.host.name, runtime=item.host.runtime, labels=item.host.labels, raw=item.raw, error=item.error,
        group=item.group.name if item.group else None, node_rank=item.node_rank,
        pin_mismatches=item.runtime.pin_mismatches, scheduler_job=item.runtime.scheduler_job,
        price_per_hour=item.host.price_per_hour,
    )


def execute(inventory: Inventory, plan: dict, out_root: Path, previous: "Previous | None" = None,
            verification: "dict | None" = None, smoke: bool = False,
            approve: "Callable[[], None]" = lambda: None) -> tuple[Path, dict]:
    """Run the plan everywhere; returns the bundle's path and the bundle. `previous`: the run
    this one resumes; `verification`: what a rerun of a published bundle records about that
    bundle (`ddpbench verify`); `smoke`: the plan is plans.smoke's, and the bundle says so;
    `approve`: once every host's input is checked, before anything is written or started (it
    raises to stop the run: `run` holds the plan's price to --max-hours there)."""
    runtimes = _checked_runtimes(inventory, plan)
    approve()
    run_id, started, run_dir = _open_run_folder(out_root, plan, previous, smoke)
    with HostProgress([h.name for h in inventory.hosts]) as progress:
        items = _host_runs(inventory, runtimes, plan, run_id, run_dir, out_root, progress)
        if previous:
            _collect_kept(items, previous)
        units = _units(items, inventory.groups, previous)
        interrupted = _run_units(units, progress)
    entries, complete = _entries(items, previous)
    gather_group_runs(entries, tuple(group.hosts for group in inventory.groups))
    for name, entry in entries.items():
        if interrupted and not complete[name] and not entry["error"]:
            entry["error"] = stop_signals.reason()
        settle(entry, complete[name])
    bundle = new_bundle(run_id, started, plan, list(entries.values()), stop_signals.reason() if interrupted else None, smoke)
    if verification is not None:
        bundle["verification"] = verification
    path = run_dir / "bundle.json"
    return path, write_bundle(path, bundle)


def priced(inventory: Inventory, plan: dict, previous: "Previous | None" = None) -> Price:
    """The plan's price on these hosts before any agent starts (pricing.py), less the launches a resumed
    run finished (on every member of a host's group)."""
    def finished(host: Host) -> frozenset:
        group = inventory.group_of(host.name)
        return finished_launch_ids([previous.entries.get(name) for name in (group.hosts if group else (host.name,))])

    skip = {host.name: finished(host) for host in inventory.hosts} if previous else {}
    return price(inventory, plan, probe_all(inventory), skip)


def dry_run(inventory: Inventory, plan: dict, out_root: Path) -> "dict[str, tuple[str | None, list[str]]]":
    """Each host's agent plans, checks and prices the plan, and launches nothing; {host name: (why it
    refused the plan or failed, or None; its launches a line each, with their estimates)}. Nothing is
    written under out_root, whose earlier runs of the plan price the launches they ran."""
    runtimes = _checked_runtimes(inventory, plan)
    with tempfile.TemporaryDirectory(prefix="ddpbench-dry-run-") as folder:
        with HostProgress([h.name for h in inventory.hosts]) as progress:
            items = _host_runs(inventory, runtimes, plan, "dry-run", Path(folder), out_root, progress, dry_run=True)
            _run_units(_units(items, inventory.groups, None), progress)
    return {name: (item.error, HostProgress.plan_listing(progress.planned[name]) if name in progress.planned else [])
            for name, item in items.items()}


def nothing_measured(bundle: dict) -> "str | None":
    """Why a run whose hosts all finished measured nothing, in words with the fix, or None: every
    launch of every host was skipped (more GPUs or nodes than a host gives), which is no result."""
    if any(host["runs"] or host["status"] != "ok" for host in bundle["hosts"]) or not bundle["hosts"]:
        return None
    skipped = [f"host {host['name']}: {launch['id']}: {launch['error']}" for host in bundle["hosts"] for launch in host["launches"]
               if launch["status"] == "skipped"]
    more = f"; and {len(skipped) - 2} more" if len(skipped) > 2 else ""
    return (f"nothing was measured: every launch was skipped ({'; '.join(skipped[:2]) or 'the plan made none'}{more}); "
            "give the plan world sizes, nodes and GPUs these hosts have")


def _checked_runtimes(inventory: Inventory, plan: dict) -> dict:
    """{host name: its runtime}, once every host's runtime exists and accepts its part of the plan."""
    unknown = [h for h in inventory.hosts if h.runtime not in RUNTIMES]
    if unknown:
        raise UserError(
            f"host {unknown[0].name!r}: runtime {unknown[0].runtime!r} is not available in this version; "
            f"use one of {', '.join(sorted(RUNTIMES))}"
        )
    _check_axes(plan)
    _check_placements(inventory, plan)
    runtimes = {host.name: RUNTIMES[host.runtime]() for host in inventory.hosts}
    for host in inventory.hosts:
        runtimes[host.name].check_input(host, plan)
    return runtimes


def _check_placements(inventory: Inventory, plan: dict) -> None:
    """Each suite's judgement of where its entries would run (the nodes of a host's launches: its
    group's hosts, or a slurm job's nodes, or its first alone: the entry's span), before any host is
    touched. The host's kind is not known yet, so an entry is judged with its gpu: and with its cpu: override."""
    for host in inventory.hosts:
        group = inventory.group_of(host.name)
        nodes = len(group.hosts) if group else host.slurm.get("nodes", 1)
        for index, entry in enumerate(plan["suites"]):
            suite = suites.get(entry["suite"])
            for cuda in (True, False):
                side = side_of(entry, cuda)
                params = suite.params(side.params)
                for ranks in entry["world_sizes"]:
                    try:
                        suite.check_placement(params, nodes=side.job_nodes(nodes) * side.nodes,
                                              ranks_per_node=None if ranks == "all" else int(ranks) // side.nodes)
                    except PlanError as err:
                        raise UserError(f"host {host.name!r}: the plan's suites[{index}]: {err}") from None


def _check_axes(plan: dict) -> None:
    """What an entry's nodes and NCCL algorithms ask, judged before any host is touched: an explicit
    world size its nodes do not divide; an algorithm or protocol its collectives have not (its gpu:
    side: only hosts with a GPU have NCCL; what only a host can judge, the agent judges there)."""
    for index, entry in enumerate(plan["suites"]):
        suite = suites.get(entry["suite"])
        explicit = [int(ranks) for ranks in entry["world_sizes"] if ranks != "all"]
        for cuda in (True, False):
            side = side_of(entry, cuda)
            for ranks in explicit:
                if ranks % side.nodes:
                    raise UserError(f"the plan's suites[{index}]: {entry['suite']}: nodes: {side.nodes} splits each launch's "
                                    f"ranks into {side.nodes} nodes, and world size {ranks} does not divide; use world sizes "
                                    f"that are multiples of {side.nodes}")
        side = side_of(entry, True)
        found = algorithms.env_problem(entry.get("env", {}), side.algorithms, side.protocols)
        if found:
            raise UserError(f"the plan's suites[{index}]: {entry['suite']}: {found}")
        collectives = suite.nccl_collectives(suite.params(side.params))
        for algorithm, protocol_name, ranks in itertools.product(side.algorithms, side.protocols, explicit or [side.nodes]):
            found = algorithms.problem(collectives, algorithm, protocol_name, ranks_per_node=max(1, ranks // side.nodes))
            if found:
                raise UserError(f"the plan's suites[{index}]: {entry['suite']}: {found}")


def _open_run_folder(out_root: Path, plan: dict, previous: "Previous | None", smoke: bool) -> tuple[str, str, Path]:
    """(run id, start, folder): the resumed run's, its earlier raw.json files kept aside, or a new
    folder whose run.json records what a resume needs."""
    if previous:
        keep_raw_files(previous.run_dir)
        return previous.run_id, previous.started_at, previous.run_dir
    run_id, started = new_run_id(), utc_timestamp()
    run_dir = new_folder(out_root, run_id, "results folder")
    write_text(run_dir / RUN_FILE, json.dumps({"run_id": run_id, "started_at": started, "plan": plan, "smoke": smoke}, indent=1))
    return run_id, started, run_dir


def _host_runs(inventory: Inventory, runtimes: dict, plan: dict, run_id: str, run_dir: Path, out_root: Path,
               progress: HostProgress, dry_run: bool = False) -> "dict[str, HostRun]":
    """Each host's agent job, its progress shown under its name."""
    items = {}
    for host in inventory.hosts:
        group = inventory.group_of(host.name)
        item = HostRun(host, runtimes[host.name], group=group, node_rank=group.hosts.index(host.name) if group else None)
        item.job = AgentJob(
            host=host, plan=plan, result_dir=run_dir / "hosts" / host.name, run_id=run_id,
            progress=lambda event, name=host.name: progress.update(name, event),
            history=launch_history(out_root, plan, host.name, run_dir), dry_run=dry_run,
        )
        items[host.name] = item
    return items


def _collect_kept(items: "dict[str, HostRun]", previous: Previous) -> None:
    """What each host kept of the run resumed (its connection was lost before its results were
    fetched), taken in before anything runs: its finished launches are then skipped, not run again."""
    def collect(item: HostRun) -> "Path | None":
        return keep_raw_file(item.job.result_dir / "raw.json") if item.runtime.collect_kept(item.job) else None

    with ThreadPoolExecutor(max_workers=len(items), thread_name_prefix="collect") as pool:
        kept = dict(zip(items, pool.map(collect, items.values())))
    for name, path in kept.items():
        if path is not None:
            previous.take_raw(name, path)


def _units(items: "dict[str, HostRun]", groups: "tuple[Group, ...]", previous: "Previous | None") -> list:
    """What runs as one: a host alone, or a group's members together; each told which launches
    a resumed run already finished."""
    units = [[item] for item in items.values() if item.group is None]
    units += [[items[name] for name in group.hosts] for group in groups]
    for unit in units:
        skip = finished_launch_ids([previous.entries.get(m.host.name) for m in unit]) if previous else frozenset()
        for member in unit:
            member.job.skip_launch_ids = skip
    return units


def _entries(items: "dict[str, HostRun]", previous: "Previous | None") -> tuple[dict, dict]:
    """({host name: bundle entry}, {host name: whether its agent finished}), merged with the
    entries of the run this one resumes."""
    entries = {name: host_entry_of(item) for name, item in items.items()}
    complete = {name: bool(item.raw and item.raw.get("complete")) for name, item in items.items()}
    for name, old in (previous.entries.items() if previous else ()):
        if name in entries:
            entries[name] = merge_entry(old, entries[name])
        elif "runtime" in old:  # left out of the hosts file: its bundle entry stays (raw.json alone cannot say how it ran)
            entries[name] = old
            complete[name] = old["status"] == "ok"
    return entries, complete


def _run_units(units: list, progress: HostProgress) -> bool:
    """Every unit (a host, or a group's members) in a thread of its own; True when Ctrl-C (or
    SIGTERM, SIGHUP: see stop_signals) stopped them."""

    def run_unit(unit: list) -> None:
        if len(unit) == 1:
            run_one(unit[0])
        else:
            run_group(unit[0].group, unit, run_one)
        for item in unit:
            progress.finish(item.host.name, item.error, complete=bool(item.raw and item.raw.get("complete")))

    pool = ThreadPoolExecutor(max_workers=len(units), thread_name_prefix="host")
    futures = [pool.submit(run_unit, unit) for unit in units]
    interrupted = False
    try:
        for future in futures:
            while not future.done():
                threading.Event().wait(0.2)  # wakes for Ctrl-C, unlike a blocking result()
            future.result()
    except KeyboardInterrupt:
        interrupted = True
        for unit in units:
            for item in unit:
                item.runtime.cancel(stop_signals.reason())
        for future in futures:
            future.exception()
    finally:
        pool.shutdown(wait=True)
    return interrupted
