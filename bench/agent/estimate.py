"""How long a launch should take here: an earlier run's duration on this machine (bench.common.history),
else its suite's cost model, its own fixed cost, and where it starts or ends its job, the job's start-up
or exit (bench.common.cost: measured figures), on a CPU host stretched by the share of the cores other
processes take now; the P2P gate before them; and what to say when a launch took far longer or shorter
than its estimate. The ETA that `ddpbench run` shows counts down these estimates."""

from __future__ import annotations

import os
from dataclasses import dataclass

from bench import suites
from bench.agent import gate
from bench.agent.planning import Launch, jobs
from bench.common import cost
from bench.common.host import Capabilities
from bench.common.sampling import expected_sampling_s
from bench.errors import PlanError

ETA_OFF_FACTOR = 2.0  # a launch this much longer or shorter than its estimate is said in the log ...
ETA_OFF_LEAST_S = 5.0  # ... where it is off by more than these seconds: a few seconds move no ETA a reader watches
# A configuration sampling to a cv_target (a plan's, below its samples' CV) measures about this
# many times over past its first batch: verify of quick on a 2-core CPU took 2 min 45 s where the
# model without sampling said 1 min 01 s. Never more than its sampling_cap_s a configuration.
SAMPLING_ROUNDS = 3


@dataclass(frozen=True)
class Modelled:
    """A launch by the cost model: its seconds in all, of them its fixed costs (its own, and its job's
    start-up and exit where it starts or ends one), its timed calls or steps, and sampling toward
    cv_target and the plan's precision; the configurations it records; the least it takes, with no sampling on an idle host;
    and whether the host's CPU is expected to pace its steps (its suite's host_paced)."""

    seconds: float
    fixed_s: float
    measured_s: float
    sampling_s: float
    configurations: int
    least_s: float
    host_paced: bool = False


def modelled(launch: Launch, host: Capabilities, first_of_job: bool = True, last_of_job: bool = True,
             slowdown: float = 1.0) -> Modelled:
    """A launch by its suite's cost model, with the fixed costs of its place in its job; on a CPU host
    stretched by `slowdown` (cpu_slowdown) in the share of the cores its ranks use: a launch that leaves
    cores to the other processes competes less with them."""
    suite = suites.get(launch.suite)
    params = suite.params({**launch.params, "profile_steps": 0} if launch.profiled_in else launch.params)
    measuring = suite.launch_seconds(params, launch.preset, launch.world_size, host)
    configurations = suite.configurations(params, launch.world_size, host)
    sampling = 0.0 if params.cv_target is None else min(SAMPLING_ROUNDS * measuring, configurations * params.sampling_cap_s)
    if launch.precision is not None:
        # Toward the plan's precision target, as its runs scaled against a baseline aim (the tighter), each
        # run's expected samples at a typical spread. What the minimum's samples cost, every other cost of the
        # launch apart: the launch with twice as many, less it.
        target = launch.precision.target(launch.timeout_s, configurations)
        least = params.minimum_samples
        timed = suite.launch_seconds(params.with_minimum_samples(2 * least), launch.preset, launch.world_size, host) - measuring
        samples = suite.expected_samples(params, launch.preset, launch.world_size, host, target.scaled_halfwidth_fraction)
        sampling += configurations * expected_sampling_s(samples, least, timed / max(configurations, 1),
                                                         min(target.budget_s, params.sampling_cap_s))
    fixed = (cost.launch_own_s(host.kind) + (cost.job_start_s(host.kind) if first_of_job else 0.0)
             + (cost.job_end_s(host.kind) if last_of_job else 0.0))
    scale = stretch(host, slowdown, launch.nproc_per_node * (launch.threads_per_rank or 1))
    measured = suite.measured_seconds(params, launch.preset, launch.world_size, host)
    return Modelled(scale * (fixed + measuring + sampling), scale * fixed, scale * (measured + sampling), scale * sampling, configurations,
                    fixed + measuring, suite.host_paced(params, launch.preset, launch.world_size, host))


def plan_modelled(launches: "list[Launch]", host: Capabilities, slowdown: float = 1.0) -> "dict[str, Modelled]":
    """Each launch to run (not skipped) by the cost model, in the jobs it will run in."""
    return {launch.id: modelled(launch, host, index == 0, index == len(job) - 1, slowdown)
            for job in jobs([l for l in launches if not l.skipped_reason]) for index, launch in enumerate(job)}


