"""What the training suites' derived figures share: the collectives' time read off the same host's
sweeps (the compute + exposed communication model prices a step's communication with them), and the plausibility of a
scaling figure against its 1-GPU baseline."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Callable

from bench import suites
from bench.common import launch_floor
from bench.common.run import Run
from bench.common.stats import LEVEL, Launches, Spread, ratio_interval
from bench.common.transports import setting_key
from bench.common.units import count
from bench.suites.base import warning
from bench.suites.training import pacing


def curve_key(run: Run, nodes_of_launch: dict) -> tuple:
    """Which collectives' curve prices a run: the same preset, world size, nodes and link setting (NCCL's
    algorithm, emulated nodes, GPUs)."""
    return (run.preset, run.world_size, nodes_of_launch.get(run.launch_id, 1), *setting_key(run, with_env=False))


def collective_curves(runs: "list[Run]", op: str, nodes_of_launch: dict) -> dict:
    """curve_key -> {dtype: [(size_bytes, median seconds)]} of the ok runs that timed one call of `op`
    (Suite.timed_collective), by size; repeated sizes take the median."""
    points: dict = {}
    for run in runs:
        suite = suites.registry().get(run.suite)
        # an ok run without its time (a bundle the schema accepts may hold one) times nothing
        timed = suite.timed_collective(run) if suite is not None and run.ok else None
        if timed is None or timed[0] != op:
            continue
        _, dtype, size, seconds = timed
        sizes = points.setdefault(curve_key(run, nodes_of_launch), {}).setdefault(dtype, {})
        sizes.setdefault(size, []).append(seconds)
    return {
        key: {dtype: sorted((size, statistics.median(times)) for size, times in sizes.items()) for dtype, sizes in dtypes.items()}
        for key, dtypes in points.items()
    }


def curve_of(dtypes: dict, dtype: str) -> list[tuple]:
    """The curve of the dtype the bytes move in, else the one that reaches the largest size."""
    return dtypes.get(dtype) or max(dtypes.values(), key=lambda curve: curve[-1][0])


@dataclass(frozen=True)
class Baselines:
    """The 1-rank runs an N-rank run may be scaled against. `like`: the one with the N-rank run's work per
    rank (its micro-batch and accumulation: global batch / N), which the 1-rank launch trains for this
    purpose (bench.agent.planning); `strong`: the one of the same global batch, strong scaling's, which
    accumulates N times as many micro-batches. Scaled against `like` where it was measured."""

    like: "Run | None"
    strong: "Run | None"

    @property
    def used(self) -> "Run | None":
        return self.like or self.strong


def one_rank_runs(runs: "list[Run]", key: Callable[[Run], tuple]) -> dict:
    """(key(run), global batch, repeat) -> the ok world-size-1 run, the default preset's where there are
    several (one rank crosses no link)."""
    found: dict = {}
    for run in runs:
        if run.world_size == 1 and run.ok:
            index = (key(run), run.params["global_batch"], run.repeat)
            if index not in found or run.preset == "default":
                found[index] = run
    return found


def baselines_of(run: Run, one_rank: dict, key: tuple) -> Baselines:
    """A run's baselines among one_rank_runs(...) of its key: of its own repeat (launch_repeats) where
    measured, else of any."""
    def at(batch: int) -> "Run | None":
        return one_rank.get((key, batch, run.repeat)) or next(
            (found for (k, b, _), found in sorted(one_rank.items(), key=lambda item: item[0][2]) if (k, b) == (key, batch)), None)

    batch, ranks = run.params["global_batch"], run.world_size
    return Baselines(at(batch // ranks) if batch % ranks == 0 else None, at(batch))


BASELINE_NOTE = "baseline: "  # how baseline_note begins


def baseline_note(run: Run, found: Baselines) -> str:
    """Which baseline an N-rank run that has one was scaled against, in words, and where strong scaling's
    1-rank run differs per sample by more than its interval from the one used, by how much."""
    used = found.used
    ranks = "GPU" if run.on_gpu else "process"
    said = f"{BASELINE_NOTE}1 {ranks} at global batch {used.params['global_batch']}, accumulating {micro_batches(used)}"
    said += ", the same work per rank" if used is found.like else " (strong scaling's: no 1-rank run of this work per rank)"
    strong = found.strong
    if used is found.like and strong is not None and strong is not used:
        # Its interval takes the launch-to-launch floor though both ran in one launch: it says "differs" only where plainly so.
        apart = ratio_interval(per_sample_launches([used]), per_sample_launches([strong]))
        if apart is not None and apart.low is not None and apart.high is not None and (apart.low > 1 or apart.high < 1):
            slower = apart.median < 1  # strong scaling's run takes longer per sample
            said += (f"; the 1-{ranks} run accumulating {micro_batches(strong)} (global batch "
                     f"{strong.params['global_batch']}) is {abs(1 / apart.median - 1):.0%} {'slower' if slower else 'faster'} per "
                     f"sample than accumulating {used.params['grad_accum']}, so strong scaling against it would read "
                     f"{'better' if slower else 'worse'}")
    return said


def micro_batches(run: Run) -> str:
    return count(run.params["grad_accum"], "micro-batch", "micro-batches")


UNLIKE_BASELINE = ("the 1-rank baseline did not get the resources per rank the N-rank run got (threads, cores, clocks) "
                   "or was not warmed up; or the machine was busy while it ran")


def _unlike_baseline(run: Run, baseline: "Run | None", busy_shares: dict) -> str:
    """The likely cause, with the CPU share other processes took during either run where the machine was busy."""
    busy = [f"{busy_shares[r.launch_id]:.0%} of the machine's CPU during the {r.world_size}-rank run"
            for r in (baseline, run) if r is not None and r.launch_id in busy_shares]
    return UNLIKE_BASELINE + (f" (other processes took {' and '.join(busy)})" if busy else "")


ABOVE_PERFECT, NEGATIVE_EXPOSED = "scaling_above_perfect", "negative_exposed_comm"


def per_sample_launches(runs: "list[Run]") -> Launches:
    """The per-sample time x GPUs of each run (a launch each), with the floor of its step time's kind and
    pacing: the sides of a scaling efficiency."""
    return launch_floor.launches(runs, "per_sample_gpu_time_s", suites.get(runs[0].suite).headline_metric,
                                 pacing.of_runs(runs).verdict)


def implausible(efficiency: "Spread | None", exposed_s: "float | None") -> list[str]:
    """The codes of the scaling figures no correct measurement gives: an efficiency whose interval
    lies above 100%, an exposed communication below zero. One run's (scaling_warnings) or the
    figures a report pools from several runs: each is judged by what it shows."""
    found = []
    if efficiency is not None and efficiency.low is not None and efficiency.low > 1:
        found.append(ABOVE_PERFECT)
    if exposed_s is not None and exposed_s < 0:
        found.append(NEGATIVE_EXPOSED)
    return found


def scaling_warnings(run: Run, baseline: "Run | None", busy_shares: dict) -> list[dict]:
    """A scaling efficiency whose interval lies above 100%, an exposed communication below zero
    (busy_shares: HostResults.busy_shares)."""
    cause = _unlike_baseline(run, baseline, busy_shares)
    found = []
    efficiency = None if baseline is None else ratio_interval(per_sample_launches([baseline]), per_sample_launches([run]))
    exposed = run.derived.get("exposed_comm_s")
    codes = implausible(efficiency, exposed)
    if ABOVE_PERFECT in codes:
        found.append(warning(
            ABOVE_PERFECT,
            f"scaling efficiency {efficiency.median:.0%} (its {LEVEL:.0%} interval [{efficiency.low:.0%}, {efficiency.high:.0%}] "
            f"lies above 100%): {run.world_size} ranks did more than {run.world_size} times the work of one", cause))
    if NEGATIVE_EXPOSED in codes:
        step = run.median("step_time_s")
        found.append(warning(
            NEGATIVE_EXPOSED,
            f"exposed communication {exposed * 1e3:.4g} ms is negative: the 1-rank step for the same work per rank "
            f"({(step - exposed) * 1e3:.4g} ms) is slower than this {run.world_size}-rank step ({step * 1e3:.4g} ms)", cause))
    return found
