"""Turn a plan into torchrun launches on this host, run them, and keep every result.

The plan arrives already validated against its schema, its defaults written out (by the
controller); what only this host can judge (GPU count, InfiniBand, and each suite's own checks,
beside the suite: memory, batch divisibility) is checked here, before anything is launched.
raw.json is written before the first launch (the fingerprint) and after every launch, so an
interruption loses at most the launch in flight.
"""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from bench import __version__, suites
from bench.agent import counters, gate, placement, proctree, rank_errors
from bench.agent.fingerprint import system
from bench.common import algorithms, history as earlier
from bench.common import fits, protocol
from bench.common.nccl_log import tuning_choices
from bench.common.selection import Side, gpu_sets, side_of, variant
from bench.common.files import open_anew, write_text
from bench.common.host import Capabilities
from bench.common.paths import SOURCE_ROOT
from bench.common.polling import wait_until
from bench.common.timestamps import utc_timestamp
from bench.common.run import Run
from bench.common.transports import BASE_NCCL_ENV, PRESETS, Nodes, backend_for, mismatch, run_transport, transport_record
from bench.common.cost import LAUNCH_START_S
from bench.common.sampling import TYPICAL_CV, Precision, expected_sampling_s
from bench.suites.params import PlanError

LOG_TAIL_LINES = 20
POLL_S = 0.5  # how often a running launch's results are looked at, for progress
ETA_OFF_FACTOR = 2.0  # a launch this much longer or shorter than its estimate is said in the log
# A configuration sampling to a cv_target (a plan's, below its samples' CV) measures about this
# many times over past its first batch: verify of quick on a 2-core CPU took 2 min 45 s where the
# model without sampling said 1 min 01 s. Never more than its sampling_cap_s a configuration.
SAMPLING_ROUNDS = 3


def torchrun_placement(nodes: protocol.Placement) -> list[str]:
    """torchrun's options for where this agent sits: standalone on one node, else c10d's rendezvous."""
    if nodes.nnodes == 1:
        return ["--standalone", "--nnodes=1"]
    return [
        f"--nnodes={nodes.nnodes}",
        f"--node-rank={nodes.node_rank}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint={nodes.rendezvous}",
        f"--rdzv-id={nodes.job_id}",
        # Node rank 0 hosts the rendezvous store; guessing it from the address picks every
        # node when they share a machine or the address is an alias.
        f"--rdzv-conf=is_host={'true' if nodes.node_rank == 0 else 'false'}",
    ]


