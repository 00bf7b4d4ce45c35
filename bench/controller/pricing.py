"""What a plan should take on the hosts of a hosts file, priced before any agent starts as each host's
agent prices it (bench/agent/estimate.py: the suites' cost models on what the host has, a CPU host
stretched by its load now), from a light probe of each host (probe.py); and the bound it must keep,
--max-hours: past it, `run` and `verify` launch nothing without a yes.

A host whose probe cannot say what it has (a batch scheduler's nodes, a GPU driver without nvidia-smi)
is priced on the capabilities its caller gives (verify: the bundle's fingerprint of its machine), else
not priced, and said so. The hosts run in parallel: the plan takes its slowest host's time."""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

from bench.agent.estimate import plan_seconds, slowdown_at
from bench.agent.planning import plan_launches
from bench.common import protocol
from bench.common.host import Capabilities
from bench.controller.errors import HostError
from bench.controller.inventory import Inventory
from bench.controller.probe import Probe, probe
from bench.controller.progress import SAID_SLOWDOWN, describe_s
from bench.errors import PlanError, UserError


@dataclass(frozen=True)
class HostPrice:
    host: str
    seconds: "float | None"  # None: not priced
    slowdown: float = 1.0  # how many times slower than idle the host's CPU is now (a CPU host's)
    not_priced: str = ""  # why it is not
    host_paced_s: float = 0.0  # of seconds, the launches whose steps its CPU is expected to pace


@dataclass(frozen=True)
class Price:
    hosts: "tuple[HostPrice, ...]"

    @property
    def seconds(self) -> float:
        """The slowest priced host's seconds."""
        return max((h.seconds for h in self.hosts if h.seconds is not None), default=0.0)

    @property
    def text(self) -> str:
        """"estimated 3 min 13 s by the cost model on these hosts (host local's CPU 3.6x slower than idle: other processes)".
        Launches paced by the host's CPU are said too: across machines of one GPU kind their time moves with
        the CPU (1x H100s 1.5x apart, benchmarks/results/pacing_h100.md)."""
        if all(h.seconds is None for h in self.hosts):
            return "not priced: the cost model knows none of these hosts before its agent runs"
        said = [f"host {h.host}'s CPU {h.slowdown:.1f}x slower than idle: other processes"
                for h in self.hosts if h.seconds is not None and h.slowdown >= SAID_SLOWDOWN]
        said += [f"host {h.host}: {describe_s(h.host_paced_s)} of it in launches paced by its CPU, not its GPUs, which a slower CPU stretches"
                 for h in self.hosts if h.seconds is not None and h.host_paced_s > 0]
        return (f"estimated {describe_s(self.seconds)} by the cost model on these hosts"
                + (f" ({'; '.join(said)})" if said else ""))

    def not_priced(self) -> "list[str]":
        return [f"host {h.host} is not priced before it runs ({h.not_priced}): --max-hours does not bound it"
                for h in self.hosts if h.seconds is None]


def price(inventory: Inventory, plan: dict, probes: "dict[str, Probe | str | None]", skip: "dict[str, frozenset] | None" = None,
          known: "dict[str, Capabilities] | None" = None) -> Price:
    """The plan on each host of the inventory as its agent would price it: on what its probe read (a
    text: why it could not be read), else on `known`, what the caller knows of its machine; at its load
    now; `skip`: per host, the launches a resumed run finished."""
    found = []
    for host in inventory.hosts:
        read = probes.get(host.name)
        if isinstance(read, str):
            found.append(HostPrice(host.name, None, not_priced=read))
            continue
        capabilities = (read.capabilities() if read is not None else None) or (known or {}).get(host.name)
        if capabilities is None:
            found.append(HostPrice(host.name, None, not_priced="what it has is known once its agent runs"))
            continue
        slowdown = 1.0
        if not capabilities.cuda and read is not None and read.load is not None:
            slowdown = slowdown_at(read.load, capabilities.logical_cpus)
        group = inventory.group_of(host.name)
        nodes = protocol.Placement(len(group.hosts), group.hosts.index(host.name)) if group else protocol.Placement()
        try:
            launches = plan_launches(plan, capabilities, nodes, host.env)
        except PlanError as err:
            found.append(HostPrice(host.name, None, not_priced=f"its agent will judge the plan: {err}"))
            continue
        done = (skip or {}).get(host.name, frozenset())
        runnable = [launch for launch in launches if not launch.skipped_reason and launch.id not in done]
        seconds, host_paced_s = plan_seconds(runnable, capabilities, slowdown)
        found.append(HostPrice(host.name, seconds, slowdown, host_paced_s=host_paced_s))
    return Price(tuple(found))


def probe_all(inventory: Inventory) -> "dict[str, Probe | str | None]":
    """Every host of the inventory probed, in parallel: its Probe, None where it runs elsewhere (a batch
    scheduler's nodes), or why it could not be read."""
    def read(host) -> "Probe | str | None":
        try:
            return probe(host)
        except HostError as err:
            return str(err)

    with ThreadPoolExecutor(max_workers=max(1, min(16, len(inventory.hosts)))) as pool:
        return dict(zip((h.name for h in inventory.hosts), pool.map(read, inventory.hosts)))


def hold(command: str, cost: Price, max_hours: float, assume_yes: bool, ask: "Callable[[str], bool] | None") -> None:
    """Refuse a plan estimated past max_hours, unless the reader said yes (--yes, or at the prompt)."""
    if cost.seconds <= max_hours * 3600 or assume_yes:
        return
    question = f"{command} is {cost.text}, past --max-hours {max_hours:g}"
    if ask is not None and ask(f"{question}: run it? [y/N] "):
        return
    raise UserError(f"{question}; pass --yes to run it anyway, or --max-hours {math.ceil(cost.seconds / 360) / 10:g} or more")
