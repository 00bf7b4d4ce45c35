"""The training family: what the training suites (ddp, fsdp) share, torch-free. The folder holds no
suite.py, so the registry passes it by: it is no suite of its own.

This module: their common parameters, how a run trained in words (its recipe), the warm-up rules,
the model checks before a launch, and TrainingSuite, the Suite base that puts them together, with
the typed hooks of the figures each derives across a host's runs. Beside it: cost.py (the compute
part of their cost model), derived.py (the collectives' curves their predictions read, the
plausibility of a scaling), memory.py (the memory estimate per GPU), report.py (what their report
parts share) and training.schema.json (the shared parameters). What their ranks share is
bench/agent/training.py.

A training suite's params.schema.json holds only its own parameters: this module composes it with
training.schema.json beside it (the model, batches, steps, precision ..., and the harness's sampling
parameters it refers to), the suite's own keys winning, so that each shared parameter is written
down once.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar

from bench import suites
from bench.common.host import Capabilities
from bench.common.run import Run
from bench.common.sampling import HOST_PACED_SAMPLES
from bench.common.transports import ranks_label
from bench.errors import PlanError
from bench.models.shapes import TRANSFORMER_PRESETS, UNET_CONFIGS, UNET_EXTRA
from bench.suites.base import Figure, HostResults, Suite
from bench.suites.params import SampledParams, merged, resolved
from bench.suites.training import auto, memory
from bench.suites.training.derived import scaling_warnings
from bench.suites.training.pacing import Pacing, derive_pacing
from bench.suites.training.pacing import of_runs as pacing_of_runs

SHARED_SCHEMA = Path(__file__).resolve().parent / "training.schema.json"


@dataclass(frozen=True, kw_only=True)
class TrainingParams(SampledParams):
    """training.schema.json's $defs/params: what every training suite's ranks, checks and cost model read."""

    model: str
    micro_batch: int
    steps: int
    warmup_steps: int
    grad_accum: int
    warmup_max_steps: int
    warmup_tolerance: float
    precision: str
    weights_dtype: str
    activation_checkpointing: bool
    optimizer: str
    compile: bool
    profile_steps: int
    seed: int
    seq_len: "int | None" = None
    global_batches: "list | None" = None
    grad_accums: "list | None" = None
    baselines_for: "list | None" = None  # a 1-rank launch's: the world sizes its entry scales to
    AGENT_SET: ClassVar[tuple] = ("baselines_for",)
    SMOKE_LEAST: ClassVar[tuple] = ("steps", "warmup_steps", "warmup_max_steps")

    def __post_init__(self) -> None:
        if self.global_batches and self.grad_accums:
            raise PlanError("global_batches and grad_accums both set the global batches; keep one (grad_accums: "
                            "micro_batch x world size x each, the same work per GPU at every world size)")

    @property
    def minimum_samples(self) -> int:
        return self.steps

    def with_minimum_samples(self, count: int) -> "TrainingParams":
        return replace(self, steps=count)

    def smoke_overrides(self) -> dict:
        first = ({"global_batches": self.global_batches[:1]} if self.global_batches
                 else {"grad_accums": self.grad_accums[:1]} if self.grad_accums else {})
        return {**super().smoke_overrides(), **first}

    def batches(self, world_size: int) -> list:
        """The global batches a launch trains: the sweep, or micro_batch x world size x each accumulation."""
        return self.global_batches or [self.micro_batch * accum * world_size for accum in self.grad_accums or [self.grad_accum]]

    def baseline_batches(self) -> "list[tuple[int, int]]":
        """[(global batch, the world size N it stands in for)] that a 1-rank launch trains beside the sweep:
        each swept global batch / N, an N-rank run's work per rank, where the sweep lacks it (largest first)."""
        found: dict = {}
        for ranks in sorted(self.baselines_for or ()):
            for batch in self.global_batches or ():
                per_rank = batch // ranks
                if batch % ranks == 0 and per_rank % self.micro_batch == 0 and per_rank not in self.global_batches:
                    found.setdefault(per_rank, ranks)
        return sorted(found.items(), reverse=True)


