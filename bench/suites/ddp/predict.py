"""What link do I need? Each ddp configuration of a host, predicted on every link and topology from
the step's timeline (bench/common/replay.py), with its scaling, samples/s and samples per dollar,
and set against the runs the host measured, with the signed error per world size, topology and link.

Per workload (model, recipe, sequence, micro-batch) and global batch, the step of N GPUs is:
- the compute, from a timeline run of that workload: the N-GPU run's steps without all-reduce
  (timeline_steps; DDP's own cost included) where the host ran N GPUs, else the 1-GPU run, its
  micro-batches counted again for N GPUs' share of the global batch (the 1-GPU run's replay is
  calibrated to its measured step);
- on each link or topology (bench/common/allreduce.py: nodes of GPUs, ring and tree), its buckets'
  all-reduces replayed: the bundle's all_reduce sweep at that preset, world size and node count
  where it measured one, else its sweeps of the links inside and between nodes, else the link
  table's rows (a measured sweep wins over the table, and a link without any curve says so);
- the slowdown of compute under communication, where this host measured it for that link (a
  DDP run with and without its all-reduces), else none (and a note says so).
A bundle without timelines (older) falls back to the compute + exposed communication model, and
says so. A run that cannot be computed (a timeline whose arrays disagree, a median step of 0) is left
out with one line naming it and why.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field, replace

from bench.common.allreduce import ALGORITHMS, TABLE, Link, Topology, link, shown, usable_curve
from bench.common.links import link_summary
from bench.common.reference import nvlink_row
from bench.common.replay import NONE, Bucket, Replayed, buckets_of, Slowdown, Timeline, exposed_only, fitted_slowdown, replay
from bench.common.run import Run
from bench.errors import UserError
from bench.suites.ddp.derived import REDUCE_DTYPES
from bench.suites.training.derived import collective_curves
from bench.suites.training import training_recipe

# PCIe 4.0 x1/x4/x8/x16 boxes of RTX 4090s (no P2P, so through host memory) and the RTX 3090
# bridge, a datacenter NVLink, and two networks between 1-GPU nodes.
REPORT_LINKS = ("pcie4-x1-host", "pcie4-x4-host", "pcie4-x8-host", "pcie4-x16-host", "rtx3090-nvlink-bridge",
                "nvlink4", "ib-hdr", "eth-25g")
ONE_GPU_SOURCE = "the 1-GPU run's timeline"
EXPOSED_MODEL = "compute + exposed communication model"  # the source of a prediction without a timeline
# Measured: compiled gpt2-large, 2x H200 over SHM, +32% to +36% (benchmarks/results/timeline_replay_h100.md).
NO_OVERLAP_NOTE = ("{model}: its 1-GPU timeline has every gradient bucket ready at the backward's end (a compiled backward is one "
                   "graph on one GPU; on several DDP splits it at its buckets and overlaps them), so the predictions from it "
                   "overlap no all-reduce with the backward: on slow links they are upper bounds")
FALLBACK_NOTE = ("no step timeline in this bundle's runs (recorded since the timeline landed): predictions use the compute "
                 "+ exposed communication model (compute, then every all-reduce, none of it hidden)")
CPU_NOTE = ("its ranks trained on this CPU (processes over gloo), so the compute of every prediction is this CPU's: each "
            "link's step is what processes computing as fast as these would take over that link; run the plan on the "
            "machine you mean to predict for its own compute")
CHOSEN = "NCCL's choice"  # the algorithm of a run that named none
MAX_GPUS = 65536
MAX_GPUS_PER_NODE = 1024
# Below a tenth of a cent an hour no machine rents: such a price gives no samples per dollar.
PRICE_FLOOR_PER_HOUR = 1e-3


@dataclass(frozen=True, order=True)
class Workload:
    model: str
    recipe: str
    seq_len: "int | None"
    micro_batch: int


def workload_of(run: Run) -> Workload:
    p = run.params
    return Workload(p["model"], training_recipe(p), p.get("seq_len"), p["micro_batch"])


@dataclass(frozen=True)
class Profile:
    """A run's timeline as medians over its steps, compute alone, with what it takes to count its
    micro-batches again: the step at `accum` micro-batches is before_s + last backward + after_s."""

    forward_s: float  # one micro-batch's forward
    backward_s: float  # one earlier micro-batch's backward
    before_s: float  # the step's start to the last backward's, at `accum`
    last_backward_s: float
    buckets: tuple
    after_s: float
    accum: int
    source: str  # where it came from, for the report

    def timeline(self, accum: int) -> Timeline:
        return Timeline(self.before_s + (accum - self.accum) * (self.forward_s + self.backward_s), self.last_backward_s,
                        self.buckets, self.after_s)


def _median(values) -> float:
    return statistics.median(values)


def ready_medians(steps: list) -> list:
    """Each bucket's median ready time over the steps (a list per step, one length)."""
    half, odd = divmod(len(steps), 2)
    columns = map(sorted, zip(*(step["bucket_ready_s"] for step in steps)))
    return [column[half] for column in columns] if odd else [(column[half - 1] + column[half]) / 2 for column in columns]


