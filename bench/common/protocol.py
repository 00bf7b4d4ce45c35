"""The agent protocol, the one contract between the controller and the agent, and between the agent
and its ranks: the agent's arguments, the progress events it prints (one JSON object a line), and
the spec each launch's ranks read. Both sides write and read these only through here.

Standard library only: the agent ships it (bench/common).
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import ClassVar

from bench.common.files import open_anew, write_text

# --- The agent's command line ------------------------------------------------------------------


NODE_RANK_FLAG = "--node-rank"


@dataclass(frozen=True)
class Placement:
    """Where one agent sits in a multi-node job (torchrun's c10d rendezvous); the default is one node."""

    nnodes: int = 1
    node_rank: int = 0
    rendezvous: str = ""  # host:port of the c10d store, on the first node
    job_id: str = "ddpbench"

    def flags(self, with_node_rank: bool = True) -> list:
        """The agent's placement options. Without the node rank where each node adds its own
        (NODE_RANK_FLAG): a batch job's script, whose values may be shell words ("$SLURM_JOB_ID")."""
        rank = [NODE_RANK_FLAG, str(self.node_rank)] if with_node_rank else []
        return ["--nnodes", str(self.nnodes), *rank, "--rendezvous", self.rendezvous, "--job-id", self.job_id]


@dataclass(frozen=True)
class AgentArgs:
    """`python -m bench.agent run ...`: what a runtime tells the agent it starts."""

    plan: str  # the resolved plan as JSON, validated by the controller
    out: str  # folder for raw.json, launch logs and results
    env: dict = field(default_factory=dict)  # environment overrides for the ranks
    placement: "Placement | None" = None  # None: one node
    skip: tuple = ()  # launch ids already finished (resume)
    history: "dict | None" = None  # launch durations of an earlier run of this plan (bench/common/history.py)
    stop_on_stdin_eof: bool = False  # end the run when stdin closes (the SSH connection is gone)
    dry_run: bool = False  # plan and price the launches, run none

    def argv(self, entry: list) -> list:
        """The whole command: `entry` is how the host starts the agent ([python, "-m", "bench.agent"],
        [python, "agent.pyz"]); `run` and the options follow."""
        command = [*entry, "run", "--plan", self.plan, "--out", self.out, "--env", json.dumps(self.env)]
        if self.stop_on_stdin_eof:
            command.append("--stop-on-stdin-eof")
        if self.placement is not None:
            command += self.placement.flags()
        if self.skip:
            command += ["--skip", ",".join(sorted(self.skip))]
        if self.history:
            command += ["--history", json.dumps(self.history)]
        if self.dry_run:
            command.append("--dry-run")
        return command


def agent_parser() -> argparse.ArgumentParser:
    """The agent's own parser of what AgentArgs.argv writes."""
    parser = argparse.ArgumentParser(prog="python -m bench.agent", description="ddpbench's agent: runs on the GPU host")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a resolved plan (JSON) on this host")
    run.add_argument("--plan", required=True, help="the plan as JSON, validated by the controller")
    run.add_argument("--out", required=True, help="folder for raw.json, launch logs and results")
    run.add_argument("--env", default="{}", help="JSON object of environment overrides for the ranks")
    run.add_argument("--nnodes", type=int, default=1)
    run.add_argument("--node-rank", type=int, default=0)
    run.add_argument("--rendezvous", default="", help="HOST:PORT of the c10d rendezvous (multi-node)")
    run.add_argument("--job-id", default="ddpbench")
    run.add_argument("--skip", default="", help="comma-separated launch ids already finished (resume)")
    run.add_argument("--history", default="null", help="JSON: launch durations of an earlier run of this plan (bench/common/history.py)")
    run.add_argument("--stop-on-stdin-eof", action="store_true", help="end the run when stdin closes (the SSH connection is gone)")
    run.add_argument("--dry-run", action="store_true", help="plan and price every launch, then stop: run none")
    sub.add_parser("fingerprint", help="print this machine's fingerprint as JSON")
    return parser


def parse_agent_args(namespace: argparse.Namespace) -> AgentArgs:
    """AgentArgs from the parsed `run` command line."""
    return AgentArgs(
        plan=namespace.plan, out=namespace.out, env=json.loads(namespace.env),
        placement=Placement(namespace.nnodes, namespace.node_rank, namespace.rendezvous, namespace.job_id),
        skip=tuple(filter(None, namespace.skip.split(","))), history=json.loads(namespace.history),
        stop_on_stdin_eof=namespace.stop_on_stdin_eof, dry_run=namespace.dry_run,
    )


# --- Progress events ---------------------------------------------------------------------------

EVENTS: dict = {}  # kind -> event class


def _event(cls):
    EVENTS[cls.kind] = cls
    return cls


@dataclass(frozen=True)
class Event:
    kind: ClassVar[str]

    def line(self) -> str:
        """The event as the agent prints it: one JSON object."""
        return json.dumps({"event": self.kind, **asdict(self)})


@_event
@dataclass(frozen=True)
class Fingerprinting(Event):
    """The agent reads the machine before its first launch."""

    kind: ClassVar[str] = "fingerprint"


@_event
@dataclass(frozen=True)
class Planned(Event):
    """What will run and how long each launch should take; measured_before: estimates that are an earlier run's
    durations; finished_before: launches a resumed run finished already (kept, not run again); gate_s: the P2P
    gate's estimate, before the first launch; slowdown: how many times longer CPU work takes on this host now
    than on an idle one (other processes), which a CPU host's estimates count; skipped: why each launch that
    does not run here does not; host_paced: launches priced by the cost model whose steps it expects the
    host's CPU to pace (a slower CPU stretches them: the ETA learns by how much from those that finish)."""

    kind: ClassVar[str] = "plan"
    launches: list
    estimates_s: dict = field(default_factory=dict)
    configurations: dict = field(default_factory=dict)
    measured_before: list = field(default_factory=list)
    finished_before: list = field(default_factory=list)
    gate_s: float = 0.0
    slowdown: float = 1.0
    skipped: dict = field(default_factory=dict)
    host_paced: list = field(default_factory=list)


@_event
@dataclass(frozen=True)
class LaunchStarted(Event):
    kind: ClassVar[str] = "launch_start"
    id: str


@_event
@dataclass(frozen=True)
class RunEnded(Event):
    """A configuration the ranks finished: done of total in the launch, `run` its label."""

    kind: ClassVar[str] = "run_end"
    id: str
    done: int
    total: int
    run: str
    elapsed_s: float


@_event
@dataclass(frozen=True)
class LaunchEnded(Event):
    kind: ClassVar[str] = "launch_end"
    id: str
    status: str
    error: "str | None"
    runs: int
    duration_s: float


@_event
@dataclass(frozen=True)
class LaunchSkipped(Event):
    kind: ClassVar[str] = "launch_skipped"
    id: str
    reason: str


@_event
@dataclass(frozen=True)
class Stage(Event):
    """A step of readying a host (connect, deploy, collect ...): the controller's runtimes say these."""

    kind: ClassVar[str] = "stage"
    stage: str


@_event
@dataclass(frozen=True)
class Warned(Event):
    kind: ClassVar[str] = "warning"
    message: str


@_event
@dataclass(frozen=True)
class Failed(Event):
    """The agent cannot run the plan here: the host's error."""

    kind: ClassVar[str] = "error"
    message: str


def read_event(line: str) -> "Event | None":
    """One progress event from a line of the agent's stdout; anything else (a stray print, another
    agent version's event) is not ours to parse: None."""
    try:
        document = json.loads(line)
    except ValueError:
        return None
    if not isinstance(document, dict):
        return None
    cls = EVENTS.get(document.get("event"))
    if cls is None:
        return None
    names = {f.name for f in fields(cls)}
    try:
        return cls(**{k: v for k, v in document.items() if k in names})
    except TypeError:  # a field missing
        return None


# --- A launch's id, and its spec, read by each rank ---------------------------------------------

@dataclass(frozen=True)
class Phase:
    """What rank 0 of a launch is doing, rewritten as it goes (LaunchSpec.phase_path): its kind ("setup",
    "compile" or "step"), in words ("timing global batch 8"), since when (this host's CLOCK_MONOTONIC),
    and how long its last step took where it steps."""

    kind: str
    doing: str
    since_s: float
    last_step_s: "float | None" = None

    def write(self, path) -> None:
        write_text(Path(path), json.dumps(asdict(self)))

    @classmethod
    def read(cls, path) -> "Phase | None":
        """The phase a launch's rank 0 last wrote, or None where it wrote none."""
        try:
            with open(path) as found:
                return cls(**json.load(found))
        except (OSError, ValueError, TypeError):
            return None


LAUNCH_ID = re.compile(r"^(\d{2,})-([a-z][a-z0-9_]*)-([a-z][a-z0-9_]*)((?:-[a-z][a-z0-9.]*)*)-ws(\d+)(?:-r(\d+))?$")


def launch_id(index: int, suite: str, preset: str, world_size: int, repeat: int = 1, variant: "tuple[str, ...]" = ()) -> str:
    """"00-collectives-default-ws2", a later repeat "...-ws2-r2": the plan entry's index, its suite, the
    transport preset and the world size, which say what the launch ran; `variant` what else tells the
    entry's launches apart (NCCL's algorithm and protocol, emulated nodes "n2", the GPUs "g0.2"):
    "03-ddp-socket-tree-n2-ws4"."""
    middle = "".join(f"-{part}" for part in variant)
    return f"{index:02d}-{suite}-{preset}{middle}-ws{world_size}" + (f"-r{repeat}" if repeat > 1 else "")


def parse_launch_id(text: str) -> "tuple[int, str, str, tuple, int, int] | None":
    """(index, suite, preset, variant, world size, repeat) of a launch id, or None where it is none."""
    found = LAUNCH_ID.match(text)
    if not found:
        return None
    index, suite, preset, variant, world_size, repeat = found.groups()
    return int(index), suite, preset, tuple(filter(None, variant.split("-"))), int(world_size), int(repeat or 1)


# Where a launch's time goes, in the order a launch passes through them: its ranks' processes
# started (torchrun's own start, or the spawn), their imports (the interpreter, torch, the agent),
# held (a run's first job: until the fingerprint's torch probes end, which its imports overlap), the
# device (CUDA context), the process group (NCCL's or gloo's init); then what the suite does:
# set-up (the model built, buffers), warm-up (and compilation, graph capture), instruments (the
# profiled and timeline steps, correctness checks), the measured calls, and whatever else (records,
# agreement between ranks); last the ranks' exit (teardown). Each is a launch record's
# `phases` key with `_s` (schema/bundle.schema.json).
LAUNCH_BEGINS = "ddpbench: launch begins: "  # + its index in the job: the job's log is cut there per launch
PHASES = ("spawn", "imports", "held", "device", "init", "build", "warmup", "instruments", "measured", "other", "teardown")
START_PHASES = ("spawn", "imports", "held", "device", "init")  # a job's start-up: paid once by the first launch of a job


@dataclass(frozen=True)
class Mark:
    """From this instant (this host's CLOCK_MONOTONIC) a launch's local rank 0 is in `phase` (PHASES);
    "end" closes the launch. Appended one JSON line each to LaunchSpec.marks_path."""

    phase: str
    at_s: float

    def append(self, path) -> None:
        with open(path, "a") as out:
            out.write(json.dumps(asdict(self)) + "\n")

    @classmethod
    def read_all(cls, path) -> "list[Mark]":
        """The marks written whole so far (a line being written has no closing brace yet)."""
        try:
            with open(path) as found:
                lines = found.read().splitlines()
        except OSError:
            return []
        marks = []
        for line in lines:
            try:
                marks.append(cls(**json.loads(line)))
            except (ValueError, TypeError):
                continue
        return marks


@dataclass(frozen=True)
class LaunchSpec:
    """What every rank of one launch runs (bench/agent/worker.py reads it). Several launches whose
    ranks would be started alike (backend, threads, cores, nodes) may run in turn in one job, the
    same processes: each has its own spec."""

    suite: str
    params: dict
    backend: str
    timeout_s: float
    result_path: str  # rank 0 appends each run record here, one JSON line each
    threads_per_rank: "int | None" = None  # CPU hosts
    cpus_of_local_ranks: "list | None" = None  # the cores each local rank is pinned to (CPU hosts)
    deadline_s: "float | None" = None  # this host's CLOCK_MONOTONIC by which the ranks stop sampling and warming up
    placement_path: "str | None" = None  # each local rank appends where it runs (bench/agent/placement.py)
    emulated_nodes: int = 1  # the nodes this host's ranks are split into, each with its own NCCL host id
    phase_path: "str | None" = None  # rank 0 says there what it is doing (Phase), for the runner to name if timeout_s passes
    marks_path: "str | None" = None  # local rank 0 appends a Mark there as the launch enters each phase
    reserve_s: float = 0.0  # without deadline_s (a launch after the first of its job): its deadline is its start + timeout_s - reserve_s
    sampling: "dict | None" = None  # the plan's precision for this launch (bench.common.sampling.Target); None: minimums only
    store_path: "str | None" = None  # one node: the file the ranks meet in (a FileStore); None: torchrun's env://
    profiled_records: "str | None" = None  # a repeat: the run records of the launch that profiled its configurations' kernels; it profiles none
    hold_path: "str | None" = None  # a run's first job: past their imports, the ranks wait for this file before any device

    def deadline_from(self, started_s: float) -> float:
        """The launch's deadline, where it starts at started_s (CLOCK_MONOTONIC)."""
        return self.deadline_s if self.deadline_s is not None else started_s + self.timeout_s - self.reserve_s

    def write(self, path) -> None:
        with open_anew(path) as out:
            json.dump(asdict(self), out)

    @classmethod
    def read(cls, path) -> "LaunchSpec":
        with open(path) as spec:
            return cls(**json.load(spec))
