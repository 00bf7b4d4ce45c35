"""How the agent reaches a host. Each runtime starts the agent with a plan, streams its
progress events, and returns the agent's raw result (or raises HostError)."""

from __future__ import annotations

from bench.controller.runtimes.base import AgentJob, HostError, Runtime
from bench.controller.runtimes.docker import DockerRuntime
from bench.controller.runtimes.local import LocalRuntime
from bench.controller.runtimes.native import NativeRuntime
from bench.controller.runtimes.slurm import SlurmRuntime

RUNTIMES = {"local": LocalRuntime, "native": NativeRuntime, "docker": DockerRuntime, "slurm": SlurmRuntime}

__all__ = ["AgentJob", "HostError", "RUNTIMES", "Runtime"]
