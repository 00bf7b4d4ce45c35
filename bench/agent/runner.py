"""Run a plan on this host: its launches (bench/agent/planning.py), in jobs, each job one set of
torchrun processes running its launches in turn (bench/agent/launch.py), watched as they go
(bench/agent/measure.py) and kept (bench/agent/collect.py).

Launches whose ranks would start alike (Launch.job_key: one round of the plan, the same world size,
nodes, GPUs, threads and environment) share a job: the ranks' start-up (torchrun, the imports of
torch and the agent, the CUDA context, the process group and NCCL's communicators) and their exit
are paid once, not once a launch. A launch that ends its job's processes early (a rank error, a
timeout) takes only itself down: the launches after it run in a job of their own. raw.json is
written before the first launch (the fingerprint) and after every launch, so an interruption loses
at most the launch in flight.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable

from bench import __version__
from bench.agent import counters, gate, placement, proctree, switches
from bench.agent.collect import (
    kept_error, launch_record, log_parts, run_records, skipped_record, tail, transports, write_raw,
)
from bench.agent.cpu_pace import PaceSampler
from bench.agent.estimate import cpu_slowdown, estimate_launch, eta_off, gate_seconds, plan_modelled
from bench.agent.launch import HUNG, LaunchFiles, failure_cause, run_processes, timeout_cause, write_specs
from bench.agent.measure import JobMarks, OthersShare, RunsReported, ended_at, phases_s, result_lines
from bench.agent.planning import Launch, jobs, plan_launches
from bench.common import history as earlier
from bench.common import protocol
from bench.common.host import Capabilities
from bench.common.timestamps import utc_timestamp

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
    dry_run: bool = False,
    finish_fingerprint: "Callable[[], None] | None" = None,
) -> dict:
    """Run every launch of the plan; raw.json in out_dir holds the result after each one. `dry_run`: plan,
    check and price every launch (the Planned event says them), and run none, the P2P gate neither.
    `finish_fingerprint`: the fingerprint's torch probes still run (bench.agent.fingerprint.Collecting), and
    this ends them, filling `fingerprint`: before the P2P gate, or while the first job's ranks import."""
    switches.check({**os.environ, **(host_env or {})}, "the agent's environment")  # before anything runs, whatever reads them
    host = Capabilities.of(fingerprint)  # planning reads no field the torch probes fill
    launches = plan_launches(plan, host, nodes, host_env)
    runnable = [l for l in launches if not l.skipped_reason and l.id not in done_launch_ids]
    if finish_fingerprint is not None and (dry_run or not runnable or gate.gate_ranks(runnable, host, {**os.environ, **(host_env or {})}) > 1):
        finish_fingerprint()
        finish_fingerprint, host = None, Capabilities.of(fingerprint)  # the gate runs NCCL's diagnostics by its version
    measured = earlier.earlier_durations(history, fingerprint)
    slowdown = cpu_slowdown(host.logical_cpus) if host.kind == "cpu" else 1.0
    by_model = plan_modelled(runnable, host, slowdown)
    for launch in runnable:
        estimate_launch(launch, by_model[launch.id], measured.get(launch.id))
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
        sorted(l.id for l in launches if l.id in done_launch_ids), round(gate_seconds(runnable, host, slowdown, {**os.environ, **(host_env or {})}), 1), slowdown,
        {l.id: l.skipped_reason for l in launches if l.skipped_reason},
        sorted(l.id for l in runnable if l.estimate_s and l.id not in measured and by_model[l.id].host_paced),
    ))
    if dry_run:
        return _finished(out_dir, raw)
    gate.check_host(runnable, host, fingerprint, out_dir / "gate", host_env or {}, progress)
    write_raw(out_dir, raw)

    def keep(launch: Launch, record: dict, runs: "list[dict]") -> None:
        raw["launches"].append(record)
        raw["runs"].extend(runs)
        write_raw(out_dir, raw)
        progress(protocol.LaunchEnded(launch.id, record["status"], record["error"], len(runs), record["duration_s"]))
        off = eta_off(record["duration_s"], launch.estimate_s)
        if off and record["status"] == "ok":
            progress(protocol.Warned(f"{launch.id} took {record['duration_s']:.0f} s, estimated {launch.estimate_s:.0f} s: {off}"))

    job_of = {launch.id: job for job in jobs(runnable) for launch in job}
    ran: set = set()
    for launch in launches:
        if launch.id in done_launch_ids:
            progress(protocol.LaunchSkipped(launch.id, "finished in the run resumed: kept"))
        elif launch.skipped_reason:
            progress(protocol.LaunchStarted(launch.id))
            keep(launch, skipped_record(launch), [])
        elif launch.id not in ran:
            profile_once(job_of[launch.id], raw["launches"])
            run_job(job_of[launch.id], out_dir, progress, keep, finish_fingerprint)
            finish_fingerprint = None
            ran.update(l.id for l in job_of[launch.id])
    return _finished(out_dir, raw)


