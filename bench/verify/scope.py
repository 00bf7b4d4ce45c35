"""What of a published bundle these hosts can rerun, found in seconds before anything runs there.

Each host of the hosts file that pairs with one of the bundle's is probed lightly (its GPUs, their
link, its CPU and cores: bench.controller.probe), and each entry of the bundle's plan is compared with
what this ddpbench would run for it and judged against what each host has (bench.common.fits: NCCL's
algorithms on a host without a GPU, more processes than cores). A host whose machine differs, or an
entry this ddpbench would run otherwise or a host cannot run, is left out, and said; where nothing
is left, the verdict is NOT COMPARABLE at once, without a fingerprint, a gate or a launch. The
fingerprints still decide after the rerun: the probe reads a few fields, and a field it cannot read
(a batch job's nodes, InfiniBand) is not held against a host.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime

from bench.common.fits import side_problem
from bench.common.protocol import parse_launch_id
from bench.common.selection import side_of
from bench.controller.errors import HostError
from bench.controller.inventory import Host, Inventory
from bench.controller.probe import Probe, probe as read_host
from bench.controller.progress import describe_s
from bench.errors import UserError
from bench.verify.compare import entry_differences
from bench.verify.machines import differs_text, light_profile, machine_words, probe_differences


def probe(host: Host) -> "Probe | None":
    """What the host's machine has (controller.probe); a host that cannot be reached is a UserError:
    nothing could run there."""
    try:
        return read_host(host)
    except HostError as err:
        raise UserError(f"host {host.name!r}: {err}; verify reads each host's GPUs before it runs anything, so every host "
                        "of the hosts file must be reachable: fix its entry or leave it out") from None


@dataclass(frozen=True)
class Scope:
    """The part of the bundle these hosts rerun: the hosts (with their groups), the plan's entries
    kept, and what is left out, each with why (the new bundle's verification.left_out)."""

    inventory: Inventory
    plan: dict
    pairs: list  # (original host, new host) of the hosts that rerun
    left_out: list
    probes: dict = field(default_factory=dict)  # new host name -> what its probe read (none for a batch scheduler's)

    @property
    def nothing(self) -> bool:
        return not self.inventory.hosts or not self.plan["suites"]

    def entries_left_out(self) -> set:
        """The indices, in the original's plan, of the entries left out."""
        return {item["entry"] for item in self.left_out if "entry" in item}


def _entries_left_out(original_plan: dict, plan: dict, tool: dict) -> list[dict]:
    """An entry of the bundle's plan that this ddpbench would run otherwise (its schemas write out
    other defaults): its runs would not be the original's. A plan-wide field that differs leaves out every entry."""
    by = f"ddpbench {tool['version']}" + (f" ({tool['git_commit'][:12]})" if tool.get("git_commit") else "")
    wide = [f"{k} {original_plan.get(k)} -> {plan.get(k)}" for k in sorted({*original_plan, *plan})
            if k not in ("name", "description", "suites") and original_plan.get(k) != plan.get(k)]
    left = []
    for index, (before, now) in enumerate(zip(original_plan["suites"], plan["suites"])):
        differ = wide or entry_differences(before, now)
        if differ:
            left.append({"entry": index, "reason": f"this ddpbench would run suites[{index}] ({before['suite']}) otherwise than "
                                                   f"the bundle's {by} did ({'; '.join(differ)}): rerun it with that version"})
    return left


def _hosts_left_out(original: dict, inventory: Inventory, pairs: list, rule: str) -> tuple[list, list, dict]:
    """(pairs that rerun, left-out records, {new host: its probe}) after probing each new host that pairs with an original one."""
    originals = {h["name"]: h for h in original["hosts"]}
    new_hosts = {h.name: h for h in inventory.hosts}
    probed = [(old, new) for old, new in pairs if new is not None and originals[old]["fingerprint"] is not None]
    with ThreadPoolExecutor(max_workers=max(1, min(16, len(probed)))) as pool:
        found = dict(zip(probed, pool.map(lambda pair: probe(new_hosts[pair[1]]), probed)))
    kept, left = [], []
    for old, new in pairs:
        host = originals[old]
        if new is None:
            left.append({"host": old, "reason": f"no host of the hosts file pairs with it (hosts paired {rule}): add one, or pair it with --host-map"})
        elif host["fingerprint"] is None:
            left.append({"host": old, "reason": f"the bundle holds no fingerprint of it (its run failed: {host.get('error') or 'no error recorded'}): nothing to compare with"})
        elif (old, new) in found and (differ := probe_differences(host["fingerprint"], found[(old, new)])):
            theirs, mine = light_profile(host["fingerprint"]), found[(old, new)]
            needs = machine_words(theirs.get("gpu_count", 0), theirs.get("gpu_model"), theirs.get("link_class"), theirs.get("cpu_model"))
            has = machine_words(len(mine.gpus), " + ".join(sorted(set(mine.gpus))), mine.link_class, mine.cpu_model)
            fields = differs_text(differ)
            left.append({"host": old, "reason": f"it ran on {needs}; host {new} has {has} ({fields}): a machine with {needs} can verify it"})
        else:
            kept.append((old, new))
    return kept, left, {new: probed for (_, new), probed in found.items() if probed is not None}


def _entries_no_host_runs(plan: dict, inventory: Inventory, kept: list, probes: dict, left: set) -> list[dict]:
    """An entry a rerunning host cannot run at all, judged as its agent would judge it (bench.common.fits)
    from what the probe read: left out before anything launches, the host named with why."""
    hosts = {host.name: host for host in inventory.hosts}
    found = []
    judged = [(new, probes[new]) for _, new in kept if new in probes and probes[new].gpus is not None]
    for index, entry in enumerate(plan["suites"]):
        if index in left:
            continue
        for new, probe in judged:
            hw = probe.capabilities()
            problem = side_problem(side_of(entry, hw.cuda), entry["world_sizes"], hw, {**entry.get("env", {}), **hosts[new].env})
            if problem:
                found.append({"entry": index, "reason": f"host {new} cannot run this {entry['suite']} entry: {problem}"})
                break
    return found


def comparable_part(original: dict, plan: dict, inventory: Inventory, pairs: list, rule: str) -> Scope:
    """The Scope of a rerun of `original` (its plan as this ddpbench checked it: `plan`) on `inventory`."""
    left = _entries_left_out(original["plan"], plan, original["tool"])
    kept, hosts_left, probes = _hosts_left_out(original, inventory, pairs, rule)
    running = {new for _, new in kept}
    for group in inventory.groups:  # a group runs one job: all its members, or none
        missing = [name for name in group.hosts if name not in running]
        if missing and len(missing) < len(group.hosts):
            for old, new in [p for p in kept if p[1] in group.hosts]:
                hosts_left.append({"host": old, "reason": f"its host {new} is in group {group.name}, whose host {missing[0]} does not rerun"})
            running -= set(group.hosts)
    kept = [(old, new) for old, new in kept if new in running]
    left += _entries_no_host_runs(plan, inventory, kept, probes, {item["entry"] for item in left})
    entries_left = {item["entry"] for item in left}
    rerun_plan = {**plan, "suites": [e for i, e in enumerate(plan["suites"]) if i not in entries_left]}
    rerun_hosts = Inventory(hosts=tuple(h for h in inventory.hosts if h.name in running),
                            groups=tuple(g for g in inventory.groups if set(g.hosts) <= running))
    return Scope(rerun_hosts, rerun_plan, kept, left + hosts_left, {name: found for name, found in probes.items() if name in running})


def unused_hosts(inventory: Inventory, scope: Scope) -> list[str]:
    """Hosts of the hosts file that rerun nothing (they pair with no host of the bundle, or theirs is left out)."""
    return [h.name for h in inventory.hosts if h not in scope.inventory.hosts]


def _seconds_between(start: "str | None", end: "str | None") -> "float | None":
    if not start or not end:
        return None
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


@dataclass(frozen=True)
class Recorded:
    seconds: float
    text: str


def recorded(original: dict, scope: Scope) -> Recorded:
    """What the rerun's part took where the bundle was made, as the bundle records it: its kept launches,
    host by host in parallel, and its time outside its launches (start-up, fingerprints, gate). Said
    beside the rerun's price, never in its place: its author wrote it, on another machine."""
    left = scope.entries_left_out()
    hosts = {h["name"]: h for h in original["hosts"]}

    def launches_s(host: dict, leaving_out: set) -> float:
        return sum(l["duration_s"] for l in host["launches"] if (parse_launch_id(l["id"]) or (None,))[0] not in leaving_out)

    slowest_all = max((launches_s(h, set()) for h in original["hosts"]), default=0.0)
    wall = _seconds_between(original.get("started_at"), original.get("finished_at"))
    outside = max(0.0, wall - slowest_all) if wall is not None else 0.0
    slowest = max((launches_s(hosts[old], left) for old, _ in scope.pairs), default=0.0)
    notes = [f"{describe_s(slowest)} of launches and {describe_s(outside)} of start-up"]
    if not original["complete"]:
        notes.append(f"not counted: the launches the original did not finish ({original.get('incomplete_reason') or 'incomplete'})")
    return Recorded(outside + slowest, f"the bundle records {describe_s(outside + slowest)} on its own machine ({'; '.join(notes)})")
