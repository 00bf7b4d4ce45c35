"""Measured: the predictor's error as validated on GPUs, shipped as data (bench/suites/ddp/predictor_error.json,
schema/predictor_error.schema.json): per machine, world size, nodes, path and NCCL algorithm, the signed error of
each prediction of a measured run (from the 1-GPU timeline; from the run's own steps without all-reduce), pooled
over this project's bundles of that machine. benchmarks/predictor_error.py --write makes it (rows_of); a column
is written only where it stands on MIN_LAUNCHES launches: launch to launch one configuration moves by several
percent, so one launch proves nothing. A prediction finds the error of runs like it (runs_like) by its GPUs,
nodes, the link it replays on (the link table's row that stands for a validated path on its machine) and the
algorithm; elsewhere it is unvalidated."""

from __future__ import annotations

import functools
import math
import statistics
from pathlib import Path

from bench.common.allreduce import Topology
from bench.common.links import link_summary
from bench.common.run import Run
from bench.inputfile import read_data_file
from bench.suites.ddp.predict.sweeps import table_link_of

FILE = Path(__file__).resolve().parents[1] / "predictor_error.json"
MIN_LAUNCHES = 3
COLUMNS = ("from_one_gpu", "from_own_steps")
UNVALIDATED = "unvalidated"
# What NCCL said it used (its "via" lines), as the link rows name the path; P2P is NVLink's or PCIe's by the host's links.
USED = {"SHM": "host_memory", "NET/Socket": "net_socket", "NET/IB": "net_ib"}
P2P = {"nvlink": "nvlink", "pcie": "p2p"}


def _path(used: "list | set", link_class: str) -> "str | None":
    paths = {P2P.get(link_class) if name == "P2P" else USED.get(name) for name in used}
    return paths.pop() if len(paths) == 1 else None


def run_path(run: Run, link_class: str, nodes: int) -> "str | None":
    """The path a measured run's all-reduces crossed, from what NCCL said it used: within one node, or
    INSIDE+BETWEEN over nodes of several GPUs; None where NCCL used several on one level, or none (gloo)."""
    transport = run.transport
    if nodes == 1:
        return _path(set(transport.get("nccl_used") or []), link_class)
    spread = transport.get("nodes") or {}
    between = _path(spread.get("between") or [], link_class)
    if between is None or run.world_size == nodes:
        return between
    inside = _path(spread.get("inside") or [], link_class)
    return f"{inside}+{between}" if inside else None


# The preset whose path on a host is this one: the link table's row for it there (sweeps.table_link_of).
PRESET_OF_PATH = {"nvlink": "default", "p2p": "default", "host_memory": "p2p_off", "net_socket": "socket", "net_ib": "ib"}


def path_link(fingerprint: "dict | None", path: str) -> "str | None":
    """The link table's row that stands for a run's path on its host (nvlink4 for an H100's NVLink), INTRA+NETWORK
    over nodes of several GPUs; None where the table has no row for a part of it."""
    rows = [table_link_of(fingerprint, PRESET_OF_PATH[part]) for part in path.split("+")]
    return "+".join(row.name for row in rows) if all(rows) else None


def topology_link(topology: Topology) -> "str | None":
    """The link a prediction replays on, named as path_link names a validated row's: its link within a node,
    the one between nodes, or both."""
    parts = []
    if topology.gpus_per_node > 1:
        parts.append(topology.intra.name if topology.intra is not None else "")
    if topology.nodes > 1:
        parts.append(topology.network.name if topology.network is not None else "")
    return "+".join(parts) if parts and all(parts) else None


def read(path: Path = FILE) -> dict:
    """The table, checked against schema/predictor_error.schema.json."""
    return read_data_file(path, "table of the predictor's validated error", ("predictor_error", "reference"),
                          "fix the file, or write it again with benchmarks/predictor_error.py --write")


@functools.lru_cache(maxsize=None)
def table() -> tuple:
    return tuple(read()["errors"]) if FILE.is_file() else ()


def unvalidated(launches: int) -> "str | None":
    """'unvalidated (2 of 3 launches)' where fewer than MIN_LAUNCHES launches stand behind an error; None otherwise."""
    return f"{UNVALIDATED} ({launches} of {MIN_LAUNCHES} launches)" if launches < MIN_LAUNCHES else None


def signed(errors: dict) -> str:
    """'+2.1% (-0.5% to +3.0%) over 3 launches'."""
    spread = "" if errors["least"] == errors["most"] else f" ({errors['least']:+.1%} to {errors['most']:+.1%})"
    return f"{errors['mean']:+.1%}{spread} over {errors['launches']} launches"


def runs_like(gpu: "str | None", gpus: int, nodes: int, link: "str | None", algorithm: "str | None", column: "str | None") -> str:
    """The predictor's error on runs like this prediction, with the machine it was validated on (this GPU's
    first, else the one of the most launches); "unvalidated" where no row of the table holds it: a link no
    bundle measured is unvalidated whatever path it shares with one that was (an RTX 3090 bridge is no H100's NVLink)."""
    found = [row for row in table() if (row["gpus"], row["nodes"], row["link"], row["algorithm"]) == (gpus, nodes, link, algorithm)
             and column in row]
    if link is None or not found:
        return UNVALIDATED
    row = max(found, key=lambda row: (row["gpu"] == gpu, row[column]["launches"]))
    return f"{signed(row[column])}, {row['machine']}"


def _signed(errors: list) -> "dict | None":
    """mean, least, most, runs and launches of [(source, launch, error)], where it stands on MIN_LAUNCHES launches."""
    kept = [(launch, e) for _, launch, e in errors if e is not None and math.isfinite(e)]
    launches = len({launch for launch, _ in kept})
    if launches < MIN_LAUNCHES:
        return None
    values = [e for _, e in kept]
    return {"mean": round(statistics.fmean(values), 4), "least": round(min(values), 4), "most": round(max(values), 4),
            "runs": len(values), "launches": launches}


def rows_of(measured: list) -> list[dict]:
    """The table's rows from [(source name, bundle run id, machine, gpu, fingerprint, HostPrediction)]: each
    measured run's errors pooled per machine, world size, nodes, path (and the link table's row for it there)
    and algorithm over the bundles; the columns that stand on MIN_LAUNCHES launches, rows with at least one,
    each citing the bundles they pool."""
    groups: dict = {}
    for source, run_id, machine, gpu, fingerprint, found in measured:
        for a in found.against:
            path = run_path(a.run, link_summary(fingerprint)["link_class"], a.nodes)
            if path is not None:
                key = (machine, gpu, a.run.world_size, a.nodes, path, path_link(fingerprint, path), a.algorithm)
                group = groups.setdefault(key, {name: [] for name in COLUMNS})
                for name, predicted in zip(COLUMNS, (a.from_one_gpu, a.from_own_steps)):
                    group[name].append((source, (run_id, a.run.launch_id), a.error(predicted)))
    rows = []
    for (machine, gpu, gpus, nodes, path, link, algorithm), errors in sorted(groups.items(), key=lambda item: str(item[0])):
        columns = {name: found for name in COLUMNS for found in [_signed(errors[name])] if found is not None}
        sources = {source for name in columns for source, _, e in errors[name] if e is not None and math.isfinite(e)}
        if columns:
            rows.append({"machine": machine, "gpu": gpu, "gpus": gpus, "nodes": nodes, "path": path, "link": link,
                         "algorithm": algorithm, **columns, "sources": sorted(sources)})
    return rows
