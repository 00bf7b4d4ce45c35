"""The ddp suite's parameters, typed (params.schema.json's $defs/params over the training suites'
shared ones): what the plan check, the cost model and the ranks read."""

from __future__ import annotations

from dataclasses import dataclass

from bench.suites.training import TrainingParams


@dataclass(frozen=True, kw_only=True)
class Params(TrainingParams):
    """params.schema.json's $defs/params."""

    bucket_cap_mb: float
    gradient_as_bucket_view: bool
    static_graph: bool
    cuda_graphs: bool
    timeline_steps: int
    count_allreduce: bool
    allreduce: str
    grad_reduce_dtype: str
