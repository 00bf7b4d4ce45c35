"""The bundle a shipped plan would give on a machine of a kind this project is lent (1, 2 or 4 H100s or
H200s joined by NVLink NV18), made without one: every launch the plan asks of that machine
(bench/agent/planning.plan_launches), each of its configurations a run with the launch's setting (preset,
world size, GPUs, NCCL's algorithm, emulated nodes) and the path NCCL takes there, on the published
4x H200 bundle's fingerprint cut to the machine's GPUs. Its medians are made up (a smooth function
of the configuration, the same for every bundle made); what it holds is the figures and their keys,
which the expected ranges' generator and the judge read."""

from __future__ import annotations

import copy
import dataclasses
import gzip
import json
import re
from functools import lru_cache

from bench import suites
from bench.agent.planning import plan_launches
from bench.common.host import Capabilities
from bench.common.run import Run
from bench.common.stats import metric
from bench.controller.plans import load_plan
from bench.suites.training import TrainingSuite, grad_accum_for
from tests.conftest import REPO

FOUR_H200 = REPO / "benchmarks" / "results" / "bundles" / "20261126T145046Z-b6143d.bundle.json.gz"
GPU_NAMES = {"H100": "NVIDIA H100 80GB HBM3", "H200": "NVIDIA H200"}
# The parts of a fingerprint that say something of each GPU.
GPU_PARTS = ("gpus", "topology", "link_load", "health", "pcie_path", "numa", "iommu")
# What NCCL takes on an NV18 box under each preset, within a node.
NCCL_USED = {"default": ["P2P"], "p2p_off": ["SHM"], "socket": ["NET/Socket"]}


@lru_cache(maxsize=None)
def _four_h200() -> dict:
    return json.loads(gzip.decompress(FOUR_H200.read_bytes()))


def fingerprint(kind: str, count: int) -> dict:
    """The 4x H200's fingerprint with `count` of its GPUs, each named as the kind's."""
    fp = copy.deepcopy(_four_h200()["hosts"][0]["fingerprint"])
    fp.update({part: _cut(fp[part], count) for part in GPU_PARTS})
    for loaded in ("pcie_loaded", "nvlink_loaded"):  # by GPU index
        fp["link_load"][loaded] = {index: seen for index, seen in fp["link_load"][loaded].items() if int(index) < count}
    for gpu in fp["gpus"]:
        gpu["name"] = GPU_NAMES[kind]
    fp["gpu_count"] = count
    return fp


def _cut(value, count: int):
    """value without what it says of GPUs from `count` on: their GPUn keys, their entries by index."""
    if isinstance(value, dict):
        return {key: _cut(item, count) for key, item in value.items()
                if not ((found := re.fullmatch(r"GPU(\d+)", key)) and int(found[1]) >= count)}
    if isinstance(value, list):
        return [_cut(item, count) for item in value if not (isinstance(item, dict) and item.get("index", -1) >= count)]
    return value


def plan_bundle(plan: str, kind: str, count: int, one_launch: bool = False) -> dict:
    """The bundle `plan` would give on `count` GPUs of `kind` (one host), as far as the judging reads it;
    with one_launch, the first launch of each configuration alone (a plan's precision may ask two)."""
    fp = fingerprint(kind, count)
    runs = []
    for launch in plan_launches(load_plan(plan), Capabilities.of(fp)):
        if not launch.skipped_reason and not (one_launch and launch.repeat > 1):
            runs += [_run(launch, params) for params in _configurations(launch, count)]
    views = [Run(run) for run in runs]
    for suite in {suites.get(run["suite"]) for run in runs}:
        if isinstance(suite, TrainingSuite):
            suite.derive_scaling(views)
    return {"hosts": [{"name": "local", "fingerprint": fp, "launches": [], "runs": runs}]}


def _configurations(launch, count: int) -> list[dict]:
    """The params of each run the launch records, as its ranks would write them."""
    suite = suites.get(launch.suite)
    typed = suite.params(launch.params)
    if launch.suite == "collectives":
        found = []
        for op in typed.ops:
            for dtype in typed.dtypes:
                if op == "sendrecv":
                    found += [{"op": op, "dtype": dtype, "in_place": False, "size_bytes": size, "src_rank": src, "dst_rank": dst}
                              for size in typed.p2p_sizes() for src in range(launch.world_size)
                              for dst in range(launch.world_size) if src != dst]
                else:
                    places = sorted(set(typed.in_place)) if op in ("all_gather", "reduce_scatter") else [True]
                    found += [{"op": op, "dtype": dtype, "in_place": place, "size_bytes": size} for place in places for size in typed.sizes()]
        return found
    if launch.suite == "copy":
        ends = {"h2d": [("host", f"gpu{i}") for i in range(count)], "d2h": [(f"gpu{i}", "host") for i in range(count)],
                "d2d": [(f"gpu{a}", f"gpu{b}") for a in range(count) for b in range(count) if a != b]}
        return [{"direction": direction, "engine": engine, "bidirectional": both, "src": src, "dst": dst, "size_bytes": size}
                for direction in typed.directions for engine in typed.engines for both in typed.bidirectional
                for src, dst in ends[direction] for size in typed.sizes()]
    plain = {k: v for k, v in dataclasses.asdict(typed).items() if k not in typed.AGENT_SET}
    batches = [(batch, {}) for batch in typed.batches(launch.world_size)] + [
        (batch, {"baseline_for": ranks}) for batch, ranks in typed.baseline_batches()]  # a 1-rank launch's baselines
    return [{**plain, "global_batch": batch, "grad_accum": grad_accum_for(batch, launch.world_size, typed.micro_batch), **extra}
            for batch, extra in batches]


def _run(launch, params: dict) -> dict:
    """A run record of the launch with made-up medians."""
    topology = launch.topology
    used = [] if launch.world_size == 1 or launch.suite == "copy" else (
        ["NET/Socket"] + (NCCL_USED["default"] if topology.ranks_per_node > 1 else []) if topology.count > 1
        else NCCL_USED[launch.preset])
    transport = {"preset": launch.preset, "backend": launch.backend, "env": {}, "nccl_used": used, "nccl_via": [], "matches_preset": True}
    if launch.algorithm != "default":
        transport["algorithm"] = launch.algorithm
    if topology.count > 1:
        transport["nodes"] = {"count": topology.count, "ranks_per_node": topology.ranks_per_node, "emulated": topology.emulated}
    value = _made_up(launch, params)
    samples = [value * factor for factor in (0.98, 0.99, 1.0, 1.01, 1.02)]
    if launch.suite in ("collectives", "copy"):
        metrics = {"busbw_gbps" if launch.suite == "collectives" else "copy_gbps": metric(samples)}
    else:
        metrics = {"step_time_s": metric(samples),
                   "per_sample_gpu_time_s": metric([s * launch.world_size / params["global_batch"] for s in samples])}
    return {"suite": launch.suite, "params": {**launch.params, **params}, "world_size": launch.world_size, "status": "ok",
            "transport": transport, "launch_id": launch.id, "repeat": launch.repeat, "metrics": metrics, "derived": {},
            **({"gpus": list(launch.gpus)} if launch.gpus else {})}


def _made_up(launch, params: dict) -> float:
    """A positive median: a bandwidth that grows with the size, or a step that grows with the batch."""
    if "size_bytes" in params:
        return 1.0 + 300.0 * params["size_bytes"] / (params["size_bytes"] + (16 << 20)) / (1 + 10 * (launch.preset != "default"))
    return 0.05 * params["grad_accum"] * (1 + 0.05 * launch.world_size)