@dataclass
class Launch:
    id: str
    suite: str
    preset: str
    backend: str
    nproc_per_node: int
    nodes: protocol.Placement
    params: dict
    timeout_s: float
    skipped_reason: str = ""
    env: dict = field(default_factory=dict)
    estimate_s: float = 0.0  # seconds, set by run_plan: an earlier run here (bench.common.history), else the cost model
    configurations: int = 0  # runs it will record, set by run_plan with estimate_s
    threads_per_rank: "int | None" = None  # CPU hosts: the same for every launch of the plan
    repeat: int = 1  # which of the entry's launch_repeats this is
    p2p_off_by_gate: bool = False  # the P2P gate found P2P wrong here and set NCCL_P2P_DISABLE=1 (gate.reroute)
    algorithm: str = algorithms.DEFAULT  # NCCL's algorithm asked for the entry's collectives
    protocol: str = algorithms.DEFAULT
    emulated_nodes: int = 1  # this host's ranks split into this many nodes, each with its own NCCL host id
    gpus: "tuple | None" = None  # the GPUs the ranks use (nvidia-smi index), where the entry names them
    entry_env: dict = field(default_factory=dict)  # the plan entry's own env: part of its runs' identity
    precision: "Precision | None" = None  # the plan's: what its runs sample toward, within what budget

    @property
    def world_size(self) -> int:
        return self.nproc_per_node * self.nodes.nnodes

    @property
    def topology(self) -> Nodes:
        """Its nodes: the hosts of its job, each split into its emulated nodes."""
        count = self.nodes.nnodes * self.emulated_nodes
        return Nodes(count, self.world_size // count, self.emulated_nodes > 1)


def _threads_per_rank(plan: dict, hw: Capabilities) -> int:
    """On the CPU every rank of the plan gets the threads (and cores) the largest world size leaves
    each rank: a 1-rank baseline with all the cores would compare unlike resources."""
    largest = max((max(fits.world_sizes(e["world_sizes"], hw)) for e in plan["suites"]), default=1)
    return max(1, hw.logical_cpus // largest)


def plan_launches(plan: dict, hw: Capabilities, nodes: protocol.Placement = protocol.Placement(), host_env: "dict | None" = None) -> list[Launch]:
    """Every launch the plan asks of this host, or a PlanError naming the first problem. In a job of
    several nodes, the launches of the first node alone (span: first_node) come last: the other nodes
    have ended by then, rather than wait at the next launch's rendezvous while its timeout runs."""
    planner = _Planner(hw, nodes, host_env or {}, plan["timeout_s"], _threads_per_rank(plan, hw), Precision.of(plan))
    launches = [launch for index, entry in enumerate(plan["suites"]) for launch in planner.entry_launches(index, entry)]
    return sorted(launches, key=lambda launch: launch.nodes.nnodes < nodes.nnodes)


@dataclass
class _Planner:
    """What planning one entry needs from the plan and the host, and the configurations planned so far."""

    hw: Capabilities
    nodes: protocol.Placement
    host_env: dict
    timeout_s: float
    threads_per_rank: int  # on the CPU
    precision: "Precision | None" = None
    first_of: dict = field(default_factory=dict)  # configuration -> the launch that runs it

    @property
    def cuda(self) -> bool:
        return self.hw.cuda

    def entry_launches(self, index: int, entry: dict) -> list[Launch]:
        """The entry's launches, a transport preset, world size, GPU selection, algorithm and protocol
        each, checked before any is run."""
        side = side_of(entry, self.cuda)
        suite = suites.get(entry["suite"], f"the plan's suites[{index}]")
        typed = suite.params(side.params)
        found = (fits.side_problem(side, entry["world_sizes"], self.hw, {**entry.get("env", {}), **self.host_env})
                 or algorithms.env_problem(entry.get("env", {}), side.algorithms, side.protocols))
        if found:
            raise PlanError(f"{entry['suite']}: {found}")
        worlds = [2] if side.pairs else fits.world_sizes(entry["world_sizes"], self.hw, side.gpus)
        nnodes = self._placement(side).nnodes
        launches = []
        for preset_name in side.transports:
            for per_node in worlds:
                self._check_nodes(entry, side, per_node)
                for gpus in gpu_sets(side, self.hw.gpu_count, per_node):
                    for algorithm in side.algorithms:
                        for protocol_name in side.protocols:
                            self._check_algorithm(suite, typed, side, per_node, algorithm, protocol_name)
                            suite.check_plan(typed, self.hw, world_size=per_node * nnodes, transport=preset_name,
                                             nodes=nnodes * side.nodes)
                            launches.append(self._launch(index, entry, side, preset_name, per_node, gpus, algorithm, protocol_name))
        # The entry's launches in turn, not each one k times over: a machine that drifts
        # with time then shows it as spread between repeats, not as a difference between launches.
        again = [launch for launch in launches if not launch.skipped_reason]
        return launches + [replace(launch, id=_launch_id(index, launch, repeat), repeat=repeat)
                           for repeat in range(2, side.launch_repeats + 1) for launch in again]

    def _placement(self, side: Side) -> protocol.Placement:
        """Where the entry's launches sit: this host's place in its job, or one node alone (span: first_node)."""
        return self.nodes if side.job_nodes(self.nodes.nnodes) == self.nodes.nnodes else protocol.Placement()

    def _check_nodes(self, entry: dict, side: Side, per_node: int) -> None:
        if side.pairs and entry["world_sizes"] != [2]:
            raise PlanError(f"{entry['suite']}: pairs: all runs two ranks a pair, and the entry asks world sizes "
                            f"{entry['world_sizes']}; set world_sizes: [2]")
        if per_node % side.nodes and per_node in entry["world_sizes"]:
            raise PlanError(f"{entry['suite']}: nodes: {side.nodes} splits each launch's ranks into {side.nodes} nodes, and world "
                            f"size {per_node} does not divide; use world sizes that are multiples of {side.nodes}")

    def _check_algorithm(self, suite, typed, side: Side, per_node: int, algorithm: str, protocol_name: str) -> None:
        """NCCL's algorithm and protocol asked (over NCCL: fits.nccl_axes_problem), for collectives that have them, on
        an NCCL that takes them one collective at a time."""
        if (algorithm, protocol_name) == (algorithms.DEFAULT, algorithms.DEFAULT):
            return
        found = (algorithms.version_problem(self.hw.nccl_version)
                 or algorithms.problem(suite.nccl_collectives(typed), algorithm, protocol_name,
                                       ranks_per_node=max(1, per_node // side.nodes)))
        if found:
            raise PlanError(f"{suite.name}: {found}")

    def _launch(self, index: int, entry: dict, side: Side, preset_name: str, per_node: int, gpus: "tuple | None",
                algorithm: str, protocol_name: str) -> Launch:
        nodes = self._placement(side)
        suite, world_size = entry["suite"], per_node * nodes.nnodes
        backend = backend_for(preset_name, self.cuda)
        first = (side.transports[0], side.algorithms[0], side.protocols[0])
        skipped = ""
        if nodes.nnodes < self.nodes.nnodes and self.nodes.node_rank != 0:
            skipped = f"span: {side.span} runs it on the job's first node alone"
        elif self.cuda and per_node > self.hw.gpu_count:
            skipped = f"needs {per_node} GPUs per node, this host has {self.hw.gpu_count}"
        elif gpus is not None and len(gpus) < per_node:
            skipped = f"needs {per_node} GPUs per node, the entry's gpus names {len(gpus)}"
        elif world_size == 1 and preset_name != first[0]:
            skipped = f"one rank uses no link: its run is the one under {first[0]!r}"
        elif world_size == 1 and (algorithm, protocol_name) != first[1:]:
            skipped = f"one rank runs no collective over a link: its run is the one under algorithm {first[1]!r}, protocol {first[2]!r}"
        elif world_size == 1 and 1 not in entry["world_sizes"] and suites.get(suite).needs_two_ranks:
            skipped = (f"world size all is one {'GPU' if self.cuda else 'process'} on this host, and {suite} over one rank "
                       "crosses no link (busbw is 0 by definition); give world_sizes: [1] to run it anyway")
        elif per_node % side.nodes:
            skipped = f"world size all is {per_node} here, which {side.nodes} nodes do not divide"
        if world_size == 1 and not skipped:  # one rank runs no collective over a link: nothing to ask of NCCL
            algorithm = protocol_name = algorithms.DEFAULT
        typed = suites.get(suite).params(side.params)
        functions = [function for _, function in suites.get(suite).nccl_collectives(typed) if function]
        entry_env = dict(entry.get("env", {}))
        env = {**(BASE_NCCL_ENV if backend == "nccl" else {}), **PRESETS[preset_name].env_for(nodes.nnodes * side.nodes),
               **(algorithms.env_for(functions, algorithm, protocol_name) if backend == "nccl" else {}), **entry_env,
               # nvidia-smi's order, which gpus: and the fingerprint's topology name
               **({"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": ",".join(map(str, gpus))} if gpus is not None else {}),
               **self.host_env}
        if not self.cuda:
            env.setdefault("OMP_NUM_THREADS", str(self.threads_per_rank))
        # Overrides may map two entries onto one configuration (the CPU's tiny model for
        # gpt2 and gpt2-large): it runs once, or its baseline would be counted twice.
        configuration = json.dumps([suite, preset_name, per_node, nodes.nnodes, side.nodes, side.params, env], sort_keys=True)
        if not skipped and configuration in self.first_of:
            skipped = f"the same configuration as launch {self.first_of[configuration]}, which runs it once"
        launch = Launch(
            id="", suite=suite, preset=preset_name, backend=backend, nproc_per_node=per_node, nodes=nodes,
            params=side.params, timeout_s=self.timeout_s, skipped_reason=skipped, env=env,
            threads_per_rank=None if self.cuda else int(env["OMP_NUM_THREADS"]),
            algorithm=algorithm, protocol=protocol_name, emulated_nodes=side.nodes, gpus=gpus, entry_env=entry_env,
            precision=self.precision,
        )
        launch.id = _launch_id(index, launch)
        self.first_of.setdefault(configuration, launch.id)
        return launch


def _launch_id(index: int, launch: Launch, repeat: int = 1) -> str:
    return protocol.launch_id(index, launch.suite, launch.preset, launch.world_size, repeat,
                              variant(launch.algorithm, launch.protocol, launch.emulated_nodes, launch.gpus))


def _tail(path: Path, lines: int = LOG_TAIL_LINES) -> list[str]:
    if not path.exists():
        return []
    return path.read_text(errors="replace").splitlines()[-lines:]


def _machine_busy_s() -> "float | None":
    """CPU-seconds the whole machine has been busy (all cores, every process), from /proc/stat."""
    try:
        with open("/proc/stat") as stat:
            fields = [int(x) for x in stat.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _own_cpu_s() -> float:
    """CPU-seconds of this process and the children it has waited for (torchrun and its ranks)."""
    return sum(getattr(resource.getrusage(who), f) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
               for f in ("ru_utime", "ru_stime"))


class OthersShare:
    """The share of the machine's CPU that other processes took while a launch ran: a rerun on a
    machine others were using measures them too, whatever its samples' spread says."""

    def __init__(self):
        self.wall, self.busy, self.own = time.monotonic(), _machine_busy_s(), _own_cpu_s()

    def fraction(self) -> "float | None":
        wall, busy = time.monotonic() - self.wall, _machine_busy_s()
        if self.busy is None or busy is None or wall <= 0:
            return None
        others = (busy - self.busy) - (_own_cpu_s() - self.own)
        return round(min(1.0, max(0.0, others / (wall * (os.cpu_count() or 1)))), 4)


def cpus_of_local_ranks(allowed: "set[int]", threads_per_rank: "int | None", nproc: int) -> "list[list[int]] | None":
    """The cores each local rank is pinned to (a share of those this process may use, one core per
    thread), or None where they do not divide: then the ranks share them as the kernel schedules."""
    cores = sorted(allowed)
    if threads_per_rank is None or threads_per_rank * nproc > len(cores):
        return None
    return [cores[r * threads_per_rank:(r + 1) * threads_per_rank] for r in range(nproc)]


def run_launch(launch: Launch, out_dir: Path, progress: Callable[[protocol.Event], None] = lambda event: None) -> tuple[dict, list[dict]]:
    """Run one torchrun job; return its launch record and the run records it produced. Each
    configuration the ranks finish is reported as a RunEnded event while the launch runs."""
    started = time.time()
    summary = {"id": launch.id, "suite": launch.suite, "preset": launch.preset, "world_size": launch.world_size, "nodes": launch.nodes.nnodes,
               **({"gpus": list(launch.gpus)} if launch.gpus is not None else {})}
    if launch.skipped_reason:
        return {**summary, "status": "skipped", "error": launch.skipped_reason, "duration_s": 0.0, "log_tail": []}, []
    work = out_dir / "launches"
    work.mkdir(parents=True, exist_ok=True)
    spec_path, result_path, log_path, placement_path, phase_path = (
        work / f"{launch.id}{ext}" for ext in (".json", ".jsonl", ".log", ".placement.jsonl", ".phase.json"))
    for path in (result_path, placement_path, phase_path):  # the ranks append to them, or rename onto them
        path.unlink(missing_ok=True)
    summary["resources"] = _write_spec(launch, spec_path, result_path, placement_path, phase_path)
    others = OthersShare()
    reported = 0

    def report_new_runs() -> None:
        nonlocal reported
        for line in _result_lines(result_path)[reported:]:
            reported += 1
            progress(protocol.RunEnded(launch.id, reported, max(launch.configurations, reported),
                                       suites.get(launch.suite).progress_label(json.loads(line), launch.backend),
                                       round(time.time() - started, 1)))

    with counters.Sampler() as sampler:
        status, error = _run_torchrun(launch, spec_path, log_path, started, report_new_runs)
    if status == "timeout":
        error = timeout_cause(launch.timeout_s, protocol.Phase.read(phase_path))
    log_text = log_path.read_text(errors="replace")
    if status == "failed":
        error = rank_errors.reported(log_text) or _killed(log_text) or error
    transport, run_transports = _transports(launch, log_text)
    runs = [{**run, "transport": run_transports(run), "launch_id": launch.id, "repeat": launch.repeat,
             "gpu_counters": sampler.window_summary(run.get("measured_window")),
             **({"env": launch.entry_env} if launch.entry_env else {}), **({"gpus": list(launch.gpus)} if launch.gpus is not None else {})}
            for run in map(json.loads, _result_lines(result_path))]
    if status == "timeout" and runs:
        kept = f"{len(runs)} of {max(launch.configurations, len(runs))} configurations finished and are kept"
        error += (f", or the launch needed longer; {kept}: if none hung, raise timeout_s or trim the entry (sizes, steps, batches)"
                  if error.endswith(HUNG) else f"; {kept}")
    if status == "ok" and not transport["matches_preset"]:
        error = mismatch(transport)
    record = {
        **summary, "status": status, "error": error, "duration_s": round(time.time() - started, 3),
        "cpu_taken_by_others_fraction": others.fraction(),
        "transport": transport, "log_tail": _tail(log_path) if status != "ok" else [],
        "gpu_counters": sampler.summary(), "placement": placement.read(placement_path),
    }
    return record, runs


def _transports(launch: Launch, log_text: str) -> tuple[dict, Callable[[dict], dict]]:
    """The launch's transport record, and each run's: the launch's, with what NCCL's TUNING lines say it
    ran for the run's own collectives (for the launch: every collective of the entry)."""
    transport = transport_record(launch.preset, launch.backend, launch.world_size, log_text, launch.topology,
                                 launch.algorithm, launch.protocol)
    if launch.p2p_off_by_gate:
        transport = {**transport, "env": {**transport["env"], "NCCL_P2P_DISABLE": "1"}, "p2p_off_by_gate": True}
    # NCCL logs its TUNING lines on global rank 0 only: another node of a job has nothing to judge by
    suite, choices = suites.get(launch.suite), tuning_choices(log_text) if launch.nodes.node_rank == 0 else None
    functions = [(function, None) for _, function in suite.nccl_collectives(suite.params(launch.params)) if function]
    return (run_transport(transport, choices, functions, launch.world_size),
            lambda run: run_transport(transport, choices, suite.nccl_calls(Run(run)), launch.world_size))


HUNG = "a rank hung or a peer died"


def timeout_cause(timeout_s: float, phase: "protocol.Phase | None") -> str:
    """Why a launch outlasted the plan's timeout_s, from what its rank 0 last said it was doing: still
    compiling or setting up, in a step longer than the time it had left, or stuck (a step far longer
    than its steps take: a rank hung or a peer died, whose peers wait in a collective for ever)."""
    said = f"no result after {timeout_s:g} s (the plan's timeout_s)"
    if phase is None:
        return f"{said}: {HUNG}"
    elapsed = time.monotonic() - phase.since_s
    last = phase.last_step_s
    if phase.kind == "compile":
        return (f"{said}: still {phase.doing} after {elapsed:.0f} s; compiling took longer here than its estimate: "
                "raise timeout_s, or set compile: false")
    if phase.kind == "setup":
        return f"{said}: still {phase.doing} after {elapsed:.0f} s; raise timeout_s, or choose a smaller model"
    if last is None:
        return (f"{said}: {phase.doing} had run {elapsed:.0f} s and not ended, a step longer than the launch had left; "
                "raise timeout_s, or lower micro_batch, seq_len or the global batches")
    if elapsed > 3 * last + 5:  # far longer than its steps take: waiting for a peer that will not come
        return f"{said}: {HUNG}"
    return (f"{said}: {phase.doing}, one step of about {max(elapsed, last):.3g} s (the one before took {last:.3g} s) did not "
            "end in the time the launch had left; raise timeout_s, or trim the entry (fewer steps, smaller batches)")


def _killed(log_text: str) -> "str | None":
    """Why torchrun failed where a rank was killed by SIGKILL: on a host that nothing else stops, the
    kernel's out-of-memory killer, named with what the host allows."""
    if not re.search(r"exitcode\s*:\s*-9\b|Signal 9 \(SIGKILL\)", log_text):
        return None
    limit, total = system.memory_limit(), system.memory_total_bytes()
    if limit and (not total or limit[0] < total):
        figure = f"the memory limit of cgroup {limit[1]} ({limit[0] / 2**30:.1f} GiB) allows no more"
    else:
        figure = f"this host's memory ({total / 2**30:.1f} GiB) allows no more" if total else "the host's memory is not known"
    return (f"a rank was killed by SIGKILL, most likely out of memory ({figure}); lower the entry's sizes, "
            "model or batch, or give the host more memory")


def _result_lines(result_path: Path) -> list[str]:
    """The run records the ranks have written whole so far (a line being written has no closing brace yet)."""
    return [line for line in (result_path.read_text().splitlines() if result_path.exists() else []) if line.endswith("}")]


def _write_spec(launch: Launch, spec_path: Path, result_path: Path, placement_path: Path, phase_path: Path) -> dict:
    """The worker's instructions; returns the resources each local rank gets, for the launch record."""
    cpus = cpus_of_local_ranks(os.sched_getaffinity(0), launch.threads_per_rank, launch.nproc_per_node)
    deadline_s = time.monotonic() + launch.timeout_s - deadline_reserve_s(launch.timeout_s)
    target = launch.precision.target(launch.timeout_s, launch.configurations) if launch.precision else None
    protocol.LaunchSpec(launch.suite, launch.params, launch.backend, launch.timeout_s, str(result_path),
                        launch.threads_per_rank, cpus, deadline_s, str(placement_path), launch.emulated_nodes,
                        str(phase_path), target.to_json() if target else None).write(spec_path)
    return {"threads_per_rank": launch.threads_per_rank, "cpus_of_local_ranks": cpus}


def deadline_reserve_s(timeout_s: float) -> float:
    """How long before the launch's timeout_s its ranks stop sampling and warming up: the rest of
    its configurations at their least samples, and the ranks' exit, in a tenth of it (10 to 60 s)."""
    return min(60.0, max(10.0, 0.1 * timeout_s))


def _run_torchrun(launch: Launch, spec_path: Path, log_path: Path, started: float, poll: Callable[[], None]) -> tuple[str, "str | None"]:
    """torchrun with the worker on every local rank, to its end or the plan's timeout_s; its
    output goes to the launch's log. Returns the launch's status and error."""
    command = [
        sys.executable, "-m", "torch.distributed.run", *torchrun_placement(launch.nodes),
        f"--nproc-per-node={launch.nproc_per_node}", "-m", "bench.agent.worker", str(spec_path),
    ]
    env = {**os.environ, **launch.env, "PYTHONPATH": os.pathsep.join(filter(None, [str(SOURCE_ROOT), os.environ.get("PYTHONPATH")]))}
    with open_anew(log_path) as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            while process.poll() is None:
                if time.time() - started > launch.timeout_s:
                    raise subprocess.TimeoutExpired(command, launch.timeout_s)
                poll()
                time.sleep(POLL_S)
            poll()
            if process.returncode != 0:
                return "failed", f"torchrun exited with status {process.returncode}"
        except subprocess.TimeoutExpired:
            return "timeout", None  # its cause: timeout_cause
        finally:
            _end_process_group(process)
    return "ok", None


def _end_process_group(process: subprocess.Popen) -> None:
    """torchrun and every rank it started: TERM, then KILL what is left.

    The ranks sit in sessions of their own (torchrun's doing), out of reach of its process
    group: they are looked up while torchrun lives and signalled one by one.
    """
    ranks = proctree.descendants(process.pid)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            pass
        for rank in ranks:
            rank.signal(sig)
        if wait_until(lambda: process.poll() is not None and not any(rank.alive() for rank in ranks), within_s=5):
            return


def run_plan(
    plan: dict,
    out_dir: Path,
    fingerprint: dict,
    *,
    nodes: protocol.Placement = protocol.Placement(),
    host_env: "dict | None" = None,
    done_launch_ids: frozenset = frozenset(),
    progress: Callable[[protocol.Event], None] = lambda event: None,
    history: "dict | None" = None,
) -> dict:
    """Run every launch of the plan; raw.json in out_dir holds the result after each one."""
    host = Capabilities.of(fingerprint)
    launches = plan_launches(plan, host, nodes, host_env)
    measured = earlier.earlier_durations(history, fingerprint)
    for launch in launches:
        if launch.skipped_reason or launch.id in done_launch_ids:
            continue
        estimate_launch(launch, host, measured.get(launch.id))
    raw = {
        "agent_version": __version__, "started_at": utc_timestamp(microseconds=True), "finished_at": None, "complete": False,
        "fingerprint": fingerprint, "launches": [], "runs": [],
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    write_raw(out_dir, raw)
    progress(protocol.Planned(
        [l.id for l in launches], {l.id: l.estimate_s for l in launches if l.estimate_s},
        {l.id: l.configurations for l in launches if l.estimate_s},
        sorted(l.id for l in launches if l.estimate_s and l.id in measured),
        sorted(l.id for l in launches if l.id in done_launch_ids),
    ))
    gate.check_host([l for l in launches if not l.skipped_reason and l.id not in done_launch_ids], host, fingerprint,
                    out_dir / "gate", host_env or {}, progress)
    write_raw(out_dir, raw)
    for launch in launches:
        if launch.id in done_launch_ids:
            progress(protocol.LaunchSkipped(launch.id, "finished in the run resumed: kept"))
            continue
        progress(protocol.LaunchStarted(launch.id))
        record, runs = run_launch(launch, out_dir, progress)
        raw["launches"].append(record)
        raw["runs"].extend(runs)
        write_raw(out_dir, raw)
        progress(protocol.LaunchEnded(launch.id, record["status"], record["error"], len(runs), record["duration_s"]))
        off = eta_off(record["duration_s"], launch.estimate_s)
        if off and record["status"] == "ok":
            progress(protocol.Warned(f"{launch.id} took {record['duration_s']:.0f} s, estimated {launch.estimate_s:.0f} s: {off}"))
    raw["complete"], raw["finished_at"] = True, utc_timestamp(microseconds=True)
    write_raw(out_dir, raw)
    return raw


def modelled(launch: Launch, host: Capabilities) -> tuple[float, float, int]:
    """(seconds, of them sampling past the minimums, configurations) of a launch by its suite's cost
    model, start-up included: toward cv_target, and toward the plan's precision target (as its runs
    scaled against a baseline aim, the tighter; each run's expected samples at a typical spread)."""
    suite = suites.get(launch.suite)
    params = suite.params(launch.params)
    measuring = suite.launch_seconds(params, launch.preset, launch.world_size, host)
    configurations = suite.configurations(params, launch.world_size, host)
    sampling = 0.0 if params.cv_target is None else min(SAMPLING_ROUNDS * measuring, configurations * params.sampling_cap_s)
    if launch.precision is not None:
        target = launch.precision.target(launch.timeout_s, configurations)
        least = params.minimum_samples
        # What the minimum's samples cost, every other cost of the launch apart: the launch with twice as many, less it.
        timed = suite.launch_seconds(params.with_minimum_samples(2 * least), launch.preset, launch.world_size, host) - measuring
        sampling += configurations * expected_sampling_s(
            target.scaled_halfwidth_fraction, least, timed / max(configurations, 1), min(target.budget_s, params.sampling_cap_s),
            TYPICAL_CV[host.kind])
    return LAUNCH_START_S[host.kind] + measuring + sampling, sampling, configurations


def estimate_launch(launch: Launch, host: Capabilities, measured_s: "float | None" = None) -> None:
    """Set the launch's estimate (an earlier run's duration here, else the cost model) and its
    configuration count; a launch whose least time is estimated past the plan's timeout_s is a
    PlanError (sampling toward cv_target stops at the launch's deadline: it never makes one too long)."""
    seconds, sampling, launch.configurations = modelled(launch, host)
    launch.estimate_s = round(measured_s or seconds, 1)
    if (measured_s or seconds - sampling) > launch.timeout_s:
        raise PlanError(
            f"launch {launch.id} is estimated at {launch.estimate_s:.0f} s on this host, longer than the plan's "
            f"timeout_s {launch.timeout_s:g}: raise timeout_s, or trim the entry (fewer sizes, transports, steps or batches)"
        )


def eta_off(duration_s: float, estimate_s: float) -> str:
    """What to say when a launch's estimate was off by more than ETA_OFF_FACTOR either way."""
    if not estimate_s or not duration_s:
        return ""
    if duration_s > ETA_OFF_FACTOR * estimate_s:
        return f"more than {ETA_OFF_FACTOR:g}x the estimate; the ETA was too short"
    if duration_s * ETA_OFF_FACTOR < estimate_s:
        return f"less than 1/{ETA_OFF_FACTOR:g} of the estimate; the ETA was too long"
    return ""


def write_raw(out_dir: Path, raw: dict) -> None:
    write_text(out_dir / "raw.json", json.dumps(raw, indent=1))
