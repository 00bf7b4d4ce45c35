"""What the fsdp suite's plots and tables show, from the samples of the merged runs: each model's
per-sample time x #GPUs by strategy (ddp and fsdp's shardings) and transport, and each strategy's
link sensitivity.

Link sensitivity = scaling efficiency under a transport / scaling efficiency under default, for the
same machine, model, strategy, global batch and #GPUs: does the link cost more where communication
is more frequent? Both efficiencies share their 1-GPU baseline, so the ratio is
the default run's per-sample time / the other transport's, and its interval bench/common/stats.py's
model of launches and samples."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace

from bench import suites
from bench.common.stats import Spread
from bench.common.transports import ranks_label
from bench.report import series as S
from bench.report.merge import Comparison, RunEntry, Series
from bench.report.series import Line
from bench.suites.training import of_plain_model, training_recipe
from bench.suites.training.report import per_sample_ratio, scaling

# After the plain model's strategy (first), fsdp's shardings from the least sharded.
SHARDING_ORDER = {"grad_op": 1, "full": 2, "hybrid": 3}


def strategy(entry: RunEntry) -> str:
    """The run's strategy as its suite names it (TrainingSuite.strategy): "fsdp SHARDING", with its
    reduce dtype where it is bf16, or the plain model's suite."""
    return suites.get(entry.run.suite).strategy(entry.params)


def strategy_order(name: str) -> tuple:
    suite, _, sharding = name.split(",")[0].partition(" ")
    return (SHARDING_ORDER.get(sharding, 9) if suite == "fsdp" else 0, name)


@dataclass(frozen=True, order=True)
class Model:
    """What one figure shows: a model trained one way, at one shape."""

    model: str
    recipe: str
    seq_len: "int | None"
    micro_batch: int

    @property
    def title(self) -> str:
        return f"{self.model}, {self.recipe}, {self.seq_len} tokens x micro-batch {self.micro_batch}"

    @property
    def stem(self) -> str:
        return f"{self.model}-{self.recipe.replace(', ', '-').replace(' ', '-')}-s{self.seq_len}-mb{self.micro_batch}"


def model_of(entry: RunEntry) -> Model:
    p = entry.params
    return Model(p["model"], training_recipe(p), p.get("seq_len"), p["micro_batch"])


def machine(series: Series) -> Series:
    """The series without its transport: what a 1-GPU run and a sensitivity row belong to."""
    return replace(series, transport="", mismatch=False)


def training_entries(comparison: Comparison) -> list[RunEntry]:
    """The fsdp runs, and the plain model's runs of the models the fsdp runs trained (the strategy beside them)."""
    fsdp = [e for e in comparison.runs if e.run.suite == "fsdp"]
    models = {model_of(e) for e in fsdp}
    return fsdp + [e for e in comparison.runs if of_plain_model(e.run) and model_of(e) in models]


def per_sample_lines(entries: list[RunEntry]) -> dict[Model, list[Line]]:
    """Per-sample time x #GPUs (s) against global batch, per model: a line per strategy, transport and
    #GPUs; the plain model on one GPU as the baseline."""
    groups = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for entry in entries:
        ws, name = entry.run.world_size, strategy(entry)
        series = machine(entry.series) if ws == 1 else entry.series
        baseline = of_plain_model(entry.run) and ws == 1
        groups[model_of(entry)][(baseline, series, strategy_order(name), ws, entry.run.on_gpu)][entry.params["global_batch"]] += \
            entry.samples("per_sample_gpu_time_s")

    def line(key, points):
        baseline, series, (_, name), ws, gpus = key
        if baseline:
            return Line(series, f"{series.machine} · {ranks_label(1, gpus)}, plain model (baseline)", points, baseline=True)
        where = f"{series.machine} · {ranks_label(1, gpus)}" if ws == 1 else f"{series.label} · {ranks_label(ws, gpus)}"
        return Line(series, f"{name} · {where}", points, detail=(name,))

    return {m: S.lines_of(g, line) for m, g in sorted(groups.items())}


@dataclass
class Sensitivity:
    machine: Series
    model: Model
    strategy: str
    global_batch: int
    world_size: int
    scaling: "Spread | None"  # under default, against the 1-GPU baseline
    ratios: dict  # preset -> Spread: its scaling / default's


def sensitivities(entries: list[RunEntry]) -> list[Sensitivity]:
    """Per machine, model, strategy, global batch and #GPUs (2 or more): the scaling under default and
    each other transport's scaling relative to it."""
    groups = defaultdict(lambda: defaultdict(list))
    for entry in entries:
        if entry.run.world_size > 1:
            key = (machine(entry.series), model_of(entry), strategy(entry), entry.params["global_batch"], entry.run.world_size)
            groups[key][entry.run.preset].append(entry)
    found = []
    for key, by_preset in sorted(groups.items(), key=lambda item: (item[0][0], item[0][1], item[0][3], item[0][4],
                                                                    strategy_order(item[0][2]))):
        default = by_preset.get("default")
        if not default:
            continue
        runs = [e.run for e in default]
        ratios = {preset: per_sample_ratio(runs, [e.run for e in others])
                  for preset, others in sorted(by_preset.items()) if preset != "default"}
        ratios = {preset: ratio for preset, ratio in ratios.items() if ratio is not None}
        if any(e.samples("per_sample_gpu_time_s") for e in default) and ratios:
            found.append(Sensitivity(*key, scaling(default), ratios))
    return found
