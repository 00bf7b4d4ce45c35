"""The launch-to-launch floor: how far a configuration's median moves from one launch to the next
(a fresh set of processes) beyond what its samples show, for each kind of run, as this project
measured it on its own multi-launch bundles. A side of a ratio measured by one launch cannot show
that spread itself: its interval takes the floor (bench/common/stats.py), never zero.

A training run's kind includes its pacing (bench/suites/training/pacing.py): steps the host paced
moved 14-22% between launches on one host and under 5% on another, where GPU-bound ones moved under
1%; a host-paced kind takes the largest of its entries, not their pool. On a GPU its floor is never
below the spread its own steps show within a launch: launches cannot agree more closely than the
steps inside one.

The figures are data, launch_floor.json beside this file, validated against
schema/launch_floor.schema.json and written by benchmarks/launch_floor.py from bundles (a figure
no bundle holds keeps its source in words). A kind of run is its device (GPU or CPU), transport
preset, nodes (one, emulated on one host, several hosts), the metric it is judged by and, for a
figure of a size (collectives, copies), its size, and for a training step its pacing. The entries that name the most of these pool
(each one machine's or one source's measurement); where none matches, the device's conservative
default stands and says so.
"""

from __future__ import annotations

import functools
import json
import math
import statistics
from dataclasses import dataclass, replace
from pathlib import Path

from bench.common.pacing_verdicts import HOST_PACED
from bench.common.run import Run
from bench.common.stats import MAD_TO_SIGMA, Floor, Launches
from bench.common.units import human_bytes

TABLE = Path(__file__).resolve().parent / "launch_floor.json"
KEYS = ("device", "preset", "nodes", "metric", "pacing")


@dataclass(frozen=True)
class Kind:
    """What a run's launch-to-launch spread depends on."""

    device: str  # "gpu" or "cpu": where its ranks computed
    preset: str  # the transport preset
    nodes: str  # "one", "emulated" (one host split), "hosts" (several)
    metric: str  # the headline metric its figure is judged by (busbw_gbps, copy_gbps, step_time_s)
    size_bytes: "int | None" = None  # a figure of a size: the bytes of its call
    pacing: "str | None" = None  # a training step's: gpu-bound, host-paced, cpu or unknown

    def __str__(self) -> str:
        nodes = {"one": "one node", "emulated": "emulated nodes", "hosts": "several hosts"}[self.nodes]
        size = f" at {human_bytes(self.size_bytes)}" if self.size_bytes is not None else ""
        pacing = f" {self.pacing}" if self.pacing else ""
        return f"{self.device.upper()} {self.preset} {nodes}{pacing} {self.metric}{size}"


def kind_of(run: Run, metric: str, pacing: "str | None" = None) -> Kind:
    """The kind of a run judged by `metric` (its suite's headline metric); `pacing`: a training run's."""
    nodes = run.transport.get("nodes")
    spread = "one" if not nodes else "emulated" if nodes.get("emulated") else "hosts"
    size = run.params.get("size_bytes")
    return Kind("gpu" if run.on_gpu else "cpu", run.preset, spread, metric, size if isinstance(size, int) else None, pacing)


@functools.lru_cache(maxsize=1)
def table() -> dict:
    return json.loads(TABLE.read_text())


def _matches(entry: dict, kind: Kind) -> bool:
    match = entry["match"]
    if any(match.get(key, getattr(kind, key)) != getattr(kind, key) for key in KEYS):
        return False
    if "size_bytes_from" in match or "size_bytes_below" in match:
        size = kind.size_bytes
        return size is not None and match.get("size_bytes_from", 0) <= size < match.get("size_bytes_below", float("inf"))
    return True


def _specificity(entry: dict) -> int:
    match = entry["match"]
    return sum(key in match for key in KEYS) + ("size_bytes_from" in match or "size_bytes_below" in match)


def floor_for(kind: Kind) -> Floor:
    """The floor of the most specific entries that match, pooled by their degrees of freedom (each a
    machine's or a source's measurement of one kind of run; for host-paced steps the largest), else
    the device's default."""
    found = [entry for entry in table()["floors"] if _matches(entry, kind)]
    if not found:
        default = table()["defaults"][kind.device]
        return Floor(default["spread_fraction"], default["df"], f"{kind}: none measured, a default: {default['why']}",
                     measured=False)
    most = max(map(_specificity, found))
    pooled = [entry for entry in found if _specificity(entry) == most]
    if kind.pacing == HOST_PACED:
        # How far a host-paced step moves is the host's doing (4.8% on one 1x H100, 15% on one 1x H200), and
        # a rerun's host is not the one measured: the largest seen, not a pool that a calm host would thin.
        largest = max(pooled, key=lambda entry: entry["spread_fraction"])
        return Floor(largest["spread_fraction"], largest["df"],
                     f"{kind}: {largest['spread_fraction']:.1%}, the largest of {len(pooled)} ({largest['source']['says']})")
    df = sum(entry["df"] for entry in pooled)
    spread = math.sqrt(sum(entry["df"] * entry["spread_fraction"] ** 2 for entry in pooled) / df)
    sources = "; ".join(entry["source"]["says"] for entry in pooled)
    return Floor(spread, df, f"{kind}: {spread:.1%}" + (f", pooled from {sources}" if len(pooled) > 1 else f" ({sources})"))


def launches(runs: "list[Run]", metric: str, kind_metric: "str | None" = None, pacing: "str | None" = None) -> Launches:
    """The samples of `metric` of each run (one per launch that measured the configuration; at least
    one run), with the floor of their kind; kind_metric: the headline metric whose floor stands for `metric` (a training
    run's per-sample time moves as its step time does); pacing: a training run's (its floor then fits the
    spread of its steps within a launch, on a GPU)."""
    kind = kind_of(runs[0], kind_metric or metric, pacing)
    samples = [run.samples(metric) for run in runs]
    floor = floor_for(kind)
    if pacing is not None and kind.device == "gpu":
        floor = _at_least_within(floor, samples)
    return Launches.of(samples, floor)


def _at_least_within(floor: Floor, samples: "list[list]") -> Floor:
    """The floor, raised to the spread of the steps within a launch (the median over the launches of
    1.4826 MAD / median, robust to a few wild steps) where that is wider."""
    spreads = [MAD_TO_SIGMA * statistics.median(abs(x - statistics.median(s)) for x in s) / statistics.median(s)
               for s in samples if len(s) > 1 and statistics.median(s) > 0]
    within = statistics.median(spreads) if spreads else 0.0
    if within <= floor.fraction:
        return floor
    return replace(floor, fraction=within, source=f"{floor.source}; raised to its steps' own spread within a launch, {within:.1%}")