def grad_accum_for(global_batch: int, world_size: int, micro_batch: int) -> int:
    """Micro-batches per rank per step; the planner has already refused a global batch that does not divide."""
    return global_batch // (world_size * micro_batch)


def training_recipe(params: dict) -> str:
    """How a training run trained, in words: its precision, and whatever departs from fp32 weights and
    AdamW (runs trained differently are different workloads, never one series)."""
    parts = [params["precision"]]
    if params.get("weights_dtype", "float32") != "float32":
        parts.append("bf16 weights")
    if params.get("activation_checkpointing"):
        parts.append("checkpointing")
    if params.get("optimizer", "adamw") != "adamw":
        parts.append(params["optimizer"])
    return ", ".join(parts)


# --- warm-up -----------------------------------------------------------------------------------

WARMUP_WINDOW = 3  # consecutive warm-up steps that must agree before timing starts
# DDP's reducer times its first 10 iterations (its forward calls outside no_sync(): one a step)
# with CUDA events, and each next such forward waits for them: until then the CPU cannot run ahead
# of the GPU, and a step bound by launching kernels is slower at a level of its own (quick's gpt2
# on 2x H200: 28.5-32 ms, then 26.0 ms), steady enough to pass the warm-up's window.
SYNCED_STEPS = 11
# On a GPU, untimed before each batch of timed steps: timed from an idle GPU, a step waits on the
# host's first launches, which in training the step before overlaps (quick's first of 20 timed gpt2
# steps on one H100: 28.8-31.7 ms against the others' 27.4 ms, a CV of 1.1-3.4% from it alone).
PRIMING_STEPS = 1


def least_warmup_steps(warmup_steps: int, steps_taken: int, synced_on_gpu: bool) -> int:
    """The plan's warm-up steps, and where a wrapper times its first steps as DDP's reducer does, on a
    GPU (synced_on_gpu: bench/agent/training.py's Strategy.synced_warmup), enough to leave those steps
    behind (a launch's later global batches train the same wrapped model, past them)."""
    return max(warmup_steps, SYNCED_STEPS - steps_taken) if synced_on_gpu else warmup_steps


# --- the suites --------------------------------------------------------------------------------


