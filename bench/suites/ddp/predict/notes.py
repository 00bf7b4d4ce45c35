"""Said: what the predictor writes beside its figures: where a prediction's compute and all-reduce
times came from where that is not the measurement itself, and what it could not predict, each a
line a reader can act on. The tables and their captions are the report part's
(bench/suites/ddp/report/predicted.py)."""

from __future__ import annotations

from typing import Callable

from bench.common.allreduce import Topology

ONE_GPU_SOURCE = "the 1-GPU run's timeline"
EXPOSED_MODEL = "compute + exposed communication model"  # the source of a prediction without a timeline
# Measured: compiled gpt2-large, 2x H200 over SHM, +32% to +36% (benchmarks/results/timeline_replay_h100.md).
NO_OVERLAP_NOTE = ("{model}: its 1-GPU timeline has every gradient bucket ready at the backward's end (a compiled backward is one "
                   "graph on one GPU; on several DDP splits it at its buckets and overlaps them), so the predictions from it "
                   "overlap no all-reduce with the backward: on slow links they are upper bounds")
FALLBACK_NOTE = ("no step timeline in this bundle's runs (recorded since the timeline landed): predictions use the compute "
                 "+ exposed communication model (the 1-GPU step for the same work per GPU, then every all-reduce of the "
                 "gradients on the link's measured sweep or table row, none of it hidden)")
CPU_NOTE = ("its ranks trained on this CPU (processes over gloo), so the compute of every prediction is this CPU's: each "
            "link's step is what processes computing as fast as these would take over that link; run the plan on the "
            "machine you mean to predict for its own compute")
SLOWDOWN_NOTE = ("the slowdown under communication (compute beside an all-reduce, an all-reduce longer in the step than on "
                 "its curve) is applied only on links this host measured it on (a DDP run with and without its "
                 "all-reduces); on the others it is taken as none, so their steps are the least they can be")


def baseline_note(name: str, source: str) -> str:
    """A scaling set against something other than a 1-GPU run measured at that batch per GPU."""
    return f"{name}: no 1-GPU run of this batch per GPU; its scaling is against {source}"


def uncurved_note(links: set) -> str:
    return (f"no measured all_reduce curve, in this bundle or the link table, for {', '.join(sorted(links))}: their "
            "all-reduces follow the busbw and latency given, not a sweep")


def curve_notes(note: Callable[[str], None], uncurved: set, name: str, topology: Topology, largest_bucket: float) -> None:
    """Where a prediction's all-reduce times come from no measurement (added to `uncurved`), or from one
    carried past it."""
    if topology.measured is not None:
        return
    parts = []
    if topology.intra is not None and topology.gpus_per_node > 1:
        parts.append(("within a node", topology.intra, topology.gpus_per_node))
    if topology.network is not None and topology.nodes > 1:
        parts.append(("between nodes", topology.network, topology.nodes))
    for level, part, ranks in parts:
        if not part.points:
            uncurved.add(f"{part.name} ({part.busbw_gbps:g} GB/s, {part.latency_us:g} us, {part.basis})")
            continue
        if largest_bucket > part.points[-1][0]:
            note(f"link {part.name}: buckets of up to {largest_bucket:.4g} bytes are past its curve's largest size "
                 f"({part.points[-1][0]:.4g} bytes): taken at that size's bandwidth")
        if ranks != part.ranks:
            note(f"link {part.name}: its curve was measured at {part.ranks} ranks; at {ranks} {level} it is "
                 "carried by the ring and tree model (bench/common/allreduce.py)")
    if len(parts) == 2:
        note(f"{name} at {topology.shape}: no all_reduce was measured on this topology; its all-reduces are "
             "the ring and tree model over its two links (bench/common/allreduce.py)")
