"""What a launch leaves in the bundle: its run records, each with the transport NCCL really used
and the GPU counters of its measured window, and its launch record, with where its time went;
raw.json, rewritten after every launch so that an interruption loses at most the launches in flight.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from bench import suites
from bench.agent.planning import Launch
from bench.common import protocol
from bench.common.files import write_text
from bench.common.nccl_log import tuning_choices
from bench.common.run import Run
from bench.common.transports import mismatch, run_transport, transport_record

LOG_TAIL_LINES = 20


def log_parts(log_text: str, launches: int) -> "list[str]":
    """A job's log cut where each launch begins (the worker's protocol.LAUNCH_BEGINS lines): the
    start-up's lines go with the first launch."""
    parts = [[] for _ in range(launches)]
    index = 0
    for line in log_text.splitlines(keepends=True):
        if line.startswith(protocol.LAUNCH_BEGINS):
            said = line[len(protocol.LAUNCH_BEGINS):].strip()
            index = int(said) if said.isdigit() and int(said) < launches else index
        parts[index].append(line)
    return ["".join(part) for part in parts]


def transports(launch: Launch, job_log: str, own_log: str) -> "tuple[dict, Callable[[dict], dict]]":
    """The launch's transport record (the links NCCL set up, from the job's log so far), and each run's:
    the launch's, with what NCCL's TUNING lines in the launch's own part of the log say it ran for the
    run's own collectives (for the launch: every collective of the entry)."""
    transport = transport_record(launch.preset, launch.backend, launch.world_size, job_log, launch.topology,
                                 launch.algorithm, launch.protocol)
    if launch.p2p_off_by_gate:
        transport = {**transport, "env": {**transport["env"], "NCCL_P2P_DISABLE": "1"}, "p2p_off_by_gate": True}
    # NCCL logs its TUNING lines on global rank 0 only: another node of a job has nothing to judge by
    suite, choices = suites.get(launch.suite), tuning_choices(own_log) if launch.nodes.node_rank == 0 else None
    functions = [(function, None) for _, function in suite.nccl_collectives(suite.params(launch.params)) if function]
    return (run_transport(transport, choices, functions, launch.world_size),
            lambda run: run_transport(transport, choices, suite.nccl_calls(Run(run)), launch.world_size))


def run_records(launch: Launch, lines: "list[str]", run_transport_of: Callable[[dict], dict],
                counters_of: Callable[["dict | None"], "dict | None"]) -> "list[dict]":
    """The launch's run records as the bundle holds them: the ranks' lines, with what only the agent knows."""
    return [{**run, "transport": run_transport_of(run), "launch_id": launch.id, "repeat": launch.repeat,
             "gpu_counters": counters_of(run.get("measured_window")),
             **({"env": launch.entry_env} if launch.entry_env else {}), **({"gpus": list(launch.gpus)} if launch.gpus is not None else {}),
             **({"profiled_in": launch.profiled_in} if launch.profiled_in else {})}
            for run in map(json.loads, lines)]


def summary(launch: Launch) -> dict:
    """What every launch record says of its launch, run or not."""
    return {"id": launch.id, "suite": launch.suite, "preset": launch.preset, "world_size": launch.world_size,
            "nodes": launch.nodes.nnodes, **({"gpus": list(launch.gpus)} if launch.gpus is not None else {})}


def skipped_record(launch: Launch) -> dict:
    return {**summary(launch), "status": "skipped", "error": launch.skipped_reason, "duration_s": 0.0, "log_tail": []}


def kept_error(status: str, error: "str | None", launch: Launch, runs: "list[dict]", hung: str) -> "str | None":
    """A launch cut short keeps what it measured, and says how much."""
    if status != "timeout" or not runs:
        return error
    kept = f"{len(runs)} of {max(launch.configurations, len(runs))} configurations finished and are kept"
    return (error + f", or the launch needed longer; {kept}: if none hung, raise timeout_s or trim the entry (sizes, steps, batches)"
            if error.endswith(hung) else f"{error}; {kept}")


def launch_record(launch: Launch, status: str, error: "str | None", transport: dict, **measured) -> dict:
    """The launch's record (schema/bundle.schema.json: launch); `measured`: its duration_s, phases, job,
    resources, the CPU others took, GPU counters, placement and log tail."""
    if status == "ok" and not transport["matches_preset"]:
        error = mismatch(transport)
    return {**summary(launch), "status": status, "error": error, "transport": transport, **measured}


def tail(log_text: str, lines: int = LOG_TAIL_LINES) -> "list[str]":
    return log_text.splitlines()[-lines:]


def write_raw(out_dir: Path, raw: dict) -> None:
    write_text(out_dir / "raw.json", json.dumps(raw, indent=1))
