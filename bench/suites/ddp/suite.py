"""The ddp suite: training step time of a model preset under DistributedDataParallel on synthetic
data, a global batch reached by micro-batches under no_sync(), world sizes from 1 so that the
1-GPU baseline is in the same run. Its ranks' part is ranks.py, its cost model cost.py, the figures
it derives across runs (scaling, seed 002's prediction) derived.py, its report's part report.py."""

from __future__ import annotations

import importlib.util
import sys
from bench.common.host import Capabilities
from bench.common.transports import backend_for, on_gpu, ranks_label
from bench.models.shapes import GPT_PRESETS, UNET_CONFIGS, UNET_EXTRA
from bench.suites.base import HostResults, Suite, median
from bench.suites.ddp import cost, derived
from bench.suites.ddp.params import Params
from bench.suites.params import PlanError


def training_recipe(params: dict) -> str:
    """How a ddp run trained, in words: its precision, and whatever departs from fp32 weights and AdamW
    (runs trained differently are different workloads, never one series)."""
    parts = [params["precision"]]
    if params.get("weights_dtype", "float32") != "float32":
        parts.append("bf16 weights")
    if params.get("activation_checkpointing"):
        parts.append("checkpointing")
    if params.get("optimizer", "adamw") != "adamw":
        parts.append(params["optimizer"])
    return ", ".join(parts)


class DDP(Suite):
    name = "ddp"
    report_order = 30
    Params = Params
    headline_metric = "step_time_s"
    identity_params = ("model", "global_batch")

    def check_plan(self, params: Params, host: Capabilities, *, world_size: int, transport: str, nodes: int) -> None:
        if params.allreduce == "copy_engine":
            _check_copy_engine(params, host, transport, nodes)
        if params.model in UNET_CONFIGS and importlib.util.find_spec("diffusers") is None:
            raise PlanError(
                f"ddp: model {params.model!r} needs diffusers, which is not installed for {sys.executable}; "
                f"install the '{UNET_EXTRA}' extra (pip install 'ddpbench[{UNET_EXTRA}]', or pip install diffusers) or choose a GPT model"
            )
        if params.cuda_graphs and backend_for(transport, host.cuda) == "gloo":  # the ranks train on the CPU
            if not host.cuda:
                raise PlanError("ddp: cuda_graphs replays CUDA graphs, this host has no GPU; set cuda_graphs: false in the entry's cpu: override")
            raise PlanError(f"ddp: cuda_graphs replays CUDA graphs, transport {transport!r} trains on the CPU; "
                            f"run {transport!r} in an entry with cuda_graphs: false")
        if params.cuda_graphs and params.compile:
            raise PlanError("ddp: cuda_graphs and compile are both on; choose one (compile: false for the graphs of the eager model)")
        if params.weights_dtype == "bfloat16" and params.precision != "bf16":
            raise PlanError("ddp: weights_dtype bfloat16 needs precision bf16 (fp32 compute over bf16 weights is not a recipe anyone trains with); set precision: bf16")
        if params.model in GPT_PRESETS:
            block_size = GPT_PRESETS[params.model].block_size
            if params.seq_len is None:
                raise PlanError(f"ddp: model {params.model!r} needs seq_len (tokens per sample); add it to the entry's params")
            if params.seq_len > block_size:
                raise PlanError(f"ddp: seq_len {params.seq_len} is longer than model {params.model!r} allows ({block_size}); lower seq_len")
        for global_batch in params.global_batches or []:
            if global_batch % (world_size * params.micro_batch):
                raise PlanError(
                    f"ddp: global batch {global_batch} is not divisible by world size {world_size} x micro_batch "
                    f"{params.micro_batch}; choose a multiple of {world_size * params.micro_batch}"
                )

    def configurations(self, params: Params, world_size: int, host: Capabilities) -> int:
        return len(params.global_batches or [None])

    def launch_seconds(self, params: Params, preset: str, world_size: int, host: Capabilities) -> float:
        return cost.launch_seconds(params, preset, world_size, host)

    def configuration(self, run: dict) -> tuple:
        p = run["params"]
        return ("ddp", p["model"], training_recipe(p), p.get("seq_len"), p["micro_batch"], p.get("global_batch"), run["world_size"])

    def label(self, run: dict) -> str:
        p = run["params"]
        return f"{p['model']} {training_recipe(p)}, batch {p.get('global_batch')}, {ranks_label(run['world_size'], on_gpu(run))}"

    def link_name(self, run: dict) -> str:
        """allreduce copy_engine carries the gradients on the copy engines, past NCCL's transport."""
        if run["params"].get("allreduce") == "copy_engine":
            return f"{run['transport']['preset']} via copy engines"
        return super().link_name(run)

    def peer_copies(self, run: dict) -> bool:
        return run["params"].get("allreduce") == "copy_engine"

    def judged_figure(self, run: dict) -> tuple:
        return "ddp_step_time_s", median(run, "step_time_s"), None

    def baselines(self, runs: list) -> dict:
        return derived.baselines(runs)

    def derive(self, results: HostResults) -> None:
        derived.derive_scaling(results.runs)
        derived.derive_prediction(results.runs, results.launches)

    def warnings(self, run: dict, results: HostResults) -> list:
        if run["world_size"] == 1:
            return []
        found = results.once("ddp.baselines", lambda: derived.baselines(results.runs))
        return derived.warnings(run, found.get(id(run)), results.others_share)


def _check_copy_engine(params: Params, host: Capabilities, transport: str, nodes: int) -> None:
    if not host.cuda:
        raise PlanError("ddp: allreduce copy_engine moves gradients between GPUs, this host has none; use allreduce: nccl")
    if transport != "default":
        raise PlanError(f"ddp: allreduce copy_engine bypasses NCCL's transports, so it cannot measure transport {transport!r}; "
                        "run that transport with allreduce: nccl")
    if nodes > 1:
        raise PlanError(f"ddp: allreduce copy_engine runs within one host, not across {nodes}; use allreduce: nccl")
    if params.grad_reduce_dtype == "bf16":
        raise PlanError("ddp: allreduce copy_engine reduces the gradients in their own dtype; drop grad_reduce_dtype bf16 or use allreduce: nccl")


SUITE = DDP()
