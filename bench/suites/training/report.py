"""What the training suites' report parts share: the workload a run trained (its model, recipe,
sequence and micro-batch), and the findings of a training suite's runs for the report's answer
(bench/report/answer.py), each scaled against its run's baseline."""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass

from bench.common.stats import ratio_of_medians
from bench.common.transports import on_gpu, ranks_label
from bench.report import tables as T
from bench.report.answer import Finding
from bench.report.merge import Comparison, RunEntry
from bench.report.series import pooled
from bench.suites.training import training_recipe


@dataclass(frozen=True, order=True)
class Workload:
    model: str
    recipe: str  # precision, and the memory-lean choices when made (training_recipe)
    seq_len: "int | None"  # None for the UNet presets: a sample is an image, not tokens
    micro_batch: int

    @property
    def title(self) -> str:
        sample = f"{self.seq_len} tokens x " if self.seq_len is not None else ""
        return f"{self.model}, {self.recipe}, {sample}micro-batch {self.micro_batch}"

    @property
    def stem(self) -> str:
        tokens = f"-s{self.seq_len}" if self.seq_len is not None else ""
        return f"{self.model}-{self.recipe.replace(', ', '-').replace(' ', '-')}{tokens}-mb{self.micro_batch}"


def workload(entry: RunEntry) -> Workload:
    p = entry.params
    return Workload(p["model"], training_recipe(p), p.get("seq_len"), p["micro_batch"])


def _names(workloads: set) -> dict:
    """Workload -> its name in the answer: "gpt2 bf16", or its full title where two share that."""
    short = defaultdict(list)
    for w in workloads:
        short[f"{w.model} {w.recipe}"].append(w)
    return {w: name if len(alike) == 1 else w.title for name, alike in short.items() for w in alike}


def _baseline_runs(entries: list[RunEntry]) -> list[dict]:
    return list({id(e.baseline): e.baseline for e in entries if e.baseline is not None}.values())


def _samples(runs: list[dict], metric: str) -> list:
    return [s for run in runs for s in (run["metrics"].get(metric) or {}).get("samples", [])]


def _finding(name: str, ranks: str, batch: int, entries: list[RunEntry]) -> Finding:
    step = statistics.median(pooled(entries, "step_time_s"))
    if entries[0].run["world_size"] == 1:  # its own baseline: no link crossed, nothing to scale
        return Finding(entries[0].series, name, ranks, batch, step, flags=T.flags(entries))
    bases = _baseline_runs(entries)
    base_per_sample, base_step = _samples(bases, "per_sample_gpu_time_s"), _samples(bases, "step_time_s")
    mine = pooled(entries, "per_sample_gpu_time_s")
    efficiency = ratio_of_medians(base_per_sample, mine) if base_per_sample and mine else None
    exposed = None
    if base_step:
        # The 1-GPU step for the same work per GPU: its step time x (this run's batch per GPU / its batch).
        per_gpu = batch / entries[0].run["world_size"]
        exposed = step - statistics.median(base_step) * per_gpu / bases[0]["params"]["global_batch"]
    return Finding(entries[0].series, name, ranks, batch, step, efficiency, exposed, flags=T.flags(entries))


def training_findings(comparison: Comparison, suite: str, workload_of) -> list[Finding]:
    """One finding per series, workload, rank count and global batch of the suite's multi-rank runs,
    each scaled against its run's baseline (the suite's `baselines`); a machine and workload measured
    on one rank only gets its 1-rank findings (no link to judge). fsdp's findings are these too, with
    the strategy in the workload."""
    entries = [e for e in comparison.runs if e.run["suite"] == suite and e.samples("step_time_s")]
    names = _names({workload_of(e) for e in entries})
    groups = defaultdict(list)
    for e in entries:
        groups[(e.run["world_size"] > 1, e.series, workload_of(e), e.run["world_size"], on_gpu(e.run), e.params["global_batch"])].append(e)
    found = [_finding(names[w], ranks_label(ws, gpus), batch, group)
             for (multi, _, w, ws, gpus, batch), group in sorted(groups.items()) if multi]
    scaled = {(f.series.machine, f.workload) for f in found}
    found += [_finding(names[w], ranks_label(ws, gpus), batch, group)
              for (multi, series, w, ws, gpus, batch), group in sorted(groups.items())
              if not multi and (series.machine, names[w]) not in scaled]
    return found
