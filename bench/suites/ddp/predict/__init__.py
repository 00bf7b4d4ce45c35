"""What link do I need? Each DDP configuration of a host predicted on every link and topology, with its
scaling, samples/s and samples per dollar, and set against the runs the host measured, with the
signed error per world size, topology and link. Its parts, by reason:

- measured, read from the bundle: `runs.py` (the runs it computes with, their workloads, a
  configuration's step pooled over its launches), `timelines.py` (each run's step timeline as
  medians), `sweeps.py` (the all_reduce sweeps as links, by the algorithm asked or the one NCCL's
  TUNING lines say it ran; what each measured run crossed); and shipped as data, `validated.py`
  (the predictor's own error on this project's GPU bundles, which each prediction on a link cites);
- modelled: `scaling.py` (weak and strong scaling: one GPU's compute at N GPUs and the 1-GPU step it
  scales against), `topology.py` (a named link or INTRA+NETWORK pair as nodes of GPUs),
  `slowdowns.py` (the slowdown under communication, fitted), with bench/common/allreduce.py (an
  all-reduce's time on a link or topology: ring and tree) and bench/common/replay.py (a step's
  timeline played back on a link);
- said: `notes.py`, beside the typed results of `results.py`; their tables and captions are the
  report part's (bench/suites/ddp/report/predicted.py).

Per configuration and GPU count, one GPU's compute (scaling.Sources.compute) is replayed with its
buckets' all-reduces on each link or topology: the bundle's all_reduce sweep of that path where it
measured one, else the link table's row (a link without any curve says so), slowed under
communication where this host measured that for the link (else not, and a note says so); without a
timeline, the compute + exposed communication model, and a note says so. A run that cannot be computed
(a timeline whose arrays disagree, a median step of 0) is left out with one line naming it and why.
"""

from __future__ import annotations

import math

from bench.common.allreduce import Topology
from bench.common.links import link_summary
from bench.common.replay import NONE, Timeline, replay
from bench.common.run import Run
from bench.errors import UserError
from bench.suites.ddp.predict.notes import (CPU_NOTE, FALLBACK_NOTE, NO_OVERLAP_NOTE, ONE_GPU_SOURCE, SLOWDOWN_NOTE,
                                            baseline_note, curve_notes, uncurved_note)
from bench.suites.ddp.predict.results import PRICE_FLOOR_PER_HOUR, Against, HostPrediction, Predicted
from bench.suites.ddp.predict.runs import accum_of, node_count, nodes_of, ok_runs, run_name, run_problem, step_median, workload_of
from bench.suites.ddp.predict.scaling import SCALINGS, WEAK, Compute, Configuration, Sources, configuration_of
from bench.suites.ddp.predict.slowdowns import fit_slowdowns
from bench.suites.ddp.predict.sweeps import Curves, algorithm_of, crossed_by_runs, crossed_key, sweeps_of_rows
from bench.suites.ddp.predict.timelines import Profiles
from bench.suites.ddp.predict.topology import Durations, link_specs, spec_name, spec_topology, swept
from bench.suites.ddp.predict.validated import UNVALIDATED, runs_like, topology_link

MAX_GPUS = 65536
MAX_GPUS_PER_NODE = 1024


def ready_at_the_end(timeline: Timeline) -> bool:
    """Every gradient bucket ready in the backward's last tenth: the timeline leaves no all-reduce to overlap."""
    return bool(timeline.buckets) and timeline.buckets[0].ready_s >= 0.9 * timeline.backward_s


