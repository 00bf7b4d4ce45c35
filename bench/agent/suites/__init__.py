"""The suites: each one takes (context, parameters, emit) and emits one record per configuration."""

from bench.agent.suites import collectives, ddp

SUITES = {"collectives": collectives.run, "ddp": ddp.run}
