"""All that is judged of one host's results, at once, for the report to render: the concerns its
fingerprint raised (health.py), each run's figures against their expected ranges (normal.py), and
what the GPU counters say held its figures back (counters.py): clocks held back over each launch and
each run's timed steps, a PCIe link below its slot while a run was measured."""

from __future__ import annotations

from dataclasses import dataclass

from bench.judging.counters import HELD_BACK_FLAG_FRACTION, clocks, links_below_slot
from bench.judging.health import health_warnings
from bench.judging.host import Host
from bench.judging.normal import judgements


@dataclass(frozen=True)
class Clocks:
    """One GPU's clocks over a window of the counters (counters.clocks)."""

    gpu: dict  # the GPU's counters over the window
    state: str  # "not measured", "max unknown", "no" or "held back"
    held: "dict | None"  # where held back: the share of the samples, the clock, the maximum and NVML's reasons then

    @property
    def flagged(self) -> bool:
        """Held back in more than HELD_BACK_FLAG_FRACTION of the samples: worth a reader's attention."""
        return self.held is not None and self.held["fraction"] > HELD_BACK_FLAG_FRACTION


@dataclass(frozen=True)
class RunVerdicts:
    figures: tuple  # a normal.Judgement of each of its figures
    clocks: tuple  # Clocks of each GPU over its timed steps
    below_slot: tuple  # the PCIe links below their slot while it was measured (counters.links_below_slot)


@dataclass(frozen=True)
class HostVerdicts:
    concerns: tuple  # the fingerprint's, one line each (health.health_warnings)
    without_p2p: tuple  # the GPU pairs without peer access: NCCL's default goes through host memory there
    launches: dict  # launch id -> Clocks of each GPU over the launch, for the launches with counters
    runs: dict  # id(run) -> RunVerdicts of each run judged


UNJUDGED = RunVerdicts((), (), ())  # a failed run's


def judge(host: dict, runs: list) -> HostVerdicts:
    """What is judged of a bundle's host and of its runs, (Run, its Suite) each: its ok runs."""
    facts = Host.of(host.get("fingerprint"))
    launches = {launch["id"]: _clocks(launch["gpu_counters"], facts) for launch in host["launches"] if launch.get("gpu_counters")}
    judged = {id(run): RunVerdicts(tuple(judgements(run, facts, suite)), _clocks(run.gpu_counters, facts),
                                   tuple(links_below_slot(run.gpu_counters, facts))) for run, suite in runs}
    return HostVerdicts(tuple(health_warnings(facts.fingerprint)), tuple(facts.without_p2p), launches, judged)


def _clocks(counters: "dict | None", host: Host) -> tuple:
    return tuple(Clocks(gpu, *clocks(gpu, host.max_sm_clocks.get(gpu["index"]))) for gpu in (counters or {}).get("gpus") or [])

