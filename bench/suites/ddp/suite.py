"""The ddp suite: training step time of a model preset under DistributedDataParallel on synthetic
data, a global batch reached by micro-batches under no_sync(), world sizes from 1 so that the
1-GPU baseline is in the same run. Its ranks' part is ranks.py, its cost model cost.py, the figures
it derives across runs (scaling, the compute + exposed communication model's prediction) derived.py, its report's part report.py;
what it shares with the other training suites is the training family, bench/suites/training/."""

from __future__ import annotations

from bench.common.host import Capabilities
from bench.common.run import Run
from bench.common.transports import backend_for, with_setting
from bench.common.units import human_bytes
from bench.errors import PlanError
from bench.models.shapes import TRANSFORMER_PRESETS
from bench.suites.training import memory
from bench.suites.ddp import cost, derived
from bench.suites.ddp.params import Params
from bench.suites.training import TrainingSuite, grad_accum_for


class DDP(TrainingSuite):
    report_order = 30
    Params = Params
    # The figures derived across a host's runs (TrainingSuite's hooks): derived.py's.
    baselines = staticmethod(derived.baselines)
    derive_scaling = staticmethod(derived.derive_scaling)
    derive_prediction = staticmethod(derived.derive_prediction)
    priced = staticmethod(cost.priced)  # its cost model (TrainingSuite's launch_seconds, measured_seconds)
    least_gpu_bound = staticmethod(cost.least_gpu_bound)
    moves_collective_data = True
    plain_model = True  # one rank trains without DDP's wrapper (ranks.py)
    recipe_params = TrainingSuite.recipe_params + ("cuda_graphs", "grad_reduce_dtype", "bucket_cap_mb", "allreduce",
                                                   "gradient_as_bucket_view", "static_graph")

    def check_plan(self, params: Params, host: Capabilities, *, world_size: int, transport: str, nodes: int) -> None:
        if params.allreduce == "copy_engine":
            _check_copy_engine(params, host, transport, nodes)
        super().check_plan(params, host, world_size=world_size, transport=transport, nodes=nodes)
        if params.cuda_graphs and backend_for(transport, host.cuda) == "gloo":  # the ranks train on the CPU
            if not host.cuda:
                raise PlanError("ddp: cuda_graphs replays CUDA graphs, this host has no GPU; set cuda_graphs: false in the entry's cpu: override")
            raise PlanError(f"ddp: cuda_graphs replays CUDA graphs, transport {transport!r} trains on the CPU; "
                            f"run {transport!r} in an entry with cuda_graphs: false")
        if params.cuda_graphs and params.compile:
            raise PlanError("ddp: cuda_graphs and compile are both on; choose one (compile: false for the graphs of the eager model)")
        if backend_for(transport, host.cuda) == "gloo":
            _check_host_memory(params, host, world_size, nodes)

    def link_name(self, run: Run) -> str:
        """allreduce copy_engine carries the gradients on the copy engines, past NCCL's transport."""
        if run.params.get("allreduce") == "copy_engine":
            return with_setting(f"{run.preset} via copy engines", run)
        return super().link_name(run)

    def nccl_collectives(self, params: Params) -> list:
        return [] if params.allreduce == "copy_engine" else [("the gradients' all-reduce", "AllReduce")]

    def nccl_calls(self, run: Run) -> list:
        return [] if run.params.get("allreduce") == "copy_engine" else [("AllReduce", None)]

    def peer_copies(self, run: Run) -> bool:
        return run.params.get("allreduce") == "copy_engine"

    def collective_bytes(self, run: Run) -> "float | None":
        """The gradients' all-reduce: 2(n-1)/n of their bytes."""
        grad, n = run.median("grad_allreduce_bytes"), run.world_size
        return None if grad is None else grad * 2 * (n - 1) / n


def _check_host_memory(params: Params, host: Capabilities, world_size: int, nodes: int) -> None:
    """Ranks that train on the CPU share the host's memory (or its cgroup's limit), and the kernel's
    out-of-memory killer keeps nothing of a launch that passes it: the estimate refuses it first (on a
    GPU a run that does not fit ends as an oom run and the sweep goes on)."""
    ranks_here = world_size // nodes
    if params.model not in TRANSFORMER_PRESETS or not host.host_memory_bytes:
        return
    room = host.host_memory_bytes / ranks_here
    setup = memory.Setup(
        model=params.model, strategy="replicated", shards=1, micro_batch=params.micro_batch, seq_len=params.seq_len,
        precision=params.precision, weights_dtype=params.weights_dtype, optimizer=params.optimizer,
        checkpointing=params.activation_checkpointing,
        accumulating=any(grad_accum_for(b, world_size, params.micro_batch) > 1 for b in params.batches(world_size)),
        separate_buckets=world_size > 1 and not params.gradient_as_bucket_view)
    refused = memory.refusal(setup, room, on_gpu=False,
                             has=f"{host.host_memory} gives each of the {ranks_here} rank(s) it runs here {human_bytes(room)}")
    if refused:
        raise PlanError(f"ddp: {params.model} at micro_batch {params.micro_batch} over {world_size} rank(s) {refused}")


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
