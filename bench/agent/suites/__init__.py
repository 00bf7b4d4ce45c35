"""The suites: each one takes (context, parameters, emit) and emits one record per configuration."""

from bench.agent.suites import collectives, copy, ddp

SUITES = {"collectives": collectives.run, "copy": copy.run, "ddp": ddp.run}
