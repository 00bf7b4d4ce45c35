"""Modelled: the slowdown under communication per link, fitted where this host measured it: an N-GPU
run's last backward with its all-reduces against the same without (timeline_steps), replayed on the
topology the run crossed (bench/common/replay.py's fitted_slowdown)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from bench.common.replay import NONE, Slowdown, fitted_slowdown
from bench.common.run import Run
from bench.suites.ddp.predict.runs import workload_of
from bench.suites.ddp.predict.sweeps import algorithm_of, crossed_key
from bench.suites.ddp.predict.timelines import Profiles
from bench.suites.ddp.predict.topology import Durations


def _configuration(run: Run) -> tuple:
    return workload_of(run), run.params["global_batch"], run.world_size, run.preset


@dataclass
class Slowdowns:
    """What a step's own all-reduces do on this host that their curve does not say, per link and NCCL
    algorithm asked (ring and tree over one link are two curves). A link's figure is the median over
    its runs; set against one of them, the median over the others, those of the same configuration
    (its other repeats) first, then those of its workload (its buckets, its compute), so that a run is
    never predicted from its own stretch."""

    fitted: dict  # (link name, algorithm) -> [(run, Slowdown)], for what the run crossed and the table's row of the path
    own: dict  # id(run) -> its own Slowdown: what its two arms say, which is never lent to itself

    def of_run(self, run: Run) -> "Slowdown | None":
        """The run's own: what its steps with all-reduce say against its steps without, on what it crossed."""
        return self.own.get(id(run))

    def of(self, link_name: str, algorithm: "str | None" = None, leave_out: "Run | None" = None) -> Slowdown:
        others = [(run, s) for run, s in self.fitted.get((link_name, algorithm), []) if run is not leave_out]
        alike = [(run, s) for run, s in others if leave_out is not None and _configuration(run) == _configuration(leave_out)]
        kin = [(run, s) for run, s in others if leave_out is not None and workload_of(run) == workload_of(leave_out)]
        values = [s for _, s in alike or kin or others]
        if not values:
            return NONE
        return Slowdown(statistics.median(s.compute for s in values), statistics.median(s.comm for s in values))


def fit_slowdowns(runs: list, crossed: dict, profiles: Profiles, durations: Durations, nodes: dict) -> Slowdowns:
    """Each N-GPU run's slowdown on what it crossed (sweeps.crossed_by_runs), filed under that path's
    name and its table row's."""
    found: dict = {}
    own: dict = {}
    for run in runs:
        path = crossed.get(crossed_key(run, nodes))
        without = profiles.of(run, "steps_without_allreduce", "", None)
        timed = run.timeline.get("steps")
        if path is None or without is None or not timed:
            continue
        compute_end = statistics.median(max(step["bucket_ready_s"], default=0.0) for step in timed)
        backward_end = statistics.median(step["last_backward_s"] for step in timed)
        fitted = own[id(run)] = fitted_slowdown(without.timeline(without.accum), compute_end, backward_end,
                                                durations.of(path.topology))
        for name in {path.name} | ({path.row.name} if path.row else set()):
            found.setdefault((name, algorithm_of(run)), []).append((run, fitted))
    return Slowdowns(found, own)
