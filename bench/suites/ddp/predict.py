"""What link do I need? Each ddp configuration of a host, predicted on every link from the step's
timeline (bench/common/replay.py), with its scaling, samples/s and samples per dollar, and set
against the runs the host measured.

Per workload (model, recipe, sequence, micro-batch) and global batch, the step of N GPUs is:
- the compute, from a timeline run of that workload: the N-GPU run's steps without all-reduce
  (timeline_steps; DDP's own cost included) where the host ran N GPUs, else the 1-GPU run, its
  micro-batches counted again for N GPUs' share of the global batch (the 1-GPU run's replay is
  calibrated to its measured step);
- on each link, its buckets' all-reduces replayed: the bundle's all_reduce sweep of a transport
  where it measured one (it wins over the table), else the link table's row;
- the slowdown of compute under communication, where this host measured it for that link (a
  DDP run with and without its all-reduces), else none (and a note says so).
A bundle without timelines (older) falls back to seed 002's fully exposed model, and says so.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field, replace

from bench.common.allreduce import TABLE, Fabric, Link, link
from bench.common.links import link_summary
from bench.common.replay import NONE, Bucket, Replayed, Slowdown, Timeline, exposed_only, fitted_slowdown, replay
from bench.errors import UserError
from bench.suites.ddp.derived import REDUCE_DTYPES
from bench.suites.training_derived import collective_curves, curve_key
from bench.suites.training import training_recipe

# seed 000's PCIe 4.0 x1/x4/x8/x16 boxes (RTX 4090s: no P2P, so through host memory) and its RTX
# 3090 bridge, a datacenter NVLink, and two networks between 1-GPU nodes.
REPORT_LINKS = ("pcie4-x1-host", "pcie4-x4-host", "pcie4-x8-host", "pcie4-x16-host", "rtx3090-nvlink-bridge",
                "nvlink4", "ib-hdr", "eth-25g")
ONE_GPU_SOURCE = "the 1-GPU run's timeline"
# Measured: compiled gpt2-large, 2x H200 over SHM, +32% to +36% (benchmarks/results/timeline_replay_h100.md).
NO_OVERLAP_NOTE = ("{model}: its 1-GPU timeline has every gradient bucket ready at the backward's end (a compiled backward is one "
                   "graph on one GPU; on several DDP splits it at its buckets and overlaps them), so the predictions from it "
                   "overlap no all-reduce with the backward: on slow links they are upper bounds")
FALLBACK_NOTE = ("no step timeline in this bundle's runs (recorded since the timeline landed): predictions use seed 002's "
                 "fully exposed model (compute, then every all-reduce)")


@dataclass(frozen=True, order=True)
class Workload:
    model: str
    recipe: str
    seq_len: "int | None"
    micro_batch: int


def workload_of(run: dict) -> Workload:
    p = run["params"]
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


def profile_of(run: dict, arm: str, source: str, calibrate_to: "float | None" = None) -> "Profile | None":
    """The run's timeline arm ("steps" or "steps_without_allreduce") as a Profile; calibrate_to: the
    run's measured median step, which the profile's own step then equals."""
    found = run.get("timeline") or {}
    steps = found.get(arm) or []
    if not steps:
        return None
    accum = run["params"]["grad_accum"]
    figure = {name: _median(step[name] for step in steps)
              for name in ("step_s", "forward_s", "backward_s", "last_backward_start_s", "last_backward_s")}
    ready = [_median(step["bucket_ready_s"][b] for step in steps) for b in range(len(found["bucket_bytes"]))]
    earlier = (figure["backward_s"] - figure["last_backward_s"]) / (accum - 1) if accum > 1 else figure["last_backward_s"]
    after = figure["step_s"] - figure["last_backward_start_s"] - figure["last_backward_s"]
    if calibrate_to is not None:
        after += calibrate_to - figure["step_s"]  # the harness's step: between steps too
    buckets = tuple(Bucket(min(r, figure["last_backward_s"]), size) for r, size in zip(ready, found["bucket_bytes"]))
    return Profile(figure["forward_s"] / accum, earlier, figure["last_backward_start_s"], figure["last_backward_s"],
                   buckets, max(after, 0.0), accum, source)


def own_profile(run: dict) -> "Profile | None":
    """An N-GPU run's step with its all-reduces taken out: its timed steps' forwards, earlier backwards
    and optimizer, none of which communicate (DDP reduces in the last backward and waits for it
    there), with the last backward of its steps without all-reduce (timeline_steps)."""
    alone = profile_of(run, "steps_without_allreduce", "")
    timed = profile_of(run, "steps", "", calibrate_to=_step_median(run))
    if alone is None or timed is None:
        return None
    return replace(timed, last_backward_s=alone.last_backward_s, buckets=alone.buckets,
                   source=f"the {run['world_size']}-GPU run's steps without all-reduce")


def _step_median(run: dict) -> float:
    return run["metrics"]["step_time_s"]["summary"]["median"]


def grad_bytes(run: dict) -> float:
    """The gradient bytes DDP all-reduces per step: the timeline's buckets, else what the run says,
    else its parameters at the bytes they are reduced in (a 1-GPU run reduces nothing)."""
    buckets = (run.get("timeline") or {}).get("bucket_bytes")
    if buckets:
        return float(sum(buckets))
    said = run["metrics"].get("grad_allreduce_bytes")
    if said and said["summary"]["median"] > 0:
        return said["summary"]["median"]
    p = run["params"]
    half = p.get("weights_dtype") == "bfloat16" or p.get("grad_reduce_dtype") == "bf16"
    return float(p.get("num_params", 0)) * (2 if half else 4)


def table_link_of(fingerprint: "dict | None", preset: str) -> "Link | None":
    """The link table's row for the path a preset takes on this host, where the table has one."""
    if not fingerprint:
        return None
    summary = link_summary(fingerprint)
    gpu = (summary.get("gpu") or "").upper()
    if preset == "default" and summary["link_class"] == "nvlink":
        for needle, name in (("RTX 3090", "rtx3090-nvlink-bridge"), ("A100", "nvlink3"), ("H100", "nvlink4"),
                             ("H200", "nvlink4"), ("B200", "nvlink5")):
            if needle in gpu:
                return TABLE[name]
        return None
    label = summary["link_label"]
    pcie = label.rsplit("PCIe ", 1)[-1].split(" x") if "PCIe " in label else None
    if preset == "socket":
        return TABLE["socket-loopback"]
    if pcie and len(pcie) == 2 and preset in ("default", "p2p_off"):
        gen, width = pcie[0].split(".")[0], pcie[1]
        return TABLE.get(f"pcie{gen}-x{width}-{'p2p' if preset == 'default' else 'host'}")
    return None