def _shape(gpus: int, nodes: int) -> str:
    return Topology(gpus // nodes, nodes).shape if gpus % nodes == 0 else f"{nodes} nodes"


class _Host:
    """One host's runs, what they measured and the predictions made of them, into `result`."""

    def __init__(self, host: dict, runs: list[Run], result: HostPrediction, specs: list, gpus_per_node: "int | None",
                 algorithm: "str | None", scaling: "str | None") -> None:
        self.result, self.runs, self.specs = result, runs, specs
        self.gpus_per_node, self.algorithm, self.scaling = gpus_per_node, algorithm, scaling
        self.price = host.get("price_per_hour")
        self.gpu = link_summary(host["fingerprint"])["gpu"] if host.get("fingerprint") else None
        self.nodes = nodes_of(host)
        self.profiles, self.durations = Profiles(), Durations()
        self.crossed = crossed_by_runs(host, runs, Curves(host, result.note))
        self.sweeps = sweeps_of_rows(self.crossed)
        self.sources = Sources(runs, self.profiles)
        self.slowdowns = fit_slowdowns(runs, self.crossed, self.profiles, self.durations, self.nodes)

    def configuration(self, config: Configuration, gpus: "int | None") -> None:
        """The configuration at `gpus` GPUs, else at every world size its workload ran past 1 (else 2)."""
        work = config.workload
        baseline = self.sources.baseline(config)
        if baseline is None:
            self.result.note(f"{config.name}: no 1-GPU run and no step timeline to take a 1-GPU step from: no scaling")
        elif baseline.source:
            self.result.note(baseline_note(config.name, baseline.source))
        per_sample = baseline.per_sample_s if baseline is not None else None
        ran = sorted({r.world_size for r in self.runs if workload_of(r) == work and r.world_size > 1})
        for n in [gpus] if gpus else ran or [2]:
            accum = config.accum_at(n)
            if accum is None:
                self.result.nothing(f"{config.name}: not divisible by {n} GPUs x micro-batch {work.micro_batch}; no prediction "
                                    f"at {n} GPUs", f"use --scaling {WEAK} (the default: each GPU keeps its batch), or --gpus "
                                    "that divide the global batch")
                continue
            compute = self.sources.compute(work, accum, n)
            if compute is None:
                self.result.nothing(f"{work.model}: no step timeline and no 1-GPU run to take its compute from; no prediction",
                                    "predict a bundle with a 1-GPU run of this model (every plan's DDP entries run 1 GPU "
                                    "too, e.g. PLAN=quick)")
            else:
                self.on_links(config, n, accum, compute, per_sample)
            self.measured(config, n, per_sample)

    def on_links(self, config: Configuration, gpus: int, accum: int, compute: Compute, per_sample: "float | None") -> None:
        result, work, batch = self.result, config.workload, config.batch_at(gpus)
        if compute.source.startswith(ONE_GPU_SOURCE) and ready_at_the_end(compute.timeline):
            result.note(NO_OVERLAP_NOTE.format(model=work.model))
        largest = max((b.nbytes for b in compute.timeline.buckets), default=0)
        for spec in self.specs:
            spec = swept(spec, gpus, self.gpus_per_node, self.sweeps)
            topology = spec_topology(spec, gpus, self.gpus_per_node, self.algorithm)
            name, title, basis = spec_name(spec)
            if topology is None:
                result.nothing(f"link {name}: {gpus} GPUs do not fill nodes of {self.gpus_per_node}; no prediction",
                               f"give --gpus a multiple of --gpus-per-node {self.gpus_per_node}")
                continue
            curve_notes(result.note, result.uncurved, name, topology, largest)
            slowdown = self.slowdowns.of(name, self.algorithm)
            done = compute.step(self.durations.of(topology), slowdown)
            if not (math.isfinite(done.step_s) and done.step_s > 0):
                result.note(f"{config.name}, {name}: the replayed step is {done.step_s:g} s (its timeline's figures are all "
                            "0); no prediction")
                continue
            result.predicted.append(Predicted(result.host, work, batch, gpus, name, title, basis, done.step_s, done.exposed_s,
                                              per_sample, self.price, config.scaling, compute.source, slowdown,
                                              shape=topology.shape, like=self.like(compute, gpus, topology)))

    def like(self, compute: Compute, gpus: int, topology: Topology) -> str:
        """The predictor's error on runs like this prediction (validated.runs_like): of the column its compute
        comes from; the compute + exposed communication model's, and a CPU's, are never validated."""
        if not compute.replayed or self.result.cpu:
            return UNVALIDATED
        column = "from_one_gpu" if compute.source.startswith(ONE_GPU_SOURCE) else "from_own_steps"
        return runs_like(self.gpu, gpus, topology.nodes, topology_link(topology), self.algorithm, column)

    def measured(self, config: Configuration, gpus: int, per_sample: "float | None") -> None:
        """The runs that measured the configuration at `gpus` GPUs, each a row beside the predictions and
        set against its own."""
        result, work = self.result, config.workload
        measured = [run for run in self.runs if configuration_of(run, self.scaling) == config and run.world_size == gpus]
        for run in measured:
            path = ", ".join(filter(None, (run.preset, algorithm_of(run))))
            # Launch repeats measure one configuration again: each row says which it is.
            repeats = sum(other.preset == run.preset and algorithm_of(other) == algorithm_of(run) for other in measured)
            repeat = f", launch repeat {run.repeat}" if repeats > 1 else ""
            result.predicted.append(Predicted(result.host, work, run.params["global_batch"], gpus, f"measured: {path}{repeat}",
                                              f"measured, {path}{repeat}", "measured run", step_median(run), None, per_sample,
                                              self.price, config.scaling, measured=run,
                                              shape=_shape(gpus, node_count(run, self.nodes))))
            result.against.append(self.against(run))

    def against(self, run: Run) -> Against:
        work, accum, n = workload_of(run), accum_of(run), run.world_size
        key = crossed_key(run, self.nodes)
        preset, shape, algorithm = key[0], _shape(n, key[2]), key[3]
        path = self.crossed.get(key)
        if path is None:
            return Against(self.result.host, run, f"{preset} (no all_reduce curve or table row)", None, None, None, NONE, shape,
                           algorithm, key[2])
        slowdown = self.slowdowns.of(path.name, algorithm, leave_out=run)
        allreduce_s = self.durations.of(path.topology)
        one_gpu, own, exposed = self.sources.one_gpu_replayed(work, accum), self.profiles.own(run), self.sources.exposed(work, accum)
        modelled = exposed.step(allreduce_s) if exposed else None
        return Against(
            self.result.host, run, path.name,
            one_gpu.step(allreduce_s, slowdown).step_s if one_gpu else None,
            replay(own.timeline(accum), allreduce_s, slowdown).step_s if own else None,
            modelled.step_s if modelled else None, slowdown, shape, algorithm, key[2], path.topology,
            self.slowdowns.of_run(run), self.sources.one_gpu_busy(work), modelled.comm_s if modelled else None)


def predict_host(host: dict, name: str, specs: list, gpus: "int | None", gpus_per_node: "int | None" = None,
                 algorithm: "str | None" = None, scaling: "str | None" = WEAK) -> HostPrediction:
    """Every ddp configuration of one host of a bundle on every link or topology of `specs`, under
    `scaling` (weak, strong, or None: each run's configuration as its plan measured it)."""
    result = HostPrediction(name)
    runs, left_out = [], []
    for run in ok_runs(host):
        problem = run_problem(run)
        if problem is None:
            runs.append(run)
        else:
            left_out.append(f"{run_name(run)}: left out: {problem}")
            result.note(left_out[-1])
    if not runs:
        if left_out:
            result.nothing(f"every ddp run was left out ({left_out[0]})", "predict a bundle whose runs the report reads whole")
        return result
    result.cpu = not any(run.on_gpu for run in runs)
    if result.cpu:
        result.note(CPU_NOTE)
    price = host.get("price_per_hour")
    if price is not None and price < PRICE_FLOOR_PER_HOUR:
        result.note(f"price_per_hour {price:g} USD is below {PRICE_FLOOR_PER_HOUR:g} USD, which no machine rents for: "
                    "no samples per dollar")
    has_timeline = any(r.timeline for r in runs)
    if not has_timeline:
        result.note(FALLBACK_NOTE)
    found = _Host(host, runs, result, specs, gpus_per_node, algorithm, scaling)
    for config in sorted({configuration_of(r, scaling) for r in runs}):
        found.configuration(config, gpus)
    if result.uncurved:
        result.note(uncurved_note(result.uncurved))
    if has_timeline and any(p.slowdown == NONE for p in result.links_predicted):
        result.note(SLOWDOWN_NOTE)
    return result


def check_arguments(gpus: "int | None", gpus_per_node: "int | None", specs: list, scaling: "str | None" = WEAK) -> None:
    """--gpus, --gpus-per-node and --scaling within sense: one line each, else nothing."""
    if scaling is not None and scaling not in SCALINGS:
        raise UserError(f"--scaling {scaling}: give one of {', '.join(SCALINGS)}")
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
    if gpus is not None and gpus % gpus_per_node:
        raise UserError(f"--gpus {gpus} does not fill nodes of --gpus-per-node {gpus_per_node}; give a multiple of "
                        f"{gpus_per_node} (e.g. --gpus {gpus_per_node * -(-gpus // gpus_per_node)})")
    if not any(isinstance(spec, tuple) for spec in specs):
        raise UserError(f"--gpus-per-node {gpus_per_node} applies to INTRA+NETWORK links; name one (e.g. --link nvlink4+eth-25g)")


def predict(bundles: list[dict], names: "list[str] | None" = None, gpus: "int | None" = None,
            gpus_per_node: "int | None" = None, algorithm: "str | None" = None, scaling: "str | None" = WEAK) -> list[HostPrediction]:
    """Every host with ddp runs in the bundles, predicted on the links named (the report's set without names)."""
    specs = link_specs(names)
    check_arguments(gpus, gpus_per_node, specs, scaling)
    found = []
    for bundle in bundles:
        for host in bundle["hosts"]:
            if ok_runs(host):
                found.append(predict_host(host, f"{host['name']} ({bundle['run_id']})" if len(bundles) > 1 else host["name"],
                                          specs, gpus, gpus_per_node, algorithm, scaling))
    return found


def check_predicted(found: list[HostPrediction]) -> None:
    """One line where the hosts' runs gave no link a prediction: the first reason, and what would give one."""
    if any(host.links_predicted for host in found):
        return
    reasons = [u for host in found for u in host.unpredicted]
    if not reasons:
        raise UserError("nothing predicted: no configuration of these bundles' ddp runs gave a step on any link named; "
                        "name another link (--link) or GPU count (--gpus)")
    more = f" (and {len(reasons) - 1} more)" if len(reasons) > 1 else ""
    raise UserError(f"nothing predicted: {reasons[0].reason}{more}; {reasons[0].fix}")
