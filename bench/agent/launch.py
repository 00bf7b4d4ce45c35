"""A job's processes: the worker on every local rank (bench/agent/worker.py; over several nodes under
torchrun), running the job's launches in turn, their environment and placement, each launch's
timeout_s, and their end.

A launch's timeout_s counts from its start in the job: the first launch's from the processes' start
(their start-up is its), a later one's from the end of the launch before it.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from bench.agent import proctree, rank_errors
from bench.agent.spawn import stops_deferred
from bench.agent.fingerprint import system
from bench.agent.planning import Launch
from bench.common import protocol
from bench.common.files import open_anew
from bench.common.paths import SOURCE_ROOT
from bench.common.polling import wait_until

POLL_S = 0.1  # how often a running job's marks and results are looked at: its exit is seen at once


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


@dataclass(frozen=True)
class LaunchFiles:
    """What one launch of a job reads and writes in the run folder's launches/."""

    spec: Path  # its LaunchSpec
    results: Path  # rank 0's run records, a JSON line each
    phase: Path  # what rank 0 is doing now (protocol.Phase)
    marks: Path  # the phases it entered (protocol.Mark)
    store: Path  # where a one-node job's ranks meet (a FileStore), when it is the job's first launch
    hold: Path  # a run's first job: written when its ranks may touch a device (LaunchSpec.hold_path)

    @classmethod
    def named(cls, work: Path, launch_id: str) -> "LaunchFiles":
        """The launch's files in `work`, as they are: an earlier launch's records, say."""
        return cls(*(work / f"{launch_id}{ext}" for ext in (".json", ".jsonl", ".phase.json", ".marks.jsonl", ".store", ".hold")))

    @classmethod
    def of(cls, work: Path, launch_id: str) -> "LaunchFiles":
        """The launch's files in `work`, cleared for it."""
        files = cls.named(work, launch_id)
        # The ranks append to them, rename onto them, or (the store, the hold) would read an earlier job's.
        for path in (files.results, files.phase, files.marks, files.store, files.hold):
            path.unlink(missing_ok=True)
        return files


def write_specs(job: "list[Launch]", files: "list[LaunchFiles]", placement_path: Path, started_s: float,
                held: bool = False) -> dict:
    """Every launch's spec; returns the resources each local rank gets, for the launch records. The first
    launch's deadline counts from the job's start (started_s), the others' from their own. `held`: the
    ranks wait for the first launch's hold file before they touch a device."""
    first = job[0]
    cpus = cpus_of_local_ranks(os.sched_getaffinity(0), first.threads_per_rank, first.nproc_per_node)
    store = str(files[0].store.resolve()) if first.nodes.nnodes == 1 else None  # file:// takes an absolute path
    for launch, paths in zip(job, files):
        reserve = deadline_reserve_s(launch.timeout_s)
        target = launch.precision.target(launch.timeout_s, launch.configurations) if launch.precision else None
        protocol.LaunchSpec(launch.suite, launch.params, launch.backend, launch.timeout_s, str(paths.results),
                            launch.threads_per_rank, cpus, started_s + launch.timeout_s - reserve if launch is first else None,
                            str(placement_path), launch.emulated_nodes, str(paths.phase), str(paths.marks),
                            reserve, target.to_json() if target else None, store,
                            str(LaunchFiles.named(paths.results.parent, launch.profiled_in).results) if launch.profiled_in else None,
                            str(paths.hold) if held and launch is first else None).write(paths.spec)
    return {"threads_per_rank": first.threads_per_rank, "cpus_of_local_ranks": cpus}


def deadline_reserve_s(timeout_s: float) -> float:
    """How long before the launch's timeout_s its ranks stop sampling and warming up: the rest of
    its configurations at their least samples, and the ranks' exit, in a tenth of it (10 to 60 s)."""
    return min(60.0, max(10.0, 0.1 * timeout_s))