@dataclass
class Predicted:
    """One workload and global batch on one link at `gpus` GPUs."""

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
    source: str = ""  # the timeline it replays, or "seed 002's model"
    slowdown: Slowdown = NONE
    measured: "dict | None" = None  # the run, where this is a measured configuration

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
        return self.samples_per_s * 3600 / self.price_per_hour if self.price_per_hour else None


@dataclass
class Against:
    """A measured N-GPU run beside its predictions: from the 1-GPU timeline, from its own steps
    without all-reduce, and seed 002's model."""

    host: str
    run: dict
    link: str
    from_one_gpu: "float | None"
    from_own_steps: "float | None"
    exposed_model: "float | None"
    slowdown: Slowdown

    @property
    def measured(self) -> dict:
        return self.run["metrics"]["step_time_s"]["summary"]

    def error(self, predicted: "float | None") -> "float | None":
        return predicted / self.measured["median"] - 1 if predicted is not None else None


@dataclass
class HostPrediction:
    host: str
    predicted: list = field(default_factory=list)  # Predicted
    against: list = field(default_factory=list)  # Against
    notes: list = field(default_factory=list)


def _ok_ddp(host: dict) -> list:
    """The ok ddp runs with a step time (a bundle the schema accepts may hold an ok run without it)."""
    return [r for r in host["runs"] if r["suite"] == "ddp" and r["status"] == "ok" and r["metrics"].get("step_time_s")]


