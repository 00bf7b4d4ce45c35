"""How the agent reaches a host. Each runtime starts the agent with a plan, streams its
progress events, and returns the agent's raw result (or raises HostError)."""

from __future__ import annotations

from bench.controller.runtimes.base import AgentJob, HostError, Runtime
from bench.controller.runtimes.local import LocalRuntime
from bench.controller.runtimes.native import NativeRuntime

RUNTIMES = {"local": LocalRuntime, "native": NativeRuntime}

__all__ = ["AgentJob", "HostError", "RUNTIMES", "Runtime"]
