"""NCCL's algorithm and protocol as a plan's axis: which apply to which collective, the environment
that asks for them, and whether this NCCL can.

A global NCCL_ALGO=Tree ends a DDP job at its start (DDP gathers and broadcasts, and NCCL runs those
with Ring only: "no algorithm/protocol available for function AllGather"), so the axis applies to the
collectives a run is about, with NCCL's per-collective form ("allreduce:tree", NCCL 2.24 and later;
NCCL's src/graph/tuning.cc parseList). NVLS and NVLSTree stay off (NVLink multicast is off on every
launch); CollNet needs a SHARP network plugin, which a plan may not name. Standard library only.
"""

from __future__ import annotations

from bench.common.nccl_log import ALGORITHMS, PROTOCOLS

DEFAULT = "default"  # NCCL's own choice: nothing is set
# The plan's names (lower case) -> NCCL's (as its TUNING lines print them).
ALGORITHM_NAMES = {"ring": "RING", "tree": "TREE", "pat": "PAT"}
PROTOCOL_NAMES = {"ll": "LL", "ll128": "LL128", "simple": "SIMPLE"}
assert set(ALGORITHM_NAMES.values()) <= set(ALGORITHMS) and set(PROTOCOL_NAMES.values()) <= set(PROTOCOLS)

# What NCCL 2.24-2.30 runs each collective with (src/graph/tuning.cc), of the algorithms above.
FUNCTION_ALGORITHMS = {
    "AllReduce": ("ring", "tree"),
    "AllGather": ("ring", "pat"),
    "ReduceScatter": ("ring", "pat"),
    "Broadcast": ("ring",),
    "Reduce": ("ring",),
}
PER_FUNCTION_SINCE = (2, 24)


def parse_version(text: "str | None") -> "tuple | None":
    """"2.28.9" -> (2, 28, 9); None where unknown."""
    try:
        return tuple(int(part) for part in (text or "").split(".")) or None
    except ValueError:
        return None


def env_for(functions: "list[str]", algorithm: str, protocol: str) -> dict:
    """NCCL_ALGO and NCCL_PROTO in NCCL's per-collective form for `functions`; {} for NCCL's own choice."""
    env = {}
    for name, value in (("NCCL_ALGO", algorithm), ("NCCL_PROTO", protocol)):
        if value != DEFAULT:
            env[name] = ";".join(f"{function.lower()}:{value}" for function in sorted(set(functions)))
    return env


def problem(what: "list[tuple[str, str | None]]", algorithm: str, protocol: str, *, ranks_per_node: int) -> "str | None":
    """Why `algorithm` or `protocol` cannot apply to the collectives `what` names ([(what it is to the
    user, NCCL's function or None where NCCL tunes nothing)]), or None."""
    if algorithm == DEFAULT and protocol == DEFAULT:
        return None
    asked = " and ".join(f"{kind} {value!r}" for kind, value in (("algorithm", algorithm), ("protocol", protocol)) if value != DEFAULT)
    if not what:
        return f"{asked} cannot apply: it runs no NCCL collective; leave algorithms and protocols out of this entry"
    for name, function in what:
        if function is None:
            return (f"{asked} cannot apply to {name}: NCCL chooses no algorithm for it; "
                    f"put {name} in an entry of its own without algorithms and protocols")
        if algorithm != DEFAULT and algorithm not in FUNCTION_ALGORITHMS[function]:
            return (f"algorithm {algorithm!r} cannot apply to {name}: NCCL runs {function} with "
                    f"{' or '.join(FUNCTION_ALGORITHMS[function])}; remove {algorithm!r} or give {name} an entry of its own")
    if algorithm == "pat" and ranks_per_node > 1:
        return (f"algorithm 'pat' runs with one GPU per node only (NCCL's PAT), this launch has {ranks_per_node} ranks a node; "
                "use it with nodes equal to the world size, or remove it")
    if algorithm == "pat" and protocol not in (DEFAULT, "simple"):
        return f"algorithm 'pat' runs with protocol simple only, not {protocol!r}; use protocols: [simple] or [default]"
    return None


def version_problem(nccl_version: "str | None") -> "str | None":
    """Why this NCCL cannot take a per-collective NCCL_ALGO, or None (also where its version is not known:
    the run's TUNING lines then say what it did)."""
    version = parse_version(nccl_version)
    if version is None or version[:2] >= PER_FUNCTION_SINCE:
        return None
    return (f"NCCL {nccl_version} here has no per-collective NCCL_ALGO and NCCL_PROTO (NCCL 2.24 and later), and a global one "
            "would apply to the collectives the suite needs beside the one measured; use a torch with NCCL 2.24 or later")


def env_problem(env: dict, algorithms: list, protocols: list) -> "str | None":
    """What is wrong with an entry's env NCCL_ALGO or NCCL_PROTO: set beside the entry's algorithms or
    protocols (two places for one setting), or a global NCCL_ALGO without Ring, the only algorithm of
    broadcast and (beside PAT) all-gather, which every suite's ranks run (they gather their checks;
    DDP broadcasts its parameters): the job would end at its start."""
    for name, axis, values in (("NCCL_ALGO", "algorithms", algorithms), ("NCCL_PROTO", "protocols", protocols)):
        if name in env and values != [DEFAULT]:
            return f"env {name} and {axis} both set NCCL's {axis[:-1]}; set it in {axis} only"
    value = env.get("NCCL_ALGO")
    if not value or ":" in value or value.startswith("^"):
        return None
    if "ring" in [part.strip().lower() for part in value.split(",")]:
        return None
    return (f"env NCCL_ALGO={value} applies to every collective, and NCCL runs all-gather and broadcast with Ring only "
            f"(every suite's ranks gather their checks, DDP broadcasts its parameters: the job would end at its start with "
            f"'no algorithm/protocol available'); use algorithms: [{value.split(',')[0].strip().lower()}], which sets it "
            "for the entry's own collectives")


def asked_of_nccl(algorithm: str, protocol: str) -> "tuple[str | None, str | None]":
    """The names NCCL's TUNING lines would print for what was asked (None: NCCL's own choice)."""
    return ALGORITHM_NAMES.get(algorithm), PROTOCOL_NAMES.get(protocol)