def cpus_of_local_ranks(allowed: "set[int]", threads_per_rank: "int | None", nproc: int) -> "list[list[int]] | None":
    """The cores each local rank is pinned to (a share of those this process may use, one core per
    thread), or None where they do not divide: then the ranks share them as the kernel schedules."""
    cores = sorted(allowed)
    if threads_per_rank is None or threads_per_rank * nproc > len(cores):
        return None
    return [cores[r * threads_per_rank:(r + 1) * threads_per_rank] for r in range(nproc)]


@dataclass(frozen=True)
class JobEnd:
    """How a job's processes ended: ok, or the launch in flight (its index in the job) failed or
    outlasted its timeout_s; `error` says why, where known here."""

    status: str  # ok, failed, timeout
    error: "str | None"
    in_flight: int  # the launch that was running when it ended (the last one where all ended)
    ended_s: float  # CLOCK_MONOTONIC when the processes were seen gone


def commands(job: "list[Launch]", files: "list[LaunchFiles]") -> "list[tuple[list[str], dict]]":
    """The job's processes, (argv, environment) each. On one node, each local rank started here, as torchrun
    --standalone would start it, without torchrun: its own start (a Python importing torch, its elastic
    agent and store) and exit came to about a third of a job's start-up. Over several nodes, torchrun,
    whose c10d rendezvous brings the nodes' ranks together."""
    first = job[0]
    worker = ["-m", "bench.agent.worker", *(str(paths.spec) for paths in files)]
    env = {**os.environ, **first.env, "PYTHONPATH": os.pathsep.join(filter(None, [str(SOURCE_ROOT), os.environ.get("PYTHONPATH")]))}
    if first.nodes.nnodes > 1:
        return [([sys.executable, "-m", "torch.distributed.run", *torchrun_placement(first.nodes),
                  f"--nproc-per-node={first.nproc_per_node}", *worker], env)]
    ranks = first.nproc_per_node
    if ranks > 1:
        env.setdefault("OMP_NUM_THREADS", "1")  # torchrun's default for several ranks a node
    # No MASTER_PORT: the ranks meet in the spec's store file, as no port picked here is sure to stay free.
    shared = {**env, "WORLD_SIZE": str(ranks), "LOCAL_WORLD_SIZE": str(ranks), "GROUP_RANK": "0", "GROUP_WORLD_SIZE": "1"}
    return [([sys.executable, "-u", *worker], {**shared, "RANK": str(rank), "LOCAL_RANK": str(rank), "ROLE_RANK": str(rank)})
            for rank in range(ranks)]


def run_processes(job: "list[Launch]", files: "list[LaunchFiles]", log_path: Path, started_s: float,
                  in_flight: Callable[[], "tuple[int, float]"], poll: Callable[[], None]) -> JobEnd:
    """The job's processes (commands), to their end, the first of them that fails, or the timeout_s of the
    launch in flight (in_flight(): its index and since when); their output goes to the job's log."""
    with open_anew(log_path) as log:
        processes: "list[subprocess.Popen]" = []
        try:
            with stops_deferred():  # a stop between two starts would hide the first from the `finally`
                for argv, env in commands(job, files):
                    processes.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True))
            while True:
                codes = [process.poll() for process in processes]
                if all(code is not None for code in codes) or any(code for code in codes):
                    break
                index, since_s = in_flight()
                if time.monotonic() - since_s > job[index].timeout_s:
                    return JobEnd("timeout", None, index, time.monotonic())  # its cause: timeout_cause
                poll()
                time.sleep(POLL_S)
            ended_s = time.monotonic()
            poll()
            index, _ = in_flight()
            failed = next(((rank, code) for rank, code in enumerate(codes) if code), None)
            if failed is None:
                return JobEnd("ok", None, index, ended_s)
            return JobEnd("failed", exit_cause(*failed, torchrun=len(processes) == 1 and job[0].nodes.nnodes > 1), index, ended_s)
        finally:
            for process in processes:
                end_process_group(process)