def profile_of(run: Run, arm: str, source: str, calibrate_to: "float | None" = None,
               ready: "list | None" = None) -> "Profile | None":
    """The run's timeline arm ("steps" or "steps_without_allreduce") as a Profile; calibrate_to: the
    run's measured median step, which the profile's own step then equals; ready: the arm's
    ready_medians, where known. The run's timeline agrees with itself (timeline_problem finds none)."""
    found = run.timeline
    steps = found.get(arm) or []
    if not steps:
        return None
    accum = run.params["grad_accum"]
    figure = {name: _median(step[name] for step in steps)
              for name in ("step_s", "forward_s", "backward_s", "last_backward_start_s", "last_backward_s")}
    ready = ready_medians(steps) if ready is None else ready
    earlier = (figure["backward_s"] - figure["last_backward_s"]) / (accum - 1) if accum > 1 else figure["last_backward_s"]
    after = figure["step_s"] - figure["last_backward_start_s"] - figure["last_backward_s"]
    if calibrate_to is not None:
        after += calibrate_to - figure["step_s"]  # the harness's step: between steps too
    buckets = buckets_of(ready, found["bucket_bytes"])  # a replay takes none as ready past the backward's end
    return Profile(figure["forward_s"] / accum, earlier, figure["last_backward_start_s"], figure["last_backward_s"],
                   buckets, max(after, 0.0), accum, source)


def timeline_problem(run: Run) -> "str | None":
    """Why the run's timeline cannot be replayed (its arrays disagree), or None."""
    found = run.timeline
    count = len(found.get("bucket_bytes") or [])
    for arm in ("steps", "steps_without_allreduce"):
        for step in found.get(arm) or []:
            if len(step["bucket_ready_s"]) != count:
                return (f"its step timeline has {count} bucket size(s) but a step ({arm}) with {len(step['bucket_ready_s'])} "
                        "ready time(s)")
    return None


def run_problem(run: Run) -> "str | None":
    """Why the predictor cannot compute with the run, or None."""
    step = _step_median(run)
    if not (math.isfinite(step) and step > 0):
        return f"its median step is {step:g} s, which no step takes"
    return timeline_problem(run)


def _step_median(run: Run) -> float:
    return run.median("step_time_s")


def run_name(run: Run) -> str:
    return f"{run.launch_id} (run {run.repeat}, {run.params['model']}, global batch {run.params['global_batch']})"


class _Profiles:
    """Each run's profiles, made once, from its buckets' ready times, read once: a profile reads every
    step of every bucket."""

    def __init__(self) -> None:
        self._made: dict = {}
        self._ready: dict = {}

    def of(self, run: Run, arm: str, source: str, calibrated: bool) -> "Profile | None":
        key = (id(run), arm, calibrated)
        if key not in self._made:
            steps = run.timeline.get(arm) or []
            ready = self._ready.setdefault((id(run), arm), ready_medians(steps) if steps else [])
            self._made[key] = profile_of(run, arm, "", _step_median(run) if calibrated else None, ready)
        made = self._made[key]
        return replace(made, source=source) if made is not None else None

    def own(self, run: Run) -> "Profile | None":
        """An N-GPU run's step with its all-reduces taken out: its timed steps' forwards, earlier
        backwards and optimizer, none of which communicate (DDP reduces in the last backward and
        waits for it there), with the last backward of its steps without all-reduce (timeline_steps)."""
        alone = self.of(run, "steps_without_allreduce", "", False)
        timed = self.of(run, "steps", "", True)
        if alone is None or timed is None:
            return None
        return replace(timed, last_backward_s=alone.last_backward_s, buckets=alone.buckets,
                       source=f"the {run.world_size}-GPU run's steps without all-reduce")


def grad_bytes(run: Run) -> float:
    """The gradient bytes DDP all-reduces per step: the timeline's buckets, else what the run says,
    else its parameters at the bytes they are reduced in (a 1-GPU run reduces nothing)."""
    buckets = run.timeline.get("bucket_bytes")
    if buckets:
        return float(sum(buckets))
    said = run.metric("grad_allreduce_bytes")
    if said and said["summary"]["median"] > 0:
        return said["summary"]["median"]
    p = run.params
    half = p.get("weights_dtype") == "bfloat16" or p.get("grad_reduce_dtype") == "bf16"
    return float(p.get("num_params", 0)) * (2 if half else 4)


def table_link_of(fingerprint: "dict | None", preset: str) -> "Link | None":
    """The link table's row for the path a preset takes on this host, where the table has one."""
    if not fingerprint:
        return None
    summary = link_summary(fingerprint)
    gpu = (summary.get("gpu") or "").upper()
    if preset == "default" and summary["link_class"] == "nvlink":
        name = nvlink_row(gpu)
        return TABLE[name] if name else None
    label = summary["link_label"]
    pcie = label.rsplit("PCIe ", 1)[-1].split(" x") if "PCIe " in label else None
    if preset == "socket":
        return TABLE["socket-loopback"]
    if pcie and len(pcie) == 2 and preset in ("default", "p2p_off"):
        gen, width = pcie[0].split(".")[0], pcie[1]
        return TABLE.get(f"pcie{gen}-x{width}-{'p2p' if preset == 'default' else 'host'}")
    return None


