"""The ddp suite's parameters, typed (params.schema.json's $defs/params): what the plan checks,
the cost model and the ranks read."""

from __future__ import annotations

from dataclasses import dataclass

from bench.suites.params import SampledParams


@dataclass(frozen=True)
class Params(SampledParams):
    """params.schema.json's $defs/params."""

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
    bucket_cap_mb: float
    gradient_as_bucket_view: bool
    static_graph: bool
    compile: bool
    cuda_graphs: bool
    profile_steps: int
    timeline_steps: int
    count_allreduce: bool
    seed: int
    allreduce: str
    grad_reduce_dtype: str
    seq_len: "int | None" = None
    global_batches: "list | None" = None

    def batches(self, world_size: int) -> list:
        """The global batches a launch trains: the sweep, or one of micro_batch x grad_accum per rank."""
        return self.global_batches or [self.micro_batch * self.grad_accum * world_size]
