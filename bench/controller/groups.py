"""Multi-node groups: one torchrun job over several hosts, c10d rendezvous on the first.

Every member is prepared (connected, checked, the agent copied) before any agent starts, so
that no node waits at the rendezvous for a member that could never come. When one member
fails, the others are ended: their ranks would otherwise wait for it until the rendezvous
times out.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from bench.common.protocol import Placement
from bench.controller.inventory import Group
from bench.controller.runtimes import HostError


def run_group(group: Group, members: list, run_one: Callable) -> None:
    """members: the HostRun of each host, in the group's order; run_one(member) runs one agent."""
    first = members[0].host
    rendezvous = f"{group.rendezvous_address or first.address}:{group.rendezvous_port}"
    for rank, member in enumerate(members):
        ifname = group.socket_ifname or member.host.socket_ifname
        member.job.placement = Placement(len(members), rank, rendezvous, f"{member.job.run_id}-{group.name}")
        member.job.extra_env = {"NCCL_SOCKET_IFNAME": ifname, "GLOO_SOCKET_IFNAME": ifname} if ifname else {}

    def end_the_others(failed) -> None:
        for other in members:
            if other is not failed:
                other.runtime.cancel(f"host {failed.host.name} of group {group.name} failed")

    def prepare(member) -> None:
        try:
            member.runtime.prepare(member.job)
        except HostError as err:
            member.error = str(err)
            end_the_others(member)

    def run(member) -> None:
        if member.error:  # its prepare failed: run() would only retry it
            return
        run_one(member)
        if member.error:
            end_the_others(member)

    with ThreadPoolExecutor(max_workers=len(members), thread_name_prefix=f"group-{group.name}") as pool:
        list(pool.map(prepare, members))
        list(pool.map(run, members))