def algorithm_of(run: Run) -> "str | None":
    """The all-reduce algorithm the run asked NCCL for: its plan entry's algorithm axis, else what its
    NCCL_ALGO allowed where it allowed one of ring and tree alone (Ring, Tree, ^Ring, or the
    per-collective allreduce:tree); None: NCCL's choice."""
    if run.transport.get("algorithm") in ALGORITHMS:
        return run.transport["algorithm"]
    said = str((run.transport.get("env") or {}).get("NCCL_ALGO") or "").lower().replace(" ", "")
    if ":" in said:  # per collective: "allreduce:tree;allgather:ring"
        said = next((part.partition(":")[2] for part in said.split(";") if part.partition(":")[0] == "allreduce"), "")
    names = [name for name in said.lstrip("^").split(",") if name]
    allowed = [a for a in ALGORITHMS if (a not in names) == said.startswith("^")]
    return allowed[0] if said and len(allowed) == 1 else None


@dataclass
class Predicted:
    """One workload and global batch on one link or topology at `gpus` GPUs."""

    host: str
    workload: Workload
    global_batch: int
    gpus: int
    link: str  # the link's name, or the measured transport's label
    title: str
    basis: str  # the link table row's basis (measured, cited, derived), "user", or "measured run"
    step_s: float
    exposed_s: "float | None"
    baseline_per_sample_s: "float | None"  # the 1-GPU per-sample time x GPUs this scales against
    price_per_hour: "float | None"
    source: str = ""  # the timeline it replays, or EXPOSED_MODEL
    slowdown: Slowdown = NONE
    measured: "Run | None" = None  # the run, where this is a measured configuration
    shape: str = ""  # "2 nodes x 2 GPUs"

    @property
    def samples_per_s(self) -> float:
        return self.global_batch / self.step_s

    @property
    def per_sample_gpu_s(self) -> float:
        return self.step_s / self.global_batch * self.gpus

    @property
    def scaling(self) -> "float | None":
        return self.baseline_per_sample_s / self.per_sample_gpu_s if self.baseline_per_sample_s else None

    @property
    def samples_per_dollar(self) -> "float | None":
        if not self.price_per_hour or self.price_per_hour < PRICE_FLOOR_PER_HOUR:
            return None
        return self.samples_per_s * 3600 / self.price_per_hour


@dataclass(frozen=True)
class Crossed:
    """What a host's runs of one preset, world size, node count and algorithm crossed: the topology
    their all-reduces are replayed on, its name, and the table's row for that path on one node
    (which the bundle's measured curve replaces in the predictions of that row)."""

    topology: Topology
    name: str
    row: "Link | None" = None


@dataclass
class Against:
    """A measured N-GPU run beside its predictions: from the 1-GPU timeline, from its own steps
    without all-reduce, and the compute + exposed communication model."""

    host: str
    run: Run
    link: str
    from_one_gpu: "float | None"
    from_own_steps: "float | None"
    exposed_model: "float | None"
    slowdown: Slowdown
    shape: str = ""
    algorithm: "str | None" = None

    @property
    def measured(self) -> dict:
        return self.run.metric("step_time_s")["summary"]

    def error(self, predicted: "float | None") -> "float | None":
        return predicted / self.measured["median"] - 1 if predicted is not None else None


@dataclass
class HostPrediction:
    host: str
    predicted: list = field(default_factory=list)  # Predicted
    against: list = field(default_factory=list)  # Against
    notes: list = field(default_factory=list)
    uncurved: set = field(default_factory=set)  # links predicted on without a measured curve
    cpu: bool = False  # its runs' ranks computed on the CPU (gloo): every prediction's compute is that CPU's

    def note(self, line: str) -> None:
        if line not in self.notes:
            self.notes.append(line)


def _ok_ddp(host: dict) -> list:
    """The ok ddp runs with a step time (a bundle the schema accepts may hold an ok run without it)."""
    return [r for r in map(Run, host["runs"]) if r.suite == "ddp" and r.ok and r.metric("step_time_s")]


def _link(spec: str) -> Link:
    try:
        return link(spec)
    except ValueError as err:
        raise UserError(str(err)) from None


def link_specs(names: "list[str] | None") -> list:
    """Links by name, GBPS,LATENCY_US, or INTRA+NETWORK for several nodes (two levels); the report's
    default set without names."""
    specs = []
    for name in names or REPORT_LINKS:
        if "+" in name:
            intra, _, network = name.partition("+")
            pair = (_link(intra), _link(network))
            if pair[0].level != "intra_node" or not pair[1].between_nodes:
                raise UserError(f"link {shown(name)}: two levels are INTRA+NETWORK, a link within a node then one between "
                                f"nodes (e.g. nvlink4+ib-hdr)")
            specs.append(pair)
        else:
            specs.append(_link(name))
    return specs