def plan_seconds(launches: "list[Launch]", host: Capabilities, slowdown: float = 1.0) -> "tuple[float, float]":
    """These launches (those to run) by the cost model, and the P2P gate before them: the estimate a host's
    agent announces for them where no earlier run here measured them; and of it, the launches whose steps
    the cost model expects the host's CPU to pace."""
    by_model = plan_modelled(launches, host, slowdown).values()
    return (sum(m.seconds for m in by_model) + gate_seconds(launches, host, slowdown),
            sum(m.seconds for m in by_model if m.host_paced))


def gate_seconds(launches: "list[Launch]", host: Capabilities, slowdown: float = 1.0, env: "dict | None" = None) -> float:
    """The P2P gate before the first of these launches (bench/agent/gate.py), its ranks' environment
    `env`: its arms (NCCL's diagnostics' counted as a full one: it starts as many processes), or
    nothing where it has nothing to check."""
    ranks = gate.ranks_to_check(host, launches, env)
    if ranks < 2:
        return 0.0
    arms = len(gate.ARMS) + (gate.diagnostics_not_run(host.cuda, host.nccl_version) is None) if host.cuda else 1
    return arms * cost.gate_arm_s(host.kind) * stretch(host, slowdown, ranks)


def stretch(host: Capabilities, slowdown: float, threads: int) -> float:
    """How much longer than on an idle machine work of `threads` busy threads takes on a host `slowdown`
    times slower (cpu_slowdown) for work on every core; 1 on a GPU host."""
    if host.kind != "cpu":
        return 1.0
    cores = max(1, host.logical_cpus)
    return max(1.0, slowdown * min(cores, threads) / cores)


def cpu_slowdown(cores: int) -> float:
    """How many times longer than on an idle machine work that keeps every core busy takes here now: the
    threads that wanted a core over the last minute (the 1-minute load average) over the cores, each
    getting that share of one; at least 1. A CPU host's estimates are stretched by it (stretch). It holds
    while the load does: on the shared 2-core development machine, whose load swung between 4 and 10
    within a minute, runs of quick and scaling took from 0.6 to 1.7 times their estimate, where the
    cost model at the slowdown each run met came within 15% (benchmarks/results/launch_time_cpu2.md)."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        return 1.0
    return slowdown_at(load, cores)


def slowdown_at(load: float, cores: int) -> float:
    """cpu_slowdown at a 1-minute load average of `load` on `cores` cores, rounded as the agent says it."""
    return round(max(1.0, load / max(1, cores)), 2)


def estimate_launch(launch: Launch, by_model: Modelled, measured_s: "float | None" = None) -> None:
    """Set the launch's estimate (an earlier run's duration here, else the cost model's) and its
    configuration count; a launch whose least time is estimated past the plan's timeout_s is a
    PlanError (sampling toward cv_target stops at the launch's deadline: it never makes one too long;
    a CPU host busy now makes it longer, no plan error)."""
    launch.configurations = by_model.configurations
    launch.estimate_s = round(measured_s or by_model.seconds, 1)
    if (measured_s or by_model.least_s) > launch.timeout_s:
        raise PlanError(
            f"launch {launch.id} is estimated at {launch.estimate_s:.0f} s on this host, longer than the plan's "
            f"timeout_s {launch.timeout_s:g}: raise timeout_s, or trim the entry (fewer sizes, transports, steps or batches)"
        )


def eta_off(duration_s: float, estimate_s: float) -> str:
    """What to say when a launch's estimate was off by more than ETA_OFF_FACTOR either way and more than
    ETA_OFF_LEAST_S."""
    if not estimate_s or not duration_s or abs(duration_s - estimate_s) <= ETA_OFF_LEAST_S:
        return ""
    if duration_s > ETA_OFF_FACTOR * estimate_s:
        return f"more than {ETA_OFF_FACTOR:g}x the estimate; the ETA was too short"
    if duration_s * ETA_OFF_FACTOR < estimate_s:
        return f"less than 1/{ETA_OFF_FACTOR:g} of the estimate; the ETA was too long"
    return ""