class TrainingSuite(Suite):
    """A suite that trains a model preset on synthetic data over a sweep of global batches."""

    headline_metric = "step_time_s"
    identity_params = ("model", "global_batch")
    recorded_params = ("num_params", "train_flops_per_sample")
    # The params a step's time hangs on: a figure's recipe, which an expected range holds for alike.
    recipe_params: ClassVar[tuple] = ("model", "micro_batch", "seq_len", "grad_accum", "precision", "compile", "weights_dtype",
                                      "activation_checkpointing", "optimizer")
    # Its 1-GPU run trains the plain model, unwrapped: what the family's suites that wrap even one GPU
    # scale against, and show beside their own strategies (of_plain_model).
    plain_model: ClassVar[bool] = False

    @functools.cached_property
    def schema(self) -> dict:
        own = Suite.schema.func(self)
        shared = json.loads(SHARED_SCHEMA.read_text())["$defs"]
        shared["params"] = resolved(shared["params"], str(SHARED_SCHEMA))
        return {**own, "$defs": merged(shared, own.get("$defs", {}))}

    def check_plan(self, params: TrainingParams, host: Capabilities, *, world_size: int, transport: str, nodes: int) -> None:
        check_model(self.name, params, world_size)

    def configurations(self, params: TrainingParams, world_size: int, host: Capabilities) -> int:
        return len(params.batches(world_size)) + len(params.baseline_batches())

    def one_rank_params(self, entry_params: dict, world_sizes: list) -> dict:
        """A swept global batch G run on N ranks is scaled against one rank doing its work per rank
        (G / N: the same micro-batch and accumulation), not only against one rank accumulating N times
        as many micro-batches: the 1-rank launch trains those global batches too (baseline_batches)."""
        scaled = sorted(ranks for ranks in world_sizes if ranks > 1)
        return {**entry_params, "baselines_for": scaled} if scaled and entry_params.get("global_batches") else entry_params

    def planned_value(self, run_params: dict, key: str):
        """A baseline run's global batch stands for the N-rank run's it was measured for."""
        value = run_params.get(key)
        return value * run_params["baseline_for"] if key == "global_batch" and run_params.get("baseline_for") else value

    def strategy(self, params: dict) -> str:
        """How a run spreads the model over its ranks, in a few words for legends and tables: the suite's
        name, or the way a suite of several ways took."""
        return self.name

    def configuration(self, run: Run) -> tuple:
        p = run.params
        return (self.name, p["model"], training_recipe(p), p.get("seq_len"), p["micro_batch"], p.get("global_batch"), run.world_size)

    def label(self, run: Run) -> str:
        p = run.params
        return f"{p['model']} {training_recipe(p)}, batch {p.get('global_batch')}, {ranks_label(run.world_size, run.on_gpu)}"

    def figures(self, run: Run) -> list:
        """The step's time and, scaled against a 1-GPU run (derived), its scaling efficiency (whose
        spread goes as one over the step's), by the run's recipe."""
        recipe = {"params": {key: run.params[key] for key in self.recipe_params if key in run.params}}
        step = Figure.median(run, "step_time_s", f"{self.name}_step_time_s", "s", False, **recipe)
        scaling = run.derived.get("scaling_efficiency_fraction")
        if run.world_size == 1 or scaling is None:
            return [step]
        low, high = step.spread
        spread = (scaling * step.value / high, scaling * step.value / low) if step.value and low and high else None
        return [step, Figure.of(run, f"{self.name}_scaling_efficiency_fraction", "of ideal", True, scaling, spread=spread, **recipe)]

    def baselines(self, runs: "list[Run]") -> dict:
        """id(run) -> the 1-GPU run it is scaled against, for every ok run of this suite among one host's
        runs that has one."""
        raise NotImplementedError

    def pacing(self, runs: "list[Run]") -> Pacing:
        return pacing_of_runs(runs)

    def settled_together(self, entry_params: dict, host: Capabilities, world_sizes: list, nodes: int, settled: dict) -> dict:
        """`micro_batch: gpu-bound`: one micro-batch for the plan's entries that ask it."""
        found = auto.gathered(self, entry_params, host, world_sizes, nodes, settled.get(auto.GPU_BOUND))
        return {**settled, auto.GPU_BOUND: found} if found else settled

    def resolved_params(self, entry_params: dict, host: Capabilities, world_sizes: list, nodes: int, settled: dict) -> dict:
        return auto.resolve(self, entry_params, host, world_sizes, nodes, settled.get(auto.GPU_BOUND))

    def least_gpu_bound(self, params: TrainingParams, host: Capabilities, world_sizes: list) -> "int | None":
        """The smallest micro-batch whose steps the cost model expects the GPU, not the host, to pace
        (`micro_batch: gpu-bound`); None where it cannot tell."""
        return None

    def memory_setup(self, params: TrainingParams, world_size: int, nodes: int) -> memory.Setup:
        """What the memory estimate reads of a launch of the entry: by default a full copy on each rank."""
        return memory.Setup(
            model=params.model, strategy="replicated", shards=1, micro_batch=params.micro_batch, seq_len=params.seq_len,
            precision=params.precision, weights_dtype=params.weights_dtype, optimizer=params.optimizer,
            checkpointing=params.activation_checkpointing,
            accumulating=any(grad_accum_for(b, world_size, params.micro_batch) > 1 for b in params.batches(world_size)))

    def derive_scaling(self, runs: "list[Run]") -> None:
        """Set derived.scaling_efficiency_fraction on every ok run of this suite among one host's runs."""
        raise NotImplementedError

    def derive_prediction(self, runs: "list[Run]", launches: list) -> None:
        """Set the communication model's figures on every ok N-GPU run of this suite among one host's runs
        (derived exposed_comm_s, predicted_step_time_s and the collectives' times), a note where an input
        is missing."""
        raise NotImplementedError

    def priced(self, params: TrainingParams, preset: str, world_size: int, host: Capabilities):
        """The suite's cost model of one launch (a bench.suites.training.cost.Priced)."""
        raise NotImplementedError

    def launch_seconds(self, params: TrainingParams, preset: str, world_size: int, host: Capabilities) -> float:
        return self.priced(params, preset, world_size, host).seconds

    def measured_seconds(self, params: TrainingParams, preset: str, world_size: int, host: Capabilities) -> float:
        return self.priced(params, preset, world_size, host).measured_s

    def host_paced(self, params: TrainingParams, preset: str, world_size: int, host: Capabilities) -> bool:
        return self.priced(params, preset, world_size, host).host_paced

    def expected_samples(self, params: TrainingParams, preset: str, world_size: int, host: Capabilities, halfwidth: float) -> int:
        if self.host_paced(params, preset, world_size, host):
            return HOST_PACED_SAMPLES  # where its sampling stops (bench/common/sampling.py)
        return super().expected_samples(params, preset, world_size, host, halfwidth)

    def derive(self, results: HostResults) -> None:
        derive_pacing(results.runs, self)
        self.derive_scaling(results.runs)
        self.derive_prediction(results.runs, results.launches)

    def warnings(self, run: Run, results: HostResults) -> list:
        if run.world_size == 1:  # its own baseline (fsdp's: FSDP's own cost against the plain model, not a scaling)
            return []
        found = results.once(f"{self.name}.baselines", lambda: self.baselines(results.runs))
        return scaling_warnings(run, found.get(id(run)), results.busy_shares)


