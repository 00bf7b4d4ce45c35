"""The predictor's results, typed: each configuration on each link (Predicted), each measured run beside
its predictions (Against), a host's all of it with its notes (HostPrediction), and the signed error
per world size, topology, link and algorithm (ErrorRow), the statistics as properties and methods."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from bench.common.allreduce import Topology
from bench.common.replay import NONE, Slowdown
from bench.common.run import Run
from bench.suites.ddp.predict.runs import Workload

CHOSEN = "NCCL's choice"  # the algorithm of a run that named none
# Below a tenth of a cent an hour no machine rents: such a price gives no samples per dollar.
PRICE_FLOOR_PER_HOUR = 1e-3


@dataclass
class Predicted:
    """One workload and global batch on one link or topology at `gpus` GPUs."""

    host: str
    workload: Workload
    global_batch: int
    gpus: int
    link: str  # the link's name, or the measured transport's label
    title: str
    basis: str  # the link table row's basis (measured, cited, derived), "user", or "measured run"
    step_s: float
    exposed_s: "float | None"
    baseline_per_sample_s: "float | None"  # the 1-GPU per-sample time (x 1 GPU) this scales against
    price_per_hour: "float | None"
    scaling: str  # "weak" (the batch per GPU kept) or "strong" (the global batch kept)
    source: str = ""  # the timeline it replays, or the compute + exposed communication model
    slowdown: Slowdown = NONE
    measured: "Run | None" = None  # the run, where this is a measured configuration
    shape: str = ""  # "2 nodes x 2 GPUs"
    like: str = ""  # the predictor's error on runs like this one (validated.runs_like), on a link's row

    @property
    def samples_per_s(self) -> float:
        return self.global_batch / self.step_s

    @property
    def per_sample_gpu_s(self) -> float:
        return self.step_s / self.global_batch * self.gpus

    @property
    def efficiency(self) -> "float | None":
        """The scaling efficiency: the baseline's per-sample time over this one's x GPUs."""
        return self.baseline_per_sample_s / self.per_sample_gpu_s if self.baseline_per_sample_s else None

    @property
    def samples_per_dollar(self) -> "float | None":
        if not self.price_per_hour or self.price_per_hour < PRICE_FLOOR_PER_HOUR:
            return None
        return self.samples_per_s * 3600 / self.price_per_hour


@dataclass
class Against:
    """A measured N-GPU run beside its predictions: from the 1-GPU timeline, from its own steps
    without all-reduce, and the compute + exposed communication model."""

    host: str
    run: Run
    link: str
    from_one_gpu: "float | None"
    from_own_steps: "float | None"
    exposed_model: "float | None"
    slowdown: Slowdown
    shape: str = ""
    algorithm: "str | None" = None
    nodes: int = 1
    topology: "Topology | None" = None  # what its all-reduces were replayed on
    fitted: "Slowdown | None" = None  # its own two arms' slowdown there (never the one it is predicted with)
    one_gpu_busy: "float | None" = None  # the share of the 1-GPU step its GPU computed (Sources.one_gpu_busy)
    exposed_allreduce_s: "float | None" = None  # the compute + exposed communication model's all-reduce: its step less its compute

    @property
    def measured(self) -> dict:
        return self.run.metric("step_time_s")["summary"]

    @property
    def exposed_compute_s(self) -> "float | None":
        """The compute + exposed communication model's compute: the 1-GPU step for this work per GPU, pooled over its launches."""
        return None if self.exposed_model is None else self.exposed_model - self.exposed_allreduce_s

    def error(self, predicted: "float | None") -> "float | None":
        return predicted / self.measured["median"] - 1 if predicted is not None else None


@dataclass(frozen=True)
class Unpredicted:
    """A configuration, GPU count or link the predictor gave nothing for: why, and what would give one."""

    reason: str
    fix: str


@dataclass
class HostPrediction:
    host: str
    predicted: list = field(default_factory=list)  # Predicted
    against: list = field(default_factory=list)  # Against
    notes: list = field(default_factory=list)
    uncurved: set = field(default_factory=set)  # links predicted on without a measured curve
    cpu: bool = False  # its runs' ranks computed on the CPU (gloo): every prediction's compute is that CPU's
    unpredicted: list = field(default_factory=list)  # Unpredicted

    def note(self, line: str) -> None:
        if line not in self.notes:
            self.notes.append(line)

    def nothing(self, reason: str, fix: str) -> None:
        """Nothing predicted where a prediction was asked for: said in a note, kept for the command's error."""
        if reason not in self.notes:
            self.unpredicted.append(Unpredicted(reason, fix))
        self.note(reason)

    @property
    def links_predicted(self) -> list:
        return [p for p in self.predicted if p.measured is None]


@dataclass(frozen=True)
class ErrorRow:
    """The predictor's signed error (predicted / measured - 1) over the measured runs of one world
    size, topology, link and algorithm, every launch of them: the mean, least and most of each
    prediction's."""

    host: str
    gpus: int
    nodes: int
    shape: str
    link: str
    algorithm: str
    runs: int
    launches: int
    from_one_gpu: tuple  # (mean, least, most) or ()
    from_own_steps: tuple
    exposed_model: tuple
    # What the rows' misses come from, measured: the all-reduces inside their steps over their sweep alone (each
    # run's own fit, 1 + Slowdown.comm), and the share of the 1-GPU step its GPU computed (under 1: the CPU's pace)
    in_step_over_sweep: "float | None" = None
    one_gpu_busy: "float | None" = None


def _errors(values: list) -> tuple:
    kept = [v for v in values if v is not None and math.isfinite(v)]
    return (statistics.fmean(kept), min(kept), max(kept)) if kept else ()


def error_table(found: list[HostPrediction]) -> list[ErrorRow]:
    """One row per host, world size, nodes, topology, link and algorithm, over every measured run there."""
    groups: dict = {}
    for host in found:
        for a in host.against:
            key = (host.host, a.run.world_size, a.nodes, a.shape, a.link, a.algorithm or CHOSEN)
            groups.setdefault(key, []).append(a)
    return [ErrorRow(*key, len(rows), len({a.run.launch_id for a in rows}), _errors([a.error(a.from_one_gpu) for a in rows]),
                     _errors([a.error(a.from_own_steps) for a in rows]), _errors([a.error(a.exposed_model) for a in rows]),
                     _median([1 + a.fitted.comm for a in rows if a.fitted is not None]), _median([a.one_gpu_busy for a in rows]))
            for key, rows in sorted(groups.items(), key=lambda item: item[0])]


def _median(values: list) -> "float | None":
    kept = [v for v in values if v is not None]
    return statistics.median(kept) if kept else None


def relative(value: "float | None") -> str:
    return f"{value:+.1%}" if value is not None and math.isfinite(value) else "-"