def exit_cause(rank: int, code: int, torchrun: bool) -> str:
    """A process's exit in words: torchrun's status, or a rank's (killed by SIGKILL: most likely out of memory)."""
    if torchrun:
        return f"torchrun exited with status {code}"
    if code == -signal.SIGKILL:
        return killed_cause()
    return f"rank {rank} was ended by signal {-code}" if code < 0 else f"rank {rank} exited with status {code}"


def end_process_group(process: subprocess.Popen) -> None:
    """A job's process (torchrun, or a rank) and every process it started: TERM, then KILL what is left.

    torchrun starts every rank in a session of its own, out of reach of its process group: they are
    looked up while torchrun lives and signalled one by one.
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


HUNG = "a rank hung or a peer died"
# A job's start-up phases (protocol.START_PHASES), what each waits for, and what may hold it there for ever.
STUCK_IN = {
    "spawn": ("torchrun's start and the ranks' `import torch`", "check the environment the hosts file and the plan give "
              "the ranks: a thread or affinity setting (OMP_*, KMP_*, GOMP_*) can hang it"),
    "imports": ("the ranks' imports of the agent and its suite",
                "check the environment the hosts file and the plan give the ranks"),
    "held": ("the fingerprint's torch probes, which the ranks wait for before a device", "check that "
             "`python -m bench.agent fingerprint` ends on the host"),
    "device": ("the ranks' devices: the CUDA context, the links woken", "check the GPUs (nvidia-smi) and CUDA_VISIBLE_DEVICES"),
    "init": ("the process group's start, which waits for every rank", "a rank did not join: check that every host "
             "reaches the first one's address (NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME)"),
}


def timeout_cause(timeout_s: float, phase: "protocol.Phase | None", marks: "list[protocol.Mark]", first_of_job: bool) -> str:
    """Why a launch outlasted the plan's timeout_s, from what its rank 0 last said it was doing: still
    compiling or setting up, in a step longer than the time it had left, or stuck (a step far longer
    than its steps take: a rank hung or a peer died, whose peers wait in a collective for ever). Where
    it said nothing, the phase its marks show it stopped in: a job's start-up never ended."""
    said = f"no result after {timeout_s:g} s (the plan's timeout_s)"
    if phase is None:
        stopped = marks[-1].phase if marks else ("spawn" if first_of_job else "other")
        if stopped in STUCK_IN:
            waits, fix = STUCK_IN[stopped]
            return f"{said}: it stopped in its {stopped} phase ({waits}) and never got past it; {fix}"
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


def failure_cause(log_text: str, exit_error: "str | None") -> "str | None":
    """Why a job's processes failed, from its log: the error a rank reported, a rank the kernel killed
    under torchrun (which says so in its log), or the processes' exit (exit_error) and the exception
    a rank left uncaught."""
    if reported := rank_errors.reported(log_text):
        return reported
    if re.search(r"exitcode\s*:\s*-9\b|Signal 9 \(SIGKILL\)", log_text):
        return killed_cause()
    exception = rank_errors.uncaught(log_text)
    return f"{exit_error}: {exception}" if exit_error and exception else exit_error or exception


def killed_cause() -> str:
    """Why a rank was killed by SIGKILL: on a host that nothing else stops, the kernel's out-of-memory
    killer, named with what the host allows."""
    limit, total = system.memory_limit(), system.memory_total_bytes()
    if limit and (not total or limit[0] < total):
        figure = f"the memory limit of cgroup {limit[1]} ({limit[0] / 2**30:.1f} GiB) allows no more"
    else:
        figure = f"this host's memory ({total / 2**30:.1f} GiB) allows no more" if total else "the host's memory is not known"
    return (f"a rank was killed by SIGKILL, most likely out of memory ({figure}); lower the entry's sizes, "
            "model or batch, or give the host more memory")
