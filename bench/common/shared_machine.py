"""Hosts of one run that are one machine (the loopback demo's 127.0.0.2 and .3, two hosts-file
entries for one box): they ran their launches at the same time and took each other's CPU, so their
figures are not the machine's. ddpbench warns, in the run's output and in the report, rather than
refusing: the loopback demo is there to show the SSH path, not to measure."""

from __future__ import annotations

from collections import defaultdict


def machine(fingerprint: "dict | None") -> "tuple | None":
    """What tells one machine from another in a fingerprint: its host name's hash, CPU and memory."""
    host = (fingerprint or {}).get("host") or {}
    if not host.get("hostname_sha256"):
        return None
    return host["hostname_sha256"], ((fingerprint or {}).get("cpu") or {}).get("model"), fingerprint.get("memory_total_bytes")


def shared(hosts: list[dict]) -> list[list[str]]:
    """The names of a run's hosts (its bundle's host entries) that are one machine, in groups of two or more."""
    by_machine = defaultdict(list)
    for host in hosts:
        machine_key = machine(host.get("fingerprint"))
        if machine_key is not None:
            by_machine[machine_key].append(host["name"])
    return [names for names in by_machine.values() if len(names) > 1]


def warnings(hosts: list[dict]) -> list[str]:
    """One line per group of hosts that are one machine, with the CPU share others took while they ran."""
    lines = []
    by_name = {host["name"]: host for host in hosts}
    for names in shared(hosts):
        shares = [launch["cpu_taken_by_others_fraction"] for name in names for launch in by_name[name]["launches"]
                  if launch.get("cpu_taken_by_others_fraction") is not None]
        taken = f" (other processes took {min(shares):.0%} to {max(shares):.0%} of its CPU during their launches)" if shares else ""
        lines.append(f"hosts {', '.join(names)} are one machine (same host name, CPU and memory): they ran at the same "
                     f"time and took each other's CPU{taken}, so their figures are not that machine's; give each host "
                     "a machine of its own to measure it")
    return lines