def of_plain_model(run: Run) -> bool:
    """Whether the run's suite is the family's plain one (TrainingSuite.plain_model)."""
    suite = suites.registry().get(run.suite)
    return isinstance(suite, TrainingSuite) and suite.plain_model


def check_model(suite: str, params: TrainingParams, world_size: int) -> None:
    """What any training suite asks of a plan entry before a launch: the model's extra installed, a
    recipe someone trains with, a seq_len the model allows, global batches the ranks divide."""
    if params.model in UNET_CONFIGS and importlib.util.find_spec("diffusers") is None:
        raise PlanError(
            f"{suite}: model {params.model!r} needs diffusers, which is not installed for {sys.executable}; "
            f"install the '{UNET_EXTRA}' extra (pip install 'ddpbench[{UNET_EXTRA}]', or pip install diffusers) or choose a GPT model"
        )
    if params.weights_dtype == "bfloat16" and params.precision != "bf16":
        raise PlanError(f"{suite}: weights_dtype bfloat16 needs precision bf16 (fp32 compute over bf16 weights is not a recipe "
                        "anyone trains with); set precision: bf16")
    if params.model in TRANSFORMER_PRESETS:
        block_size = TRANSFORMER_PRESETS[params.model].block_size
        if params.seq_len is None:
            raise PlanError(f"{suite}: model {params.model!r} needs seq_len (tokens per sample); add it to the entry's params")
        if params.seq_len > block_size:
            raise PlanError(f"{suite}: seq_len {params.seq_len} is longer than model {params.model!r} allows ({block_size}); lower seq_len")
    for global_batch in params.global_batches or []:
        if global_batch % (world_size * params.micro_batch):
            raise PlanError(
                f"{suite}: global batch {global_batch} is not divisible by world size {world_size} x micro_batch "
                f"{params.micro_batch}; choose a multiple of {world_size * params.micro_batch}"
            )