def _fabric(spec: "Link | tuple", gpus: int, gpus_per_node: "int | None") -> "Fabric | None":
    """Where N GPUs all-reduce over a link, or over an intra-node link and a network (a pair)."""
    if isinstance(spec, tuple):
        intra, network = spec
        per_node = gpus_per_node or 1
        if gpus % per_node:
            return None
        return Fabric(intra, per_node, gpus // per_node, network)
    if spec.level == "inter_node":
        return Fabric(None, 1, gpus, spec)  # one GPU per node, as seed 002's 2 nodes x 1 GPU
    return Fabric(spec, gpus)


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
            if pair[0].level != "intra_node" or pair[1].level != "inter_node":
                raise UserError(f"link {name!r}: two levels are INTRA+NETWORK, a link within a node then one between "
                                f"nodes (e.g. nvlink4+ib-hdr)")
            specs.append(pair)
        else:
            specs.append(_link(name))
    return specs


def _spec_name(spec) -> tuple[str, str, str]:
    if isinstance(spec, tuple):
        return f"{spec[0].name}+{spec[1].name}", f"{spec[0].title}, nodes joined by {spec[1].title}", "derived"
    return spec.name, spec.title, spec.basis


def _transport_links(host: dict) -> dict:
    """(preset, ranks) -> (the Link this host's runs crossed, the table's row for that path or None):
    its measured all_reduce sweep on one node, which wins, else that row."""
    nodes = {launch["id"]: launch.get("nodes", 1) for launch in host["launches"]}
    curves = collective_curves(host["runs"], "all_reduce", nodes)
    found = {}
    for run in _ok_ddp(host):
        preset, ranks = run["transport"]["preset"], run["world_size"]
        if ranks < 2 or (preset, ranks) in found:
            continue
        row = table_link_of(host["fingerprint"], preset)
        dtypes = curves.get(curve_key(run, nodes))
        if dtypes:
            params = run["params"]
            reduced = "bfloat16" if params.get("weights_dtype") == "bfloat16" else REDUCE_DTYPES[params.get("grad_reduce_dtype", "fp32")]
            curve = dtypes.get(reduced) or max(dtypes.values(), key=lambda c: c[-1][0])
            found[preset, ranks] = (Link.of_curve(f"{preset} (measured all_reduce)", f"{preset}, this bundle's all_reduce sweep",
                                                  curve, ranks), row)
        elif row is not None:
            found[preset, ranks] = (row, row)
    return found


def predict_host(host: dict, name: str, specs: list, gpus: "int | None", gpus_per_node: "int | None" = None) -> HostPrediction:
    """Every ddp configuration of one host of a bundle on every link of `specs`."""
    result = HostPrediction(name)
    runs = _ok_ddp(host)
    if not runs:
        return result
    price = host.get("price_per_hour")
    links_here = _transport_links(host)
    one_gpu = {(workload_of(r), r["params"]["global_batch"]): r for r in runs if r["world_size"] == 1}
    slowdowns = _slowdowns(runs, links_here)
    # A table row whose path this host measured with an all_reduce sweep: the sweep wins.
    measured_here = {row.name: replace(crossed, name=row.name, title=f"{row.title}, as this bundle's all_reduce sweep measured it")
                     for crossed, row in links_here.values() if row is not None and crossed is not row}
    specs = [tuple(measured_here.get(part.name, part) for part in spec) if isinstance(spec, tuple) else measured_here.get(spec.name, spec)
             for spec in specs]
    has_timeline = any(r.get("timeline") for r in runs)
    if not has_timeline:
        result.notes.append(FALLBACK_NOTE)
    configurations = sorted({(workload_of(r), r["params"]["global_batch"]) for r in runs})
    for work, batch in configurations:
        ran = sorted({r["world_size"] for r in runs if workload_of(r) == work and r["world_size"] > 1})
        base = one_gpu.get((work, batch))
        base_per_sample = _step_median(base) / batch if base else None
        for n in [gpus] if gpus else ran or [2]:
            accum = batch / (n * work.micro_batch)
            if accum != int(accum) or accum < 1:
                result.notes.append(f"{work.model}, global batch {batch}: not divisible by {n} GPUs x micro-batch "
                                    f"{work.micro_batch}; no prediction at {n} GPUs")
                continue
            timeline, source = _timeline_for(runs, one_gpu, work, batch, n, int(accum))
            if source == ONE_GPU_SOURCE and timeline is not None and ready_at_the_end(timeline):
                said = NO_OVERLAP_NOTE.format(model=work.model)
                if said not in result.notes:
                    result.notes.append(said)
            for spec in specs:
                fabric = _fabric(spec, n, gpus_per_node)
                spec_name, title, basis = _spec_name(spec)
                if fabric is None:
                    result.notes.append(f"link {spec_name}: {n} GPUs do not fill nodes of {gpus_per_node}; no prediction")
                    continue
                slowdown = slowdowns.of(spec_name)
                done = _step(timeline, fabric, slowdown, base, n)
                if done is not None:
                    result.predicted.append(Predicted(name, work, batch, n, spec_name, title, basis, done.step_s, done.exposed_s,
                                                      base_per_sample, price, source, slowdown))
            for run in runs:
                if workload_of(run) == work and run["params"]["global_batch"] == batch and run["world_size"] == n:
                    preset = run["transport"]["preset"]
                    result.predicted.append(Predicted(name, work, batch, n, f"measured: {preset}", f"measured, {preset}",
                                                      "measured run", _step_median(run), None, base_per_sample, price, measured=run))
                    result.against.append(_against(name, run, one_gpu, links_here, slowdowns))
    if any(p.slowdown == NONE and p.measured is None for p in result.predicted) and has_timeline:
        result.notes.append("the slowdown under communication (compute beside an all-reduce, an all-reduce longer in the step "
                            "than on its curve) is applied only on links this host measured it on (a DDP run with and without "
                            "its all-reduces); on the others it is taken as none, so their steps are the least they can be")
    return result


def ready_at_the_end(timeline: Timeline) -> bool:
    """Every gradient bucket ready in the backward's last tenth: the timeline leaves no all-reduce to overlap."""
    return bool(timeline.buckets) and timeline.buckets[0].ready_s >= 0.9 * timeline.backward_s


def _timeline_for(runs: list, one_gpu: dict, work: Workload, batch: int, gpus: int, accum: int) -> "tuple[Timeline | None, str]":
    """The compute of one step at `gpus` GPUs: the N-GPU run's steps without all-reduce where the host
    ran N GPUs with this workload, else the 1-GPU run's, counted again for N GPUs."""
    for run in runs:
        if workload_of(run) == work and run["world_size"] == gpus and run["params"]["global_batch"] == batch:
            own = own_profile(run)
            if own is not None:
                return own.timeline(accum), own.source
    profile = _one_gpu_profile(one_gpu, work, batch)
    if profile is not None:
        return profile.timeline(accum), profile.source
    return None, "seed 002's model"


def _one_gpu_profile(one_gpu: dict, work: Workload, batch: int) -> "Profile | None":
    run = one_gpu.get((work, batch)) or next((r for (w, _), r in sorted(one_gpu.items(), key=lambda item: item[0][1], reverse=True)
                                              if w == work and r.get("timeline")), None)
    if run is None:
        return None
    return profile_of(run, "steps", ONE_GPU_SOURCE, calibrate_to=_step_median(run))


def _step(timeline: "Timeline | None", fabric: Fabric, slowdown: Slowdown, base: "dict | None", gpus: int) -> "Replayed | None":
    """The replayed step, or without a timeline seed 002's model over the 1-GPU run's step."""
    if timeline is not None:
        return replay(timeline, fabric.time_s, slowdown)
    if base is None:
        return None
    compute = _step_median(base) / gpus  # strong scaling: each GPU does 1/N of the 1-GPU step's samples
    return exposed_only(Timeline(0.0, compute, (Bucket(compute, grad_bytes(base)),), 0.0), fabric.time_s)


@dataclass
class Slowdowns:
    """What a step's own all-reduces do on this host that their curve does not say, per link: each
    N-GPU run's last backward with its all-reduces against the same without, replayed on the link the
    run crossed (replay.fitted_slowdown). A link's figure is the median over its runs; set against one
    of them, the median over the others, those of the same configuration (its other repeats) first,
    so that a run is never predicted from its own stretch."""

    fitted: dict  # link name -> [(run, Slowdown)], for the measured curve and the table's row of the path

    def of(self, link_name: str, leave_out: "dict | None" = None) -> Slowdown:
        others = [(run, s) for run, s in self.fitted.get(link_name, []) if run is not leave_out]
        alike = [(run, s) for run, s in others if leave_out is not None and _configuration(run) == _configuration(leave_out)]
        values = [s for _, s in alike or others]
        if not values:
            return NONE
        return Slowdown(_median(s.compute for s in values), _median(s.comm for s in values))


def _configuration(run: dict) -> tuple:
    return workload_of(run), run["params"]["global_batch"], run["world_size"], run["transport"]["preset"]


def _slowdowns(runs: list, links_here: dict) -> Slowdowns:
    found: dict = {}
    for run in runs:
        crossed, row = links_here.get((run["transport"]["preset"], run["world_size"]), (None, None))
        own = profile_of(run, "steps_without_allreduce", "")
        timed = (run.get("timeline") or {}).get("steps")
        if crossed is None or own is None or not timed:
            continue
        compute_end = _median(max(step["bucket_ready_s"], default=0.0) for step in timed)
        backward_end = _median(step["last_backward_s"] for step in timed)
        fitted = fitted_slowdown(own.timeline(own.accum), compute_end, backward_end,
                                 lambda nbytes: crossed.time_s(nbytes, run["world_size"]))
        for name in {crossed.name} | ({row.name} if row else set()):
            found.setdefault(name, []).append((run, fitted))
    return Slowdowns(found)


def _against(name: str, run: dict, one_gpu: dict, links_here: dict, slowdowns: Slowdowns) -> Against:
    work, batch, n = workload_of(run), run["params"]["global_batch"], run["world_size"]
    crossed, _ = links_here.get((run["transport"]["preset"], n), (None, None))
    if crossed is None:
        return Against(name, run, f"{run['transport']['preset']} (no all_reduce curve or table row)", None, None, None, NONE)
    accum = run["params"]["grad_accum"]
    slowdown = slowdowns.of(crossed.name, leave_out=run)
    fabric = Fabric(crossed, n)
    profile = _one_gpu_profile(one_gpu, work, batch)
    own = own_profile(run)
    exposed = _step(None, fabric, NONE, one_gpu.get((work, batch)), n)
    return Against(
        name, run, crossed.name,
        replay(profile.timeline(accum), fabric.time_s, slowdown).step_s if profile else None,
        replay(own.timeline(accum), fabric.time_s, slowdown).step_s if own else None,
        exposed.step_s if exposed else None, slowdown)


def predict(bundles: list[dict], names: "list[str] | None" = None, gpus: "int | None" = None,
            gpus_per_node: "int | None" = None) -> list[HostPrediction]:
    """Every host with ddp runs in the bundles, predicted on the links named (the report's set without names)."""
    if gpus is not None and gpus < 2:
        raise UserError(f"--gpus {gpus}: a prediction needs at least 2 GPUs to cross a link; give --gpus 2 or more")
    specs = link_specs(names)
    found = []
    for bundle in bundles:
        for host in bundle["hosts"]:
            if _ok_ddp(host):
                found.append(predict_host(host, f"{host['name']} ({bundle['run_id']})" if len(bundles) > 1 else host["name"],
                                          specs, gpus, gpus_per_node))
    return found


def relative(value: "float | None") -> str:
    return f"{value:+.1%}" if value is not None and math.isfinite(value) else "-"

