"""The suites. Each module has its typed `Params` (built from the plan entry the schema defaulted),
`check_plan(params, hardware, *, world_size, transport, nodes)`, which raises a PlanError for what
only the host can judge, and `run(context, entry params, emit)`, which emits one record per configuration."""

from bench.agent.suites import collectives, copy, ddp

SUITES = {"collectives": collectives, "copy": copy, "ddp": ddp}
