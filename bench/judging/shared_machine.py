"""A machine others were using while it was measured: a host whose launches other processes took a
share of the CPU from (each launch records it), and hosts of one run that are one machine (the
loopback demo's 127.0.0.2 and .3, two hosts-file entries for one box: they ran their launches at the
same time and took each other's CPU). Their figures are not the machine's. ddpbench says so, in the
run's output and in the report, rather than refusing: nothing measured is lost."""

from __future__ import annotations

from collections import defaultdict

# Above this share of the machine's CPU taken by other processes during a launch, its figures are
# the machine's shared with them. Measured per launch: on quiet machines, 0.0002 to 0.0014 (the
# published bundles, H100 hosts); on the 2-core development machine with the report tests' plan
# (2-rank collectives, 1- and 2-rank ddp of the tiny GPT), 0.68 to 0.71 with two `while 1: pass`
# burners beside it and 0.69 to 0.80 while other users' tests ran. 0.10 sits far from both.
BUSY_ABOVE_FRACTION = 0.10


def busy(share: "float | None") -> bool:
    return share is not None and share > BUSY_ABOVE_FRACTION


def busy_shares(launches: list) -> dict:
    """launch id -> the CPU share other processes took while it ran, for the launches that ran on a busy machine."""
    return {launch["id"]: launch["cpu_taken_by_others_fraction"] for launch in launches
            if busy(launch.get("cpu_taken_by_others_fraction"))}


# The share of the CPU others can have taken from a run that still ran: past it, a record of more
# (1.0) would excuse any difference.
MOST_TAKEN_FRACTION = 0.99


def most_slowed(share: "float | None") -> float:
    """How many times slower other processes taking `share` of the CPU can have made a run: the CPU time it
    lost, and as much again waiting (ranks wait on each other, each on another's lost time); 1 where the
    machine was not busy."""
    if not busy(share):
        return 1.0
    return (1 / (1 - min(share, MOST_TAKEN_FRACTION))) ** 2


def verdict_reason(shares: tuple) -> "str | None":
    """Why verify cannot put a difference down to the machine where others used it during either run
    (shares: the CPU share others took during the original's and the new run's launches)."""
    sides = [f"{name} {share:.0%}" for name, share in zip(("original", "new"), shares) if busy(share)]
    if not sides:
        return None
    return (f"other processes took {' and '.join(sides)} of the machine's CPU while it ran (above {BUSY_ABOVE_FRACTION:.0%}): "
            f"the difference may be theirs; rerun on an otherwise idle machine to settle it")


def beyond_reason(shares: tuple, slower: str, apart: float) -> "str | None":
    """Why a busy machine cannot explain a difference of at least `apart` times, by which the `slower`
    side ("original" or "new") was the slower, or None where it can: the share others took of that
    side's CPU bounds how much slower they can have made it (most_slowed)."""
    share = shares[("original", "new").index(slower)]
    if apart <= most_slowed(share):
        return None
    taken_words = f"took {share:.0%} of its CPU" if busy(share) else "were not busy"
    return (f"the {slower} run is at least {apart:.3g} times slower, more than the other processes on its machine can "
            f"explain (they {taken_words}: at most {most_slowed(share):.3g} times)")


def taken(shares: list) -> str:
    """"62%" or "45% to 80%": the shares other processes took, as a sentence wants them."""
    low, high = min(shares), max(shares)
    return f"{low:.0%}" if f"{low:.0%}" == f"{high:.0%}" else f"{low:.0%} to {high:.0%}"


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


def gpus_held(fingerprint: "dict | None") -> list[str]:
    """The GPUs other processes were on before the first launch (the fingerprint's health record):
    ["GPU0 (2 processes, 3.1 GiB)"]; a GPU's time and memory are then not the run's alone."""
    held = []
    for gpu in (((fingerprint or {}).get("health") or {}).get("gpus") or []):
        processes = gpu.get("processes") or []
        if processes:
            memory = sum(p.get("used_memory_bytes") or 0 for p in processes) / 2**30
            held.append(f"GPU{gpu['index']} ({len(processes)} process{'es' * (len(processes) > 1)}, {memory:.1f} GiB)")
    return held


def busy_warnings(hosts: list[dict]) -> list[str]:
    """One line per host whose launches ran while other processes took more than BUSY_ABOVE_FRACTION of
    its CPU (hosts that are one machine are `warnings`' instead: each other's is the share there), and
    one per host whose GPUs other processes were on before the first launch."""
    one_machine = {name for names in shared(hosts) for name in names}
    lines = []
    for host in hosts:
        held = gpus_held(host.get("fingerprint"))
        if held:
            lines.append(f"host {host['name']}: other processes were on {', '.join(held)} before the first launch, so its "
                         "figures may be theirs too; rerun when nothing else uses its GPUs")
        launches = [launch for launch in host["launches"]
                    if host["name"] not in one_machine and busy(launch.get("cpu_taken_by_others_fraction"))]
        if launches:
            shares = [launch["cpu_taken_by_others_fraction"] for launch in launches]
            lines.append(f"host {host['name']}: other processes took {taken(shares)} of the machine's CPU during "
                         f"{len(launches)} of its {len(host['launches'])} launches ({', '.join(l['id'] for l in launches)}), "
                         "so their figures are this machine's shared with them, not its own; rerun on a quiet machine "
                         "(nothing else running) to measure it")
    return lines
