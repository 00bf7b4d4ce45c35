"""The fsdp suite: training step time of a model preset under FSDP2 (fully_shard) on synthetic data,
the ddp suite's figures for sharded data parallelism: full sharding (ZeRO-3), grad_op (ZeRO-2-like)
and hybrid (HSDP, over nodes). A global batch is reached by micro-batches with gradient sync on the
last only, world sizes from 1. Its ranks' part is ranks.py, its cost model cost.py, the figures it
derives across runs (scaling against the ddp suite's plain 1-GPU run, the compute + exposed
communication model's prediction from the all_gather and reduce_scatter sweeps) derived.py, its report's part report/; what it shares with the
ddp suite is the training family, bench/suites/training/. Before a launch, the family's memory estimate
(memory.py) refuses a configuration that cannot fit."""

from __future__ import annotations

from bench.common.host import Capabilities
from bench.common.run import Run
from bench.common.transports import backend_for, ranks_label
from bench.common.units import human_bytes
from bench.errors import PlanError

from bench.suites.training import memory
from bench.suites.fsdp import cost, derived
from bench.suites.fsdp.params import Params
from bench.suites.training import TrainingSuite, grad_accum_for, training_recipe


def fsdp_recipe(params: dict) -> str:
    """The training recipe, and a reduce-scatter in bf16 where it is (half the bytes: another workload)."""
    return training_recipe(params) + (", bf16 reduce" if params.get("reduce_dtype") == "bf16" else "")


def memory_setup(params: Params, world_size: int, nodes: int) -> memory.Setup:
    """What the estimate reads of an entry's launch: hybrid shards over a node's ranks, the others over all."""
    return memory.Setup(
        model=params.model, strategy=params.sharding, shards=world_size // nodes if params.sharding == "hybrid" else world_size,
        micro_batch=params.micro_batch, seq_len=params.seq_len, precision=params.precision, weights_dtype=params.weights_dtype,
        optimizer=params.optimizer, checkpointing=params.activation_checkpointing, reduce_dtype=params.reduce_dtype,
        accumulating=any(grad_accum_for(b, world_size, params.micro_batch) > 1 for b in params.batches(world_size)),
    )


class FSDP(TrainingSuite):
    report_order = 40
    Params = Params
    # The figures derived across a host's runs (TrainingSuite's hooks): derived.py's.
    baselines = staticmethod(derived.baselines)
    derive_scaling = staticmethod(derived.derive_scaling)
    derive_prediction = staticmethod(derived.derive_prediction)
    priced = staticmethod(cost.priced)  # its cost model (TrainingSuite's launch_seconds, measured_seconds)
    least_gpu_bound = staticmethod(cost.least_gpu_bound)
    memory_setup = staticmethod(memory_setup)
    identity_params = ("model", "sharding", "global_batch")
    moves_collective_data = True
    recipe_params = TrainingSuite.recipe_params + ("sharding", "reduce_dtype")

    def check_placement(self, params: Params, *, nodes: int, ranks_per_node: "int | None") -> None:
        if params.sharding != "hybrid":
            return
        if nodes < 2:
            raise PlanError("fsdp: sharding hybrid (HSDP) shards within each node and replicates across nodes, and this launch "
                            "runs on one node; use sharding full, or run the entry on a group of hosts (the hosts file's groups:) "
                            "or a slurm host with nodes: 2 or more")
        if ranks_per_node == 1:
            raise PlanError("fsdp: sharding hybrid over 1 rank per node has nothing to shard within a node (it is DDP across "
                            "nodes); use world sizes of 2 or more ranks per node, or sharding full")

    def check_plan(self, params: Params, host: Capabilities, *, world_size: int, transport: str, nodes: int) -> None:
        super().check_plan(params, host, world_size=world_size, transport=transport, nodes=nodes)
        self.check_placement(params, nodes=nodes, ranks_per_node=world_size // nodes)
        _check_memory(params, host, world_size, nodes, on_gpu=backend_for(transport, host.cuda) == "nccl")

    def nccl_collectives(self, params: Params) -> list:
        gathers = [("its parameters' all-gather", "AllGather"), ("its gradients' reduce-scatter", "ReduceScatter")]
        return gathers + ([("its replicas' all-reduce", "AllReduce")] if params.sharding == "hybrid" else [])

    def nccl_calls(self, run: Run) -> list:
        functions = ["AllGather", "ReduceScatter"] + (["AllReduce"] if run.params["sharding"] == "hybrid" else [])
        return [(function, None) for function in functions]

    def collective_bytes(self, run: Run) -> "float | None":
        """The all-gathers and reduce-scatters, (n-1)/n of their sizes; hybrid's all-reduce across nodes, 2(n-1)/n."""
        n = run.world_size
        gather, scatter = run.median("all_gather_bytes"), run.median("reduce_scatter_bytes")
        across = run.median("all_reduce_bytes") or 0.0
        return None if gather is None or scatter is None else (gather + scatter + 2 * across) * (n - 1) / n

    def strategy(self, params: dict) -> str:
        return f"fsdp {params['sharding']}" + (", bf16 reduce" if params.get("reduce_dtype") == "bf16" else "")

    def configuration(self, run: Run) -> tuple:
        p = run.params
        return (self.name, p["model"], fsdp_recipe(p), p["sharding"], p.get("seq_len"), p["micro_batch"], p.get("global_batch"),
                run.world_size)

    def label(self, run: Run) -> str:
        p = run.params
        return f"{p['model']} {fsdp_recipe(p)}, fsdp {p['sharding']}, batch {p.get('global_batch')}, {ranks_label(run.world_size, run.on_gpu)}"


def _check_memory(params: Params, host: Capabilities, world_size: int, nodes: int, on_gpu: bool) -> None:
    """The estimate against the GPU's free memory, or where the ranks train on the CPU (no GPU, or gloo)
    against the host's memory shared by its ranks; where the host does not say, nothing is refused."""
    setup = memory_setup(params, world_size, nodes)
    ranks_here = world_size // nodes
    room = (host.gpu_memory_free_bytes or host.gpu_memory_bytes) if on_gpu else host.host_memory_bytes / ranks_here
    if not room:
        return
    has = (f"the GPU has {human_bytes(room)} free" if on_gpu else
           f"{host.host_memory} gives each of the {ranks_here} rank(s) it runs here {human_bytes(room)}")
    refused = memory.refusal(setup, room, on_gpu=on_gpu, has=has)
    if refused:
        ranks = f"{setup.shards} rank{'s' if setup.shards != 1 else ''}"
        raise PlanError(f"fsdp: {params.model} with sharding {params.sharding} over {ranks} at micro_batch {params.micro_batch} {refused}")


SUITE = FSDP()
