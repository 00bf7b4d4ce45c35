"""Transport presets (environment for the launched ranks), what NCCL really used, and the name of
the link a run's bytes crossed, with what else a run ran under (its setting: NCCL's algorithm and
protocol, its nodes, its GPUs, its entry's env), which tells two configurations apart everywhere.

A preset only asks; NCCL_DEBUG=INFO's "via ..." lines say which link NCCL chose, its INIT lines the
nodes it saw and its TUNING lines the algorithm it ran, and a run whose transport, nodes or algorithm
do not match what was asked is marked rather than silently mislabelled. The report's series and the
benchmarks' tables label runs with link_name.

Over several nodes (hosts of a group, a slurm job's nodes, or one host's GPUs split into emulated
nodes, each with its own NCCL host id) a preset names the link between the nodes; inside a node NCCL
keeps its default (P2P, or SHM where P2P is off), as on a real cluster: `socket` turns off only
InfiniBand there, the host ids alone send the traffic between nodes over NCCL's network path.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from bench.common.algorithms import DEFAULT, asked_of_nccl
from bench.common.nccl_log import seen_nodes, tuning_summary
from bench.common.run import Run

INSIDE = frozenset({"P2P", "SHM", "NVLS"})  # transport classes of a link inside a node


@dataclass(frozen=True)
class Preset:
    name: str
    backend: str  # "nccl" or "gloo"
    env: dict = field(default_factory=dict)
    accepts: frozenset = frozenset()  # transport classes NCCL may use under this preset
    needs_infiniband: bool = False
    # Over several nodes: the environment (the link between nodes; inside, NCCL's default) and the
    # transport classes NCCL may use between the nodes and inside each.
    between_env: dict = field(default_factory=dict)
    accepts_between: frozenset = frozenset({"NET/Socket", "NET/IB", "COLLNET"})
    accepts_inside: frozenset = frozenset({"P2P", "SHM", "NVLS"})

    def env_for(self, nodes: int) -> dict:
        """The ranks' environment on one node (the preset's), over several (the link between them)."""
        return dict(self.env if nodes == 1 else self.between_env)


PRESETS = {
    p.name: p
    for p in (
        Preset("default", "nccl", {}, frozenset({"P2P", "SHM", "NET/Socket", "NET/IB", "COLLNET", "NVLS"})),
        # P2P off everywhere: inside a node through host memory, between nodes NCCL's network path.
        Preset("p2p_off", "nccl", {"NCCL_P2P_DISABLE": "1"}, frozenset({"SHM", "NET/Socket", "NET/IB"}),
               between_env={"NCCL_P2P_DISABLE": "1"}, accepts_inside=frozenset({"SHM"})),
        Preset(
            "socket",
            "nccl",
            {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1", "NCCL_IB_DISABLE": "1"},
            frozenset({"NET/Socket"}),
            between_env={"NCCL_IB_DISABLE": "1"}, accepts_between=frozenset({"NET/Socket"}),
        ),
        Preset("ib", "nccl", {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}, frozenset({"NET/IB"}), True,
               accepts_between=frozenset({"NET/IB"})),
        Preset("gloo", "gloo"),
    )
}

# Environment every launch gets: NVLink multicast (NVLS) stays off, as the lent GPU machines
# require, and INFO logging is what proves the transport (INIT: the channels and nodes), with
# TUNING, the algorithm and protocol of each collective (rank 0 of each communicator, a line a call).
NVLS_OFF_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
LOG_ENV = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,BOOTSTRAP,ENV,TUNING"}
BASE_NCCL_ENV = {**NVLS_OFF_ENV, **LOG_ENV}
LOG_KEYS = "NCCL_DEBUG"  # the prefix of NCCL's log settings: each reshapes the lines the evidence is read from


def env_problem(env: dict, presets: list, nodes: int = 1) -> "str | None":
    """Why a plan entry's env would undo or blind what its runs are labelled with, with the fix, or None:
    a key one of its transport presets sets, set to another value (on one node the preset's env, over
    several its between_env; `nodes` 1 may be either, a group of hosts being several); a key of NCCL's
    log, the evidence of the link each run used; NVLink multicast, which every launch keeps off."""
    for name, value in sorted(env.items()):
        for preset in map(PRESETS.get, presets):
            for asked in ([preset.between_env] if nodes > 1 else [preset.env, preset.between_env]):
                if asked.get(name, value) != value:
                    return (f"{name}={value} undoes transport preset {preset.name!r}, which sets {name}={asked[name]}: its runs "
                            f"would cross another link than the one they are labelled with; remove {name} from env "
                            "(the entry's transports choose the link)")
        if name.startswith(LOG_KEYS) and LOG_ENV.get(name) != value:
            return (f"{name}={value} changes NCCL's log ({', '.join(f'{k}={v}' for k, v in LOG_ENV.items())} on every launch), "
                    "whose lines are the evidence of the link, nodes and algorithm each run used; remove it from env")
        if NVLS_OFF_ENV.get(name, value) != value:
            return (f"{name}={value} turns on NVLink multicast (NVLS), which every launch keeps off ({name}={NVLS_OFF_ENV[name]}); "
                    "remove it from env")
    return None

_VIA = re.compile(r"\bvia (P2P|SHM|NET/\w+|COLLNET\w*|NVLS)(/\S+)?")


def transports_in_log(text: str) -> list[str]:
    """Transport classes named in NCCL_DEBUG=INFO channel lines, e.g. ["P2P"] or ["NET/Socket"], sorted."""
    return sorted({m.group(1) for m in _VIA.finditer(text)})


def transport_details_in_log(text: str) -> list[str]:
    """The full "via ..." forms, e.g. "P2P/CUMEM", "SHM/direct/direct", "NET/Socket/0"."""
    return sorted({m.group(1) + (m.group(2) or "") for m in _VIA.finditer(text)})


def backend_for(preset_name: str, has_cuda: bool) -> str:
    """`default` on a machine without a GPU is gloo: the CPU path of the embedded default."""
    preset = PRESETS[preset_name]
    return "gloo" if preset.backend == "gloo" or not has_cuda else "nccl"


@dataclass(frozen=True)
class Nodes:
    """How a launch's ranks are grouped: `count` nodes of `ranks_per_node` ranks (torchrun numbers each
    node's ranks in a block); `emulated` where one host's GPUs were split by NCCL host ids."""

    count: int = 1
    ranks_per_node: int = 1
    emulated: bool = False


def transport_record(preset_name: str, backend: str, world_size: int, log_text: str, nodes: "Nodes | None" = None,
                     algorithm: str = DEFAULT, protocol: str = DEFAULT) -> dict:
    """What the bundle says about the link a launch used: over several nodes, the nodes NCCL saw and
    the links inside and between them; the algorithm and protocol asked (what NCCL ran is each run's:
    run_transport)."""
    preset = PRESETS[preset_name]
    several = nodes is not None and nodes.count > 1
    asked = {key: value for key, value in (("algorithm", algorithm), ("protocol", protocol)) if value != DEFAULT}
    if backend == "gloo":
        record = {"preset": preset_name, "backend": "gloo", "env": {}, "nccl_used": [], "nccl_via": [], "matches_preset": True}
        if several:  # gloo has no host hash: the grouping is the plan's, nothing saw it
            record["nodes"] = {"count": nodes.count, "ranks_per_node": nodes.ranks_per_node, "emulated": nodes.emulated,
                               "proof": "planned"}
        return record
    used = transports_in_log(log_text)
    record = {
        "preset": preset_name,
        "backend": "nccl",
        "env": preset.env_for(nodes.count if several else 1),
        "nccl_used": used,
        "nccl_via": transport_details_in_log(log_text),
        **asked,
    }
    if several:
        record["nodes"] = _nodes_seen(preset, nodes, world_size, log_text, used)
        record["matches_preset"] = not _nodes_mismatch(record["nodes"])
    else:
        # One rank talks to nobody: NCCL opens no channel, so there is nothing to check.
        record["matches_preset"] = world_size == 1 or (bool(used) and set(used) <= preset.accepts)
    return record


def _nodes_seen(preset: Preset, nodes: Nodes, world_size: int, log_text: str, used: list) -> dict:
    seen, per_node, grouped = seen_nodes(log_text, world_size)
    return {
        "count": nodes.count, "ranks_per_node": nodes.ranks_per_node, "emulated": nodes.emulated, "proof": "nccl",
        "nccl_nodes": seen, "nccl_ranks_per_node": per_node, "grouped_as_planned": grouped,
        "inside": sorted(set(used) & INSIDE), "between": sorted(set(used) - INSIDE),
        "asked_inside": sorted(preset.accepts_inside), "asked_between": sorted(preset.accepts_between),
    }


def _nodes_mismatch(nodes: dict) -> "str | None":
    """How NCCL's view of the nodes differs from the plan's, or None."""
    planned = f"{nodes['count']} nodes of {nodes['ranks_per_node']} rank{'s' * (nodes['ranks_per_node'] != 1)}"
    if nodes["nccl_nodes"] is None:
        return f"{planned} asked, and NCCL's log names no node count (its INIT lines: NCCL_DEBUG or NCCL_DEBUG_SUBSYS changed?)"
    if (nodes["nccl_nodes"], nodes["nccl_ranks_per_node"]) != (nodes["count"], nodes["ranks_per_node"]) or not nodes["grouped_as_planned"]:
        how = "" if nodes["grouped_as_planned"] else ", grouped otherwise"
        return f"{planned} asked, NCCL saw {nodes['nccl_nodes']} of {nodes['nccl_ranks_per_node']}{how}"
    if not nodes["between"] or not set(nodes["between"]) <= set(nodes["asked_between"]):
        return f"between nodes the preset asks for {nodes['asked_between']}, NCCL used {nodes['between']}"
    if nodes["ranks_per_node"] > 1 and (not nodes["inside"] or not set(nodes["inside"]) <= set(nodes["asked_inside"])):
        return f"inside each node the preset allows {nodes['asked_inside']}, NCCL used {nodes['inside']}"
    return None


def run_transport(launch_transport: dict, choices: "list | None", calls: "list[tuple[str, int | None]]", world_size: int) -> dict:
    """A run's transport: its launch's, with what NCCL's TUNING lines say it ran for the run's own
    collectives (`calls`: NCCL's function and the bytes a call moves, None for any size) and, where an
    algorithm or protocol was asked, whether it got it. `choices` None: this log cannot hold them (a
    node of a job other than global rank 0's), so nothing is judged from it."""
    if launch_transport["backend"] != "nccl" or not calls or choices is None:
        return launch_transport
    mine = [c for c in choices if any((c.function in (None, function)) and size in (None, c.bytes) for function, size in calls)]
    record = {**launch_transport, "nccl_tuning": tuning_summary(mine)}
    if world_size > 1 and algorithm_mismatch(record):
        record["matches_preset"] = False
    return record


def algorithm_mismatch(transport: dict) -> "str | None":
    """What NCCL ran instead of the algorithm or protocol asked, or None (also where none was asked)."""
    algorithm, protocol = asked_of_nccl(transport.get("algorithm", DEFAULT), transport.get("protocol", DEFAULT))
    rows = transport.get("nccl_tuning")
    if (algorithm is None and protocol is None) or rows is None:
        return None
    ran = sorted({(row["algorithm"], row["protocol"]) for row in rows})
    wrong = [f"{a}/{p}" for a, p in ran if algorithm not in (None, a) or protocol not in (None, p)]
    if not ran:
        return f"{(algorithm or '')}{'/' if algorithm and protocol else ''}{protocol or ''} asked, and NCCL's log has no TUNING line for the run"
    return f"{algorithm or 'any'}/{protocol or 'any'} asked, NCCL ran {', '.join(wrong)}" if wrong else None


def nccl_algorithms(transport: dict) -> "list[str] | None":
    """The algorithm/protocol pairs NCCL ran for a run ("RING/LL128"), sorted; None where not recorded."""
    rows = transport.get("nccl_tuning")
    return None if rows is None else sorted({f"{row['algorithm']}/{row['protocol']}" for row in rows})


def mismatch(transport: dict) -> "str | None":
    """Why a launch's transport record does not match what its preset, nodes and algorithm asked, in a few words."""
    if transport["matches_preset"]:
        return None
    preset = PRESETS[transport["preset"]]
    if transport.get("nodes"):
        found = _nodes_mismatch(transport["nodes"])
    else:
        found = (None if set(transport["nccl_used"]) <= preset.accepts and transport["nccl_used"] else
                 f"transport preset {transport['preset']!r} asked for {sorted(preset.accepts)}, NCCL used {transport['nccl_used']}")
    return found or algorithm_mismatch(transport)


def ranks_label(world_size: int, gpus: bool) -> str:
    """"2 GPUs", "1 GPU"; on the CPU "2 processes", "1 process"."""
    return f"{world_size} GPU{'s' * (world_size != 1)}" if gpus else f"{world_size} process{'es' * (world_size != 1)}"


def setting_key(run: Run, with_env: bool = True) -> tuple:
    """What a run ran under beyond its suite's parameters, its preset and world size: NCCL's algorithm
    and protocol asked, its nodes (several), the GPUs it was given, its entry's env. Part of every
    configuration's key (the report's, compare's and verify's); () for a run with none of them, as
    every run of a bundle from before they were recorded: such a bundle keeps its keys. Without the env:
    the link's setting, which a training run shares with the collectives its time is predicted from."""
    transport, nodes = run.transport, run.transport.get("nodes") or {}
    key = tuple((name, transport[name]) for name in ("algorithm", "protocol") if transport.get(name))
    if nodes.get("count", 1) > 1:
        key += (("nodes", nodes["count"], nodes["ranks_per_node"]),)
    if run.gpus:
        key += (("gpus", tuple(run.gpus)),)
    if run.env and with_env:
        key += (("env", json.dumps(run.env, sort_keys=True)),)
    return key


def setting_label(run: Run, with_nodes: bool = True) -> str:
    """The setting in a few words: "2 nodes x 2, tree, LL128, GPUs 0,2, NCCL_BUFFSIZE=1048576"; "" for none.
    Without the nodes: the rest of it, for a figure whose lines say the nodes themselves."""
    transport, nodes = run.transport, run.transport.get("nodes") or {}
    parts = []
    if with_nodes and nodes.get("count", 1) > 1:
        parts.append(f"{nodes['count']} {'emulated ' if nodes.get('emulated') else ''}nodes x {nodes['ranks_per_node']}")
    parts += [transport[name] if name == "algorithm" else transport[name].upper()
              for name in ("algorithm", "protocol") if transport.get(name)]
    if run.gpus:
        parts.append("GPUs " + ",".join(map(str, run.gpus)))
    parts += [f"{name}={value}" for name, value in sorted(run.env.items())]
    return ", ".join(parts)


def with_setting(name: str, run: Run) -> str:
    """A link's name with the run's setting after it, where it has one."""
    setting = setting_label(run)
    return f"{name}, {setting}" if setting else name


def link_name(run: Run) -> str:
    """The link a run's bytes crossed, for tables and legends: its preset and the transport NCCL
    used ("default via P2P"), gloo's runs marked, a default launch the P2P gate sent through host
    memory labelled so, then the run's setting (a suite that moves bytes past NCCL says so itself:
    Suite.link_name)."""
    transport = run.transport
    name = transport["preset"] if transport["backend"] == "nccl" else f"{transport['preset']} (gloo)"
    if transport["nccl_used"]:
        name += " via " + "+".join(transport["nccl_used"])
    if transport.get("p2p_off_by_gate"):
        name += ", P2P off by the gate"
    return with_setting(name, run)