def spec_topology(spec: "Link | tuple", gpus: int, gpus_per_node: "int | None", algorithm: "str | None") -> "Topology | None":
    """Where N GPUs all-reduce over a link (one node of them, or one GPU a node on a network), or
    over an intra-node link and a network in nodes of gpus_per_node (default 1); None where the GPUs
    do not fill those nodes."""
    if isinstance(spec, tuple):
        intra, network = spec
        per_node = gpus_per_node or 1
        if gpus % per_node:
            return None
        return Topology(per_node, gpus // per_node, intra, network, algorithm)
    return Topology.flat(spec, gpus, algorithm)


def _spec_name(spec) -> tuple[str, str, str]:
    if isinstance(spec, tuple):
        return f"{spec[0].name}+{spec[1].name}", f"{spec[0].title}, nodes joined by {spec[1].title}", "derived"
    return spec.name, spec.title, spec.basis


def _nodes_of(host: dict) -> dict:
    return {launch["id"]: launch.get("nodes", 1) for launch in host["launches"]}


def _node_count(run: Run, nodes_of_launch: dict) -> int:
    """The nodes a run spanned: its transport's record (emulated nodes of one host, or a group's hosts),
    else its launch's hosts."""
    return (run.transport.get("nodes") or {}).get("count") or nodes_of_launch.get(run.launch_id, 1)


class _Curves:
    """The host's all_reduce sweeps as links: (preset, world size, nodes, algorithm) -> the dtype the
    gradients are reduced in -> its usable points; the unusable ones said once."""

    def __init__(self, host: dict, result: HostPrediction) -> None:
        nodes = _nodes_of(host)
        sweeps = [Run(run) for run in host["runs"]]  # collective_curves keeps the runs that timed one all_reduce call
        self.found: dict = {}
        for algorithm in (None, *ALGORITHMS):
            chosen = [r for r in sweeps if algorithm_of(r) == algorithm]
            for key, dtypes in collective_curves(chosen, "all_reduce", nodes).items():
                preset, ranks, count, setting = key[0], key[1], key[2], dict((part[0], part[1:]) for part in key[3:])
                if "protocol" in setting or "gpus" in setting:  # a protocol forced, or one pair of GPUs: not the link's own curve
                    continue
                count = setting["nodes"][0] if "nodes" in setting else count
                kept = {dtype: usable_curve(curve) for dtype, curve in dtypes.items()}
                for dtype, curve in dtypes.items():
                    if len(kept[dtype]) < len(curve):
                        result.note(f"the all_reduce sweep of {preset} at {ranks} rank(s) ({dtype}): {len(curve) - len(kept[dtype])} "
                                    "point(s) with a size or time of 0 left out")
                kept = {dtype: curve for dtype, curve in kept.items() if curve}
                if kept:
                    self.found[preset, ranks, count, algorithm] = kept

    def link(self, preset: str, ranks: int, nodes: int, algorithm: "str | None", run: Run, name: str, title: str) -> "Link | None":
        dtypes = self.found.get((preset, ranks, nodes, algorithm))
        if not dtypes:
            return None
        params = run.params
        reduced = "bfloat16" if params.get("weights_dtype") == "bfloat16" else REDUCE_DTYPES[params.get("grad_reduce_dtype", "fp32")]
        curve = dtypes.get(reduced) or max(dtypes.values(), key=lambda c: c[-1][0])
        return Link.of_curve(name, title, curve, ranks)

    def one_node(self, preset: str, ranks: int, algorithm: "str | None", run: Run) -> "Link | None":
        """The preset's sweep on one node at `ranks`, else at the nearest world size it ran (carried): of
        the algorithm asked for, else of NCCL's choice (a link's bandwidth either way)."""
        for chosen in dict.fromkeys((algorithm, None)):
            sizes = sorted((abs(r - ranks), r) for p, r, n, a in self.found if p == preset and n == 1 and a == chosen and r > 1)
            for _, r in sizes[:1]:
                at = "" if r == ranks else f" at {r} ranks"
                return self.link(preset, r, 1, chosen, run, f"{preset} (measured all_reduce{at})",
                                 f"{preset}, this bundle's all_reduce sweep{at}")
        return None


def _network_preset(run: Run) -> "str | None":
    """The preset whose one-node path is the network between the run's nodes."""
    used, preset = set(run.transport["nccl_used"]), run.preset
    if preset == "socket" or "NET/Socket" in used:
        return "socket"
    if preset == "ib" or "NET/IB" in used:
        return "ib"
    return None


def _crossed(host: dict, run: Run, curves: _Curves, nodes: int) -> "Crossed | None":
    """The topology a measured run's all-reduces crossed: the bundle's sweep at its preset, world size
    and node count; else, on one node, the preset's sweep at another world size or the table's row;
    on several, the sweeps (else rows) of the link within a node and of the network between them."""
    preset, ranks, algorithm = run.preset, run.world_size, algorithm_of(run)
    if ranks % nodes:
        return None  # its ranks do not fill its nodes: no topology to replay on
    fingerprint = host.get("fingerprint")
    here = f", {Topology(ranks // nodes, nodes).shape}" if nodes > 1 else ""
    exact = curves.link(preset, ranks, nodes, algorithm, run, f"{preset}{here} (measured all_reduce)",
                        f"{preset}{here}, this bundle's all_reduce sweep")
    if nodes == 1:
        row = table_link_of(fingerprint, preset)
        if exact is not None:
            return Crossed(Topology(ranks, measured=exact), exact.name, row)
        carried = curves.one_node(preset, ranks, algorithm, run)
        if carried is not None:
            return Crossed(Topology.flat(carried, ranks, algorithm), carried.name, row)
        return Crossed(Topology.flat(row, ranks, algorithm), row.name, row) if row is not None else None
    per_node = ranks // nodes
    if exact is not None:
        return Crossed(Topology(per_node, nodes, algorithm=algorithm, measured=exact), exact.name)
    intra = curves.one_node("default", per_node, algorithm, run) or table_link_of(fingerprint, "default")
    between = _network_preset(run)
    network = (curves.link(preset, nodes, nodes, algorithm, run, f"{preset} between nodes (measured all_reduce)",
                           f"{preset} between nodes, this bundle's all_reduce sweep")
               or (curves.one_node(between, 2, algorithm, run) if between else None)
               or (table_link_of(fingerprint, between) if between else None))
    if intra is None or network is None:
        return None
    return Crossed(Topology(per_node, nodes, intra, network, algorithm), f"{intra.name} / {network.name}, {Topology(per_node, nodes).shape}")


def _transport_links(host: dict, runs: list, curves: _Curves) -> dict:
    """(preset, ranks, nodes, algorithm) -> what this host's runs crossed there (Crossed), or None."""
    nodes = _nodes_of(host)
    found: dict = {}
    for run in runs:
        key = (run.preset, run.world_size, _node_count(run, nodes), algorithm_of(run))
        if key[1] >= 2 and key not in found:
            found[key] = _crossed(host, run, curves, key[2])
    return found


def _key(run: Run, nodes: dict) -> tuple:
    return run.preset, run.world_size, _node_count(run, nodes), algorithm_of(run)


# Distinct bucket sizes timed exactly on one topology; past them (a timeline of many thousands of
# sizes) a size's time is interpolated between the nearest of GRID_STEPS sizes a doubling, within
# about 1e-5 of its own (the times are affine in the size on a row, smooth on a curve).
EXACT_SIZES = 4096
GRID_STEPS = 64


class _Durations:
    """Each topology's all-reduce time per size, computed once: a replay asks for every bucket, and
    the same buckets are replayed on the same topology many times."""

    def __init__(self) -> None:
        self._took: dict = {}

    def of(self, topology: Topology):
        took, grid = self._took.setdefault(topology, ({}, {}))

        def on_grid(step: int) -> float:
            if step not in grid:
                grid[step] = topology.time_s(2 ** (step / GRID_STEPS))
            return grid[step]

        def seconds(nbytes: float) -> float:
            found = took.get(nbytes)
            if found is None:
                if len(took) < EXACT_SIZES or nbytes < 1:
                    found = topology.time_s(nbytes)
                else:
                    step = math.floor(math.log2(nbytes) * GRID_STEPS)
                    low, high = 2 ** (step / GRID_STEPS), 2 ** ((step + 1) / GRID_STEPS)
                    found = on_grid(step) + (on_grid(step + 1) - on_grid(step)) * (nbytes - low) / (high - low)
                took[nbytes] = found
            return found
        return seconds


def _sweeps_of_rows(links_here: dict) -> dict:
    """Table row name -> {ranks: the bundle's sweep of that row's path on one node at those ranks,
    named as the row}: where this host measured a row's path, its sweep wins over the row."""
    found: dict = {}
    for crossed in links_here.values():
        if crossed is None or crossed.row is None:
            continue
        row, sweep = crossed.row, crossed.topology.measured or crossed.topology.intra
        if sweep is not None and sweep is not row:
            found.setdefault(row.name, {})[sweep.ranks] = replace(
                sweep, name=row.name, level=row.level, transport=row.transport,
                title=f"{row.title}, as this bundle's all_reduce sweep measured it")
    return found


def _swept(spec: "Link | tuple", gpus: int, gpus_per_node: "int | None", sweeps: dict) -> "Link | tuple":
    """The spec with each table row this host measured replaced by its sweep at the nearest ranks."""
    def part(row: Link, ranks: int) -> Link:
        found = sweeps.get(row.name)
        return found[min(found, key=lambda r: (abs(r - ranks), r))] if found else row
    if isinstance(spec, tuple):
        per_node = gpus_per_node or 1
        return part(spec[0], per_node), part(spec[1], max(gpus // per_node, 1))
    return part(spec, gpus)


def _curve_notes(result: HostPrediction, name: str, topology: Topology, largest_bucket: float) -> None:
    """Where a prediction's all-reduce times come from no measurement, or from one carried past it."""
    if topology.measured is not None:
        return
    parts = []
    if topology.intra is not None and topology.gpus_per_node > 1:
        parts.append(("within a node", topology.intra, topology.gpus_per_node))
    if topology.network is not None and topology.nodes > 1:
        parts.append(("between nodes", topology.network, topology.nodes))
    for level, part, ranks in parts:
        if not part.points:
            result.uncurved.add(f"{part.name} ({part.busbw_gbps:g} GB/s, {part.latency_us:g} us, {part.basis})")
            continue
        if largest_bucket > part.points[-1][0]:
            result.note(f"link {part.name}: buckets of up to {largest_bucket:.4g} bytes are past its curve's largest size "
                        f"({part.points[-1][0]:.4g} bytes): taken at that size's bandwidth")
        if ranks != part.ranks:
            result.note(f"link {part.name}: its curve was measured at {part.ranks} ranks; at {ranks} {level} it is "
                        "carried by the ring and tree model (bench/common/allreduce.py)")
    if len(parts) == 2:
        result.note(f"{name} at {topology.shape}: no all_reduce was measured on this topology; its all-reduces are "
                    "the ring and tree model over its two links (bench/common/allreduce.py)")


def predict_host(host: dict, name: str, specs: list, gpus: "int | None", gpus_per_node: "int | None" = None,
                 algorithm: "str | None" = None) -> HostPrediction:
    """Every ddp configuration of one host of a bundle on every link or topology of `specs`."""
    result = HostPrediction(name)
    runs = []
    for run in _ok_ddp(host):
        problem = run_problem(run)
        if problem is None:
            runs.append(run)
        else:
            result.note(f"{run_name(run)}: left out: {problem}")
    if not runs:
        return result
    result.cpu = not any(run.on_gpu for run in runs)
    if result.cpu:
        result.note(CPU_NOTE)
    price = host.get("price_per_hour")
    if price is not None and price < PRICE_FLOOR_PER_HOUR:
        result.note(f"price_per_hour {price:g} USD is below {PRICE_FLOOR_PER_HOUR:g} USD, which no machine rents for: "
                    "no samples per dollar")
    profiles, durations, curves = _Profiles(), _Durations(), _Curves(host, result)
    links_here = _transport_links(host, runs, curves)
    nodes = _nodes_of(host)
    one_gpu = {(workload_of(r), r.params["global_batch"]): r for r in runs if r.world_size == 1}
    slowdowns = _slowdowns(runs, links_here, profiles, durations, nodes)
    sweeps = _sweeps_of_rows(links_here)
    has_timeline = any(r.timeline for r in runs)
    if not has_timeline:
        result.note(FALLBACK_NOTE)
    configurations = sorted({(workload_of(r), r.params["global_batch"]) for r in runs})
    for work, batch in configurations:
        ran = sorted({r.world_size for r in runs if workload_of(r) == work and r.world_size > 1})
        base = one_gpu.get((work, batch))
        base_per_sample = _step_median(base) / batch if base else None
        for n in [gpus] if gpus else ran or [2]:
            accum = batch / (n * work.micro_batch)
            if accum != int(accum) or accum < 1:
                result.note(f"{work.model}, global batch {batch}: not divisible by {n} GPUs x micro-batch "
                            f"{work.micro_batch}; no prediction at {n} GPUs")
                continue
            timeline, source = _timeline_for(runs, one_gpu, work, batch, n, int(accum), profiles)
            if source == ONE_GPU_SOURCE and timeline is not None and ready_at_the_end(timeline):
                result.note(NO_OVERLAP_NOTE.format(model=work.model))
            largest = max((b.nbytes for b in timeline.buckets), default=0) if timeline is not None else 0
            for spec in specs:
                spec = _swept(spec, n, gpus_per_node, sweeps)
                topology = spec_topology(spec, n, gpus_per_node, algorithm)
                spec_name, title, basis = _spec_name(spec)
                if topology is None:
                    result.note(f"link {spec_name}: {n} GPUs do not fill nodes of {gpus_per_node}; no prediction")
                    continue
                _curve_notes(result, spec_name, topology, largest)
                slowdown = slowdowns.of(spec_name)
                done = _step(timeline, durations.of(topology), slowdown, base, n)
                if done is None:
                    continue
                if not (math.isfinite(done.step_s) and done.step_s > 0):
                    result.note(f"{work.model}, global batch {batch}, {spec_name}: the replayed step is {done.step_s:g} s "
                                "(its timeline's figures are all 0); no prediction")
                    continue
                result.predicted.append(Predicted(name, work, batch, n, spec_name, title, basis, done.step_s, done.exposed_s,
                                                  base_per_sample, price, source, slowdown, shape=topology.shape))
            measured = [run for run in runs if workload_of(run) == work and run.params["global_batch"] == batch
                        and run.world_size == n]
            for run in measured:
                preset, count = run.preset, _node_count(run, nodes)
                shape = Topology(n // count, count).shape if n % count == 0 else f"{count} nodes"
                # Launch repeats measure one configuration again: each row says which it is.
                repeats = sum(other.preset == preset for other in measured)
                repeat = f", launch repeat {run.repeat}" if repeats > 1 else ""
                result.predicted.append(Predicted(name, work, batch, n, f"measured: {preset}{repeat}", f"measured, {preset}{repeat}",
                                                  "measured run", _step_median(run), None, base_per_sample, price,
                                                  measured=run, shape=shape))
                result.against.append(_against(name, run, one_gpu, links_here, slowdowns, profiles, durations, nodes))
    if result.uncurved:
        result.note(f"no measured all_reduce curve, in this bundle or the link table, for {', '.join(sorted(result.uncurved))}: "
                    "their all-reduces follow the busbw and latency given, not a sweep")
    if any(p.slowdown == NONE and p.measured is None for p in result.predicted) and has_timeline:
        result.note("the slowdown under communication (compute beside an all-reduce, an all-reduce longer in the step "
                    "than on its curve) is applied only on links this host measured it on (a DDP run with and without "
                    "its all-reduces); on the others it is taken as none, so their steps are the least they can be")
    return result


def ready_at_the_end(timeline: Timeline) -> bool:
    """Every gradient bucket ready in the backward's last tenth: the timeline leaves no all-reduce to overlap."""
    return bool(timeline.buckets) and timeline.buckets[0].ready_s >= 0.9 * timeline.backward_s


def _timeline_for(runs: list, one_gpu: dict, work: Workload, batch: int, gpus: int, accum: int,
                  profiles: _Profiles) -> "tuple[Timeline | None, str]":
    """The compute of one step at `gpus` GPUs: the N-GPU run's steps without all-reduce where the host
    ran N GPUs with this workload, else the 1-GPU run's, counted again for N GPUs."""
    for run in runs:
        if workload_of(run) == work and run.world_size == gpus and run.params["global_batch"] == batch:
            own = profiles.own(run)
            if own is not None:
                return own.timeline(accum), own.source
    profile = _one_gpu_profile(one_gpu, work, batch, profiles)
    if profile is not None:
        return profile.timeline(accum), profile.source
    return None, EXPOSED_MODEL


def _one_gpu_profile(one_gpu: dict, work: Workload, batch: int, profiles: _Profiles) -> "Profile | None":
    run = one_gpu.get((work, batch)) or next((r for (w, _), r in sorted(one_gpu.items(), key=lambda item: item[0][1], reverse=True)
                                              if w == work and r.timeline), None)
    if run is None:
        return None
    return profiles.of(run, "steps", ONE_GPU_SOURCE, True)


def _step(timeline: "Timeline | None", allreduce_s, slowdown: Slowdown, base: "Run | None", gpus: int) -> "Replayed | None":
    """The replayed step, or without a timeline the compute + exposed communication model
    over the 1-GPU run's step."""
    if timeline is not None:
        return replay(timeline, allreduce_s, slowdown)
    if base is None:
        return None
    compute = _step_median(base) / gpus  # strong scaling: each GPU does 1/N of the 1-GPU step's samples
    return exposed_only(Timeline(0.0, compute, (Bucket(compute, grad_bytes(base)),), 0.0), allreduce_s)


@dataclass
class Slowdowns:
    """What a step's own all-reduces do on this host that their curve does not say, per link: each
    N-GPU run's last backward with its all-reduces against the same without, replayed on the link the
    run crossed (replay.fitted_slowdown). A link's figure is the median over its runs; set against one
    of them, the median over the others, those of the same configuration (its other repeats) first,
    so that a run is never predicted from its own stretch."""

    fitted: dict  # link name -> [(run, Slowdown)], for what the run crossed and the table's row of the path

    def of(self, link_name: str, leave_out: "dict | None" = None) -> Slowdown:
        others = [(run, s) for run, s in self.fitted.get(link_name, []) if run is not leave_out]
        alike = [(run, s) for run, s in others if leave_out is not None and _configuration(run) == _configuration(leave_out)]
        values = [s for _, s in alike or others]
        if not values:
            return NONE
        return Slowdown(_median(s.compute for s in values), _median(s.comm for s in values))


def _configuration(run: Run) -> tuple:
    return workload_of(run), run.params["global_batch"], run.world_size, run.preset


def _slowdowns(runs: list, links_here: dict, profiles: _Profiles, durations: _Durations, nodes: dict) -> Slowdowns:
    found: dict = {}
    for run in runs:
        crossed = links_here.get(_key(run, nodes))
        own = profiles.of(run, "steps_without_allreduce", "", False)
        timed = run.timeline.get("steps")
        if crossed is None or own is None or not timed:
            continue
        compute_end = _median(max(step["bucket_ready_s"], default=0.0) for step in timed)
        backward_end = _median(step["last_backward_s"] for step in timed)
        fitted = fitted_slowdown(own.timeline(own.accum), compute_end, backward_end, durations.of(crossed.topology))
        for name in {crossed.name} | ({crossed.row.name} if crossed.row else set()):
            found.setdefault(name, []).append((run, fitted))
    return Slowdowns(found)


def _against(name: str, run: Run, one_gpu: dict, links_here: dict, slowdowns: Slowdowns, profiles: _Profiles,
             durations: _Durations, nodes: dict) -> Against:
    work, batch, n = workload_of(run), run.params["global_batch"], run.world_size
    preset, count, algorithm = _key(run, nodes)[0], _key(run, nodes)[2], algorithm_of(run)
    shape = Topology(n // count, count).shape if n % count == 0 else f"{count} nodes"
    crossed = links_here.get(_key(run, nodes))
    if crossed is None:
        return Against(name, run, f"{preset} (no all_reduce curve or table row)", None, None, None, NONE, shape, algorithm)
    accum = run.params["grad_accum"]
    slowdown = slowdowns.of(crossed.name, leave_out=run)
    allreduce_s = durations.of(crossed.topology)
    profile = _one_gpu_profile(one_gpu, work, batch, profiles)
    own = profiles.own(run)
    exposed = _step(None, allreduce_s, NONE, one_gpu.get((work, batch)), n)
    return Against(
        name, run, crossed.name,
        replay(profile.timeline(accum), allreduce_s, slowdown).step_s if profile else None,
        replay(own.timeline(accum), allreduce_s, slowdown).step_s if own else None,
        exposed.step_s if exposed else None, slowdown, shape, algorithm)


@dataclass(frozen=True)
class ErrorRow:
    """The predictor's signed error (predicted / measured - 1) over the measured runs of one world
    size, topology, link and algorithm: the mean, least and most of each prediction's."""

    host: str
    gpus: int
    shape: str
    link: str
    algorithm: str
    runs: int
    from_one_gpu: tuple  # (mean, least, most) or ()
    from_own_steps: tuple
    exposed_model: tuple


def _errors(values: list) -> tuple:
    kept = [v for v in values if v is not None and math.isfinite(v)]
    return (statistics.fmean(kept), min(kept), max(kept)) if kept else ()


def error_table(found: list[HostPrediction]) -> list[ErrorRow]:
    """One row per host, world size, topology, link and algorithm, over every measured run there."""
    groups: dict = {}
    for host in found:
        for a in host.against:
            key = (host.host, a.run.world_size, a.shape, a.link, a.algorithm or CHOSEN)
            groups.setdefault(key, []).append(a)
    return [ErrorRow(*key, len(rows), _errors([a.error(a.from_one_gpu) for a in rows]),
                     _errors([a.error(a.from_own_steps) for a in rows]), _errors([a.error(a.exposed_model) for a in rows]))
            for key, rows in sorted(groups.items(), key=lambda item: (item[0][0], item[0][1], item[0][2], item[0][3], item[0][4]))]


def check_arguments(gpus: "int | None", gpus_per_node: "int | None", specs: list) -> None:
    """--gpus and --gpus-per-node within sense: one line each, else nothing."""
    if gpus is not None and not 2 <= gpus <= MAX_GPUS:
        raise UserError(f"--gpus {gpus}: a prediction needs at least 2 GPUs to cross a link, and at most {MAX_GPUS}; "
                        "give --gpus 2 or more")
    if gpus_per_node is None:
        return
    if not 1 <= gpus_per_node <= MAX_GPUS_PER_NODE:
        raise UserError(f"--gpus-per-node {gpus_per_node}: a node holds 1 to {MAX_GPUS_PER_NODE} GPUs; give one of those "
                        "(e.g. --gpus-per-node 8)")
    if gpus is not None and gpus_per_node > gpus:
        raise UserError(f"--gpus-per-node {gpus_per_node} is more than --gpus {gpus}; give at most {gpus}")
    if not any(isinstance(spec, tuple) for spec in specs):
        raise UserError(f"--gpus-per-node {gpus_per_node} applies to INTRA+NETWORK links; name one (e.g. --link nvlink4+eth-25g)")


def predict(bundles: list[dict], names: "list[str] | None" = None, gpus: "int | None" = None,
            gpus_per_node: "int | None" = None, algorithm: "str | None" = None) -> list[HostPrediction]:
    """Every host with ddp runs in the bundles, predicted on the links named (the report's set without names)."""
    specs = link_specs(names)
    check_arguments(gpus, gpus_per_node, specs)
    found = []
    for bundle in bundles:
        for host in bundle["hosts"]:
            if _ok_ddp(host):
                found.append(predict_host(host, f"{host['name']} ({bundle['run_id']})" if len(bundles) > 1 else host["name"],
                                          specs, gpus, gpus_per_node, algorithm))
    return found


def relative(value: "float | None") -> str:
    return f"{value:+.1%}" if value is not None and math.isfinite(value) else "-"