def profile_once(job: "list[Launch]", kept: "list[dict]") -> None:
    """A repeat leaves profiling its kernels to its configurations' first launch only where that launch ended
    ok in this run (`kept`: its launch records); otherwise (it failed, or ran in a run resumed) it profiles."""
    ok = {record["id"] for record in kept if record["status"] == "ok"}
    for launch in job:
        if launch.profiled_in not in ok:
            launch.profiled_in = ""


def _finished(out_dir: Path, raw: dict) -> dict:
    raw["complete"], raw["finished_at"] = True, utc_timestamp(microseconds=True)
    write_raw(out_dir, raw)
    return raw


def run_job(job: "list[Launch]", out_dir: Path, progress: Callable[[protocol.Event], None],
            keep: Callable[[Launch, dict, "list[dict]"], None], before_devices: "Callable[[], None] | None" = None) -> None:
    """The job's launches in its processes, each kept (keep(launch, record, runs)) as it ends; those its
    processes did not reach, when they ended early, in processes of their own again. `before_devices`: run
    while the first processes import, before they may touch a device."""
    while job:
        job, before_devices = _run_once(job, out_dir, progress, keep, before_devices), None


def run_launch(launch: Launch, out_dir: Path, progress: Callable[[protocol.Event], None] = lambda event: None) -> tuple[dict, list[dict]]:
    """One launch in processes of its own: its record and runs."""
    kept = []
    if launch.skipped_reason:
        return skipped_record(launch), []
    run_job([launch], out_dir, progress, lambda _, record, runs: kept.append((record, runs)))
    return kept[0]


def _run_once(job: "list[Launch]", out_dir: Path, progress: Callable[[protocol.Event], None],
              keep: Callable[[Launch, dict, "list[dict]"], None], before_devices: "Callable[[], None] | None" = None) -> "list[Launch]":
    """One set of processes for the job's launches (before_devices as run_job says); returns those they did not reach."""
    work = out_dir / "launches"
    work.mkdir(parents=True, exist_ok=True)
    files = [LaunchFiles.of(work, launch.id) for launch in job]
    log_path, placement_path = work / f"{job[0].id}.log", work / f"{job[0].id}.placement.jsonl"
    placement_path.unlink(missing_ok=True)
    started = time.monotonic()
    resources = write_specs(job, files, placement_path, started, held=before_devices is not None)
    marks = JobMarks([paths.marks for paths in files], started)
    ours = lambda: proctree.descendants(os.getpid())  # noqa: E731 - the job's torchrun and ranks
    shares: "list[OthersShare | None]" = [None] * len(job)
    reporters = [RunsReported(launch, paths.results, progress, started) for launch, paths in zip(job, files)]
    kept = [0, started]  # launches kept so far, and when the last of them ended

    with counters.Sampler() as sampler, PaceSampler() as pace:
        def finish(index: int, status: str, error: "str | None", job_ended_s: float) -> None:
            reporters[index].poll()  # its last configurations, written since the last poll, are said before it ends
            launch, begun = job[index], kept[1]
            launch_marks = marks.read()[index]
            last = index == len(job) - 1
            ended = max(begun, job_ended_s if last else ended_at(launch_marks, job_ended_s))
            log_text = log_path.read_text(errors="replace") if log_path.exists() else ""
            parts = log_parts(log_text, len(job))
            if status == "timeout":
                error = timeout_cause(launch.timeout_s, protocol.Phase.read(files[index].phase), launch_marks, index == 0)
            elif status == "failed":
                error = failure_cause(parts[index], error)
            transport, run_transport_of = transports(launch, "".join(parts[:index + 1]), parts[index])
            runs = run_records(launch, result_lines(files[index].results), run_transport_of, sampler.window_summary)
            share = shares[index]
            record = launch_record(
                launch, status, kept_error(status, error, launch, runs, HUNG), transport,
                duration_s=round(ended - begun, 3), phases=phases_s(launch_marks, begun, ended, index == 0, last),
                job=job[0].id, resources=resources,
                cpu_taken_by_others_fraction=share.fraction() if share is not None else None,
                log_tail=tail(parts[index]) if status != "ok" else [], gpu_counters=sampler.span_summary(begun, ended),
                cpu_pace=pace.span_summary(begun, ended),
                placement=placement.read(placement_path))
            kept[:] = [index + 1, ended]
            keep(launch, record, runs)

        def poll() -> None:
            if before_devices is not None and not files[0].hold.exists():  # the first poll: the ranks are importing
                before_devices()
                files[0].hold.touch()
            index, _ = marks.in_flight()
            while kept[0] < index:  # the launches before it ended: kept now, while the job goes on
                finish(kept[0], "ok", None, time.monotonic())
            for begun in range(index + 1):
                if shares[begun] is None:
                    progress(protocol.LaunchStarted(job[begun].id))
                    shares[begun] = OthersShare(ours)
            reporters[index].poll()

        end = run_processes(job, files, log_path, started, marks.in_flight, poll)
        while kept[0] < end.in_flight:
            finish(kept[0], "ok", None, end.ended_s)
        finish(end.in_flight, end.status, end.error, end.ended_s)
    return job[end.in_flight + 1:] if end.status != "ok" else []
