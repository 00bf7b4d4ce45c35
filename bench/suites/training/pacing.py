"""What paced a training step: the GPU's work, or the host launching it.

A step is GPU-bound when its GPU ran kernels (computing, or communicating with nothing to hide
it) for nearly all of the step. Where the host's CPU launches kernels more slowly than the GPU runs
them, the GPU idles between them: the step then measures the host, its time spreads with the CPU's
scheduling, and an all-reduce can hide in the launch gaps, so a slow link looks free. Such a run
says nothing about the link, whatever its scaling figure.

The verdict reads what the run recorded: the kernels of its profiled steps (gpu_compute_busy_s
and gpu_comm_exposed_s) against its median step time. A configuration is profiled in its first
launch only; its repeats' steps are set against those kernels. Power against its limit, MFU and
the step's spread are kept beside it as context: a host-paced step may still draw most of a GPU's power
(large kernels with gaps between them), so they do not decide.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass

from bench.common.pacing_verdicts import GPU_BOUND, HOST_PACED, ON_CPU, UNKNOWN
from bench.common.run import Run

# A GPU-bound step keeps its GPU busy at least this share of the step: 97-98% measured on GPT-2 at
# micro-batch 16 and on CUDA graphs; host-paced eager steps at micro-batch 2 kept it 19-55% busy.
GPU_BOUND_BUSY_FRACTION = 0.9

# A step's GPU work: its compute kernels' busy time, and its communication no compute kernel hid (a
# step the link paces is GPU-bound, and that is what is measured).
GPU_WORK_METRICS = ("gpu_compute_busy_s", "gpu_comm_exposed_s")

ADVICE = ("make the GPU's work per launch larger: a larger micro_batch, cuda_graphs: true (ddp), or compile: true")


@dataclass(frozen=True)
class Pacing:
    """One run's pacing verdict and the figures it stands on (bundle schema: run.pacing)."""

    verdict: str  # one of bench/common/pacing_verdicts.py
    gpu_busy_fraction: "float | None"  # kernels' share of the median step (profiled); None: not profiled
    power_fraction: "float | None"  # median power over the enforced limit, the busiest GPU's
    mfu_fraction: "float | None"
    step_cv: "float | None"  # the timed steps' coefficient of variation within the launch

    @classmethod
    def of_record(cls, record: dict) -> "Pacing":
        return cls(**{key: record.get(key) for key in cls.__dataclass_fields__})

    def as_record(self) -> dict:
        return asdict(self)

    def words(self) -> str:
        """"GPU-bound (GPU busy 97% of the step)", "paced by the host (GPU busy 41% of the step)"."""
        busy = "" if self.gpu_busy_fraction is None else f" (GPU busy {self.gpu_busy_fraction:.0%} of the step)"
        return {GPU_BOUND: f"GPU-bound{busy}", HOST_PACED: f"paced by the host{busy}",
                ON_CPU: "paced by the CPU (its processes compute on it)",
                UNKNOWN: "pacing unknown (no profiled step: profile_steps 0)"}[self.verdict]

    def short(self) -> str:
        """A table cell: "GPU-bound 97%", "host-paced 41%", "CPU", "unknown"."""
        busy = "" if self.gpu_busy_fraction is None else f" {self.gpu_busy_fraction:.0%}"
        return {GPU_BOUND: f"GPU-bound{busy}", HOST_PACED: f"host-paced{busy}", ON_CPU: "CPU", UNKNOWN: "unknown"}[self.verdict]


def judge(run: Run, profiled: "Run | None" = None) -> Pacing:
    """The pacing of one ok training run, from its metrics and GPU counters; where it profiled no step (a
    repeat), from the kernels of `profiled`, its configuration's run in the launch that profiled it."""
    step = run.median("step_time_s")
    cv = (run.metric("step_time_s") or {}).get("summary", {}).get("cv")
    mfu = run.median("mfu_fraction")
    if not run.on_gpu:
        return Pacing(ON_CPU, None, None, mfu, cv)
    power = _power_fraction(run.gpu_counters)
    kernels = profiled if run.median("gpu_compute_busy_s") is None and profiled is not None else run
    if kernels.median(GPU_WORK_METRICS[0]) is None or not step:
        return Pacing(UNKNOWN, None, power, mfu, cv)
    work_s = sum(kernels.median(name) or 0.0 for name in GPU_WORK_METRICS)
    return Pacing(HOST_PACED if paced_by_host(work_s, step) else GPU_BOUND, round(min(1.0, work_s / step), 4), power, mfu, cv)


def paced_by_host(gpu_work_s: float, step_s: float) -> bool:
    """Whether the GPU worked less than a GPU-bound step's share of the step: the host paced it."""
    return gpu_work_s < GPU_BOUND_BUSY_FRACTION * step_s


def of_run(run: Run) -> Pacing:
    """The run's pacing as its bundle keeps it, else judged now (a bundle from before it was kept)."""
    kept = run.record.get("pacing")
    return Pacing.of_record(kept) if kept else judge(run)


def of_runs(runs: "list[Run]") -> Pacing:
    """The pacing of a figure several runs make (the runs of a configuration, a run and its baseline):
    host-paced where any of them was, its busy share the least of theirs."""
    found = [of_run(run) for run in runs]
    order = (HOST_PACED, ON_CPU, UNKNOWN, GPU_BOUND)
    verdict = min((p.verdict for p in found), key=order.index)
    def least(name: str) -> "float | None":
        values = [getattr(p, name) for p in found if getattr(p, name) is not None]
        return min(values) if values else None
    cvs = [p.step_cv for p in found if p.step_cv is not None]
    return Pacing(verdict, least("gpu_busy_fraction"), least("power_fraction"), least("mfu_fraction"),
                  statistics.median(cvs) if cvs else None)


def derive_pacing(runs: "list[Run]", suite) -> None:
    """Keep the pacing verdict on every ok run of `suite` (a bench.suites.base.Suite) among one host's runs;
    a repeat that profiled no step is judged by its configuration's run in the launch it names (profiled_in)."""
    timed = [run for run in runs if run.ok and run.suite == suite.name and run.metric("step_time_s")]
    profiled = {(run.launch_id, suite.configuration(run)): run for run in timed if run.metric("gpu_compute_busy_s")}
    for run in timed:
        run.record["pacing"] = judge(run, profiled.get((run.profiled_in, suite.configuration(run)))).as_record()


def _power_fraction(counters: "dict | None") -> "float | None":
    fractions = [gpu["power_w_median"] / gpu["power_limit_w"] for gpu in (counters or {}).get("gpus", [])
                 if gpu.get("power_w_median") is not None and gpu.get("power_limit_w")]
    return round(max(fractions), 4) if fractions else None
