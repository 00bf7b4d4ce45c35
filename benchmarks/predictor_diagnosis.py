"""Where the predictor's error comes from: each N-GPU DDP run with a step timeline, its measured step set
part by part against the steps the predictor replays for it.

    python3 benchmarks/predictor_diagnosis.py BUNDLE [BUNDLE ...]
    python3 benchmarks/predictor_diagnosis.py BUNDLE --out benchmarks/results/diagnosis.md

For every such run, beside `ddpbench predict`'s two predictions of it (from its own steps without all-reduce,
and from the 1-GPU timeline):
- where the step differs, by part: before the last backward (forwards, earlier micro-batches), the last
  backward's compute (to its last bucket ready), the all-reduce left exposed past it, and what follows (the
  optimizer, the harness between steps); measured from the run's timed steps, predicted from the replay;
- the all-reduces: each bucket (consecutive buckets of one size as one row) with its bytes and ready time,
  the algorithm and protocol NCCL ran at that size (the run's TUNING lines, transport.nccl_tuning), the
  all_reduce sweep measured alone in the bundle at that size, transport and node count, of the run's algorithm
  and of NCCL's own choice (interpolated; the algorithm NCCL ran at the sweep's nearest sizes), and what the
  predictor replays; summed over the step, beside the all-reduce measured inside the step (the profiled
  steps' NCCL kernel time, and the sweep's sum stretched by the run's own fitted slowdown);
- the compute: the 1-GPU step's parts against the N-GPU step's (without and with its all-reduces), each with
  the GPU's busy time under the profiler as a share of that compute, and its SM clock (a step whose GPU is idle
  for much of it waits on its CPU, and its compute moves with the CPU's load);
- the overlap: the slowdown the run's own two arms give (compute beside an all-reduce, the all-reduce in the
  step against its sweep), and the one the predictor applied (from the other runs over the same link).

A bundle (.json, or .json.gz) read here is not validated: `ddpbench validate` it first if it is not this project's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import suites  # noqa: E402
from bench.common.allreduce import Link, usable_curve  # noqa: E402
from bench.common.replay import Replayed, Timeline, replay  # noqa: E402
from bench.common.run import Run  # noqa: E402
from bench.common.units import count  # noqa: E402
from bench.suites.ddp.predict import predict_host  # noqa: E402
from bench.suites.ddp.predict.results import Against, relative  # noqa: E402
from bench.suites.ddp.predict.runs import accum_of, node_count, nodes_of, step_median, workload_of  # noqa: E402
from bench.suites.ddp.predict.scaling import Sources  # noqa: E402
from bench.suites.ddp.predict.sweeps import algorithm_of  # noqa: E402
from bench.suites.ddp.predict.timelines import Profiles  # noqa: E402
from bench.suites.ddp.predict.topology import Durations  # noqa: E402
from benchmarks._agent import table  # noqa: E402
from benchmarks.predictor_error import read  # noqa: E402

SAME_SIZE = 0.01  # consecutive buckets within this share of each other's bytes are one row


def ms(seconds: "float | None") -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.1f}"


def mb(nbytes: float) -> str:
    return f"{nbytes / 1e6:.1f}"


def share(part: "float | None", whole: float) -> str:
    return "-" if part is None else f"{part / whole:+.1%}"


@dataclass(frozen=True)
class Parts:
    """A step in four parts, seconds."""

    before: float  # the step's start to the last backward's
    compute: float  # the last backward's compute: its start to its last bucket ready
    exposed: float  # the all-reduce past that compute (and whatever else the backward waits for)
    after: float  # the optimizer and the harness's time between steps

    @property
    def step(self) -> float:
        return self.before + self.compute + self.exposed + self.after


def measured_parts(run: Run) -> Parts:
    """The run's timed steps as medians: the timeline's parts, calibrated to its median step."""
    steps = run.timeline["steps"]
    before = statistics.median(s["last_backward_start_s"] for s in steps)
    last_backward = statistics.median(s["last_backward_s"] for s in steps)
    compute = min(statistics.median(max(s["bucket_ready_s"], default=0.0) for s in steps), last_backward)
    return Parts(before, compute, last_backward - compute, step_median(run) - before - last_backward)


def replayed_parts(timeline: Timeline, done: Replayed) -> Parts:
    return Parts(timeline.before_s, done.compute_end_s, max(0.0, done.comm_end_s - done.compute_end_s), timeline.after_s)


@dataclass(frozen=True, order=True)
class Point:
    size: int
    seconds: float
    ran: str  # ALGORITHM/PROTOCOL NCCL's TUNING lines give at that size, or "?"


def ran_at(run: Run, nbytes: float) -> str:
    """The algorithm/protocol NCCL's TUNING lines say it ran for all-reduces of nbytes in the run; "not logged"
    where no line's range holds it."""
    rows = [row for row in run.transport.get("nccl_tuning") or [] if row["function"] in (None, "AllReduce")]
    if not rows:
        return "no TUNING lines"
    found = sorted({f"{row['algorithm']}/{row['protocol']}" for row in rows if row["min_bytes"] <= nbytes <= row["max_bytes"]})
    return ", ".join(found) if found else "not logged"


def sweeps(host: dict) -> dict:
    """(preset, world size, nodes, algorithm asked) -> {dtype: [Point]} of the host's all_reduce sweeps, by size."""
    nodes = nodes_of(host)
    found: dict = {}
    for run in map(Run, host["runs"]):
        suite = suites.registry().get(run.suite)
        timed = suite.timed_collective(run) if suite is not None and run.ok else None
        if timed is None or timed[0] != "all_reduce" or run.transport.get("protocol") not in (None, "default") or run.gpus:
            continue
        key = (run.preset, run.world_size, node_count(run, nodes), algorithm_of(run))
        found.setdefault(key, {}).setdefault(timed[1], {}).setdefault(timed[2], []).append((timed[3], ran_at(run, timed[2])))
    return {key: {dtype: sorted(Point(size, statistics.median(t for t, _ in ts), ts[0][1]) for size, ts in sizes.items())
                  for dtype, sizes in dtypes.items()} for key, dtypes in found.items()}


def sweep_of(dtypes: "dict | None", run: Run) -> "list | None":
    """The sweep of the dtype the run reduces its gradients in, else the one reaching the largest size (as the
    predictor reads it: bytes are bytes)."""
    if not dtypes:
        return None
    reduced = "bfloat16" if run.params.get("weights_dtype") == "bfloat16" or run.params.get("grad_reduce_dtype") == "bf16" \
        else "float32"
    return dtypes.get(reduced) or max(dtypes.values(), key=lambda points: points[-1].size)


def on_sweep(points: "list | None", nbytes: float, ranks: int) -> str:
    """An all-reduce of nbytes on a sweep, read as the predictor reads one (bench/common/allreduce.py's Link), and
    what NCCL ran at the sweep's nearest size; "below" or "past" where the sweep does not reach it."""
    if not points:
        return "-"
    link = Link.of_curve("sweep", "sweep", usable_curve([(p.size, p.seconds) for p in points]), ranks)
    nearest = min(points, key=lambda p: abs(p.size - nbytes))
    where = " below its smallest" if nbytes < points[0].size else " past its largest" if nbytes > points[-1].size else ""
    return f"{ms(link.own_s(nbytes))} ({nearest.ran}{where})"


def groups(sizes: list, *columns: list) -> list:
    """Consecutive buckets of about one size: (first, last, their sizes, each column's values)."""
    found = []
    for i, size in enumerate(sizes):
        if found and abs(size - sizes[found[-1][1]]) <= SAME_SIZE * size:
            found[-1][1] = i
        else:
            found.append([i, i])
    return [(a, b, sizes[a:b + 1], [c[a:b + 1] for c in columns]) for a, b in found]


def ready_medians(run: Run, arm: str) -> list:
    steps = run.timeline.get(arm) or []
    return [statistics.median(column) for column in zip(*(s["bucket_ready_s"] for s in steps))] if steps else []


def span(values: list) -> str:
    return ms(values[0]) if len(values) == 1 or values[0] == values[-1] else f"{ms(values[0])}-{ms(values[-1])}"


class Diagnosis:
    """One host's runs: what the predictor replays for each, and what the bundle measured."""

    def __init__(self, host: dict, name: str) -> None:
        self.host = host
        self.found = predict_host(host, name, [], None, scaling=None)
        self.runs = [a.run for a in self.found.against]
        self.profiles = Profiles()
        self.sources = Sources([Run(r) for r in host["runs"] if r["suite"] == "ddp" and r["status"] == "ok"], self.profiles)
        self.durations = Durations()
        self.sweeps = sweeps(host)
        self.nodes = nodes_of(host)

    def one_gpu_run(self, run: Run) -> "Run | None":
        ones = [r for r in self.sources.runs if r.world_size == 1 and workload_of(r) == workload_of(run) and r.timeline]
        return min(ones, key=lambda r: (abs(accum_of(r) - accum_of(run)), r.repeat), default=None)

    def summary_row(self, a: Against) -> list:
        run = a.run
        measured = measured_parts(run)
        cells = [run.launch_id, str(run.repeat), f"{run.params['model']} b{run.params['global_batch']}", a.shape,
                 run.preset, a.algorithm or "NCCL's", ms(measured.step)]
        for predicted in self.predicted(a):
            if predicted is None:
                cells += ["-"] * 5
                continue
            parts = predicted[1]
            cells += [relative(parts.step / measured.step - 1)] + [
                share(getattr(parts, name) - getattr(measured, name), measured.step) for name in ("before", "compute", "exposed", "after")]
        return cells

    def predicted(self, a: Against) -> list:
        """[(timeline, Parts) from its own steps, the same from the 1-GPU timeline], None where not predicted."""
        out = []
        run, allreduce_s = a.run, self.durations.of(a.topology) if a.topology is not None else None
        own = self.profiles.own(run)
        one = self.sources.one_gpu_replayed(workload_of(run), accum_of(run))
        for timeline in (own.timeline(accum_of(run)) if own else None, one.timeline if one else None):
            if timeline is None or allreduce_s is None:
                out.append(None)
                continue
            out.append((timeline, replayed_parts(timeline, replay(timeline, allreduce_s, a.slowdown))))
        return out

    def section(self, a: Against) -> list:
        run = a.run
        lines = [f"### {run.launch_id}, run {run.repeat}: {run.params['model']}, global batch {run.params['global_batch']}, "
                 f"{a.shape}, {run.preset}, {a.algorithm or 'NCCL' + chr(39) + 's choice'}", ""]
        measured = measured_parts(run)
        predicted = self.predicted(a)
        rows = []
        for name, label in (("before", "before the last backward"), ("compute", "last backward: compute to its last bucket"),
                            ("exposed", "last backward: all-reduce exposed past it"), ("after", "after (optimizer, between steps)"),
                            ("step", "step")):
            row = [label, ms(getattr(measured, name))]
            for found in predicted:
                row += ["-", "-"] if found is None else [ms(getattr(found[1], name)),
                                                        share(getattr(found[1], name) - getattr(measured, name), measured.step)]
            rows.append(row)
        lines += [f"Where the step differs, by part (the predictor replays on {a.link}; slowdown applied: compute "
                  f"{a.slowdown.compute:.2f}, all-reduce {a.slowdown.comm:.2f}):", ""]
        lines += table(["part", "measured ms", "from own steps ms", "difference / measured step", "from the 1-GPU timeline ms",
                        "difference / measured step"], rows).splitlines() + [""]
        lines += self.allreduces(a) + self.compute(a) + [""]
        return lines

    def allreduces(self, a: Against) -> list:
        run = a.run
        sizes = run.timeline["bucket_bytes"]
        with_ready, without_ready = ready_medians(run, "steps"), ready_medians(run, "steps_without_allreduce")
        algorithm = algorithm_of(run)
        key = (run.preset, run.world_size, node_count(run, self.nodes))
        asked = sweep_of(self.sweeps.get((*key, algorithm)), run) if algorithm else None
        chosen = sweep_of(self.sweeps.get((*key, None)), run)
        replayed = self.durations.of(a.topology) if a.topology is not None else None
        rows = []
        for first, last, group, (ready, ready_without) in groups(sizes, with_ready, without_ready):
            size = statistics.median(group)
            rows.append([f"{first}" if first == last else f"{first}-{last} ({last - first + 1})", mb(size), span(ready),
                         span(ready_without), ran_at(run, size), on_sweep(asked, size, run.world_size) if algorithm else "-",
                         on_sweep(chosen, size, run.world_size), ms(replayed(size)) if replayed else "-"])
        sum_replayed = sum(map(replayed, sizes)) if replayed else None
        own_fit = a.fitted
        profiled = run.median("gpu_comm_s")
        lines = [f"The all-reduces ({len(sizes)} buckets, {mb(sum(sizes))} MB a step; NCCL logged "
                 f"{self.logged(run)}):", ""]
        lines += table(["bucket", "MB", "ready in the step ms", "ready without all-reduce ms", "NCCL ran (TUNING)",
                        f"sweep of {algorithm} alone ms" if algorithm else "sweep of the algorithm asked",
                        "sweep of NCCL's choice alone ms (NCCL ran)", "the predictor replays ms"], rows).splitlines()
        lines += ["", f"Summed over the step: the predictor replays {ms(sum_replayed)} ms of all-reduce; "
                  f"the profiled steps' NCCL kernels ran {ms(profiled)} ms; the run's own two arms fit an all-reduce "
                  f"{1 + own_fit.comm:.2f}x its replayed time and compute {1 + own_fit.compute:.2f}x slower beside it "
                  f"(the predictor applied {1 + a.slowdown.comm:.2f}x and {1 + a.slowdown.compute:.2f}x, from the other runs "
                  "over this link)." if own_fit is not None else "", ""]
        return lines

    def logged(self, run: Run) -> str:
        rows = [r for r in run.transport.get("nccl_tuning") or [] if r["function"] in (None, "AllReduce")]
        return "; ".join(f"{r['algorithm']}/{r['protocol']} {r['calls']} calls of {r['min_bytes']}-{r['max_bytes']} B"
                         for r in rows) or "no TUNING line"

    def compute(self, a: Against) -> list:
        run = a.run
        accum = accum_of(run)
        rows = []
        one = self.one_gpu_run(run)
        if one is not None:
            profile = self.profiles.of(one, "steps", "", None)
            t = profile.timeline(accum)
            rows.append([f"the 1-GPU run ({count(accum_of(one), 'micro-batch', 'micro-batches')}, counted as {accum})", ms(t.before_s), ms(t.backward_s),
                         ms(t.after_s), ms(t.compute_s), self.busy(one, step_median(one)), self.clock(one)])
        own = self.profiles.of(run, "steps_without_allreduce", "", None)
        if own is not None:
            t = own.timeline(accum)
            rows.append([f"this run's steps without all-reduce", ms(t.before_s), ms(t.backward_s), ms(t.after_s), ms(t.compute_s),
                         "-", self.clock(run)])
        parts = measured_parts(run)
        compute = parts.before + parts.compute + parts.after
        rows.append(["this run's timed steps (compute parts)", ms(parts.before), ms(parts.compute), ms(parts.after),
                     ms(compute), self.busy(run, compute), self.clock(run)])
        return ["The compute, one GPU's (a GPU busy for much less than its compute waited on its CPU):", ""] + table(
            ["source", "before the last backward ms", "last backward's compute ms", "after ms", "compute ms",
             "GPU busy under the profiler ms (share of that compute)", "SM clock MHz (median)"], rows).splitlines()

    def busy(self, run: Run, compute_s: float) -> str:
        busy = run.median("gpu_compute_busy_s")
        return "-" if busy is None or not run.on_gpu or compute_s <= 0 else f"{ms(busy)} ({busy / compute_s:.0%})"

    def clock(self, run: Run) -> str:
        gpus = (run.gpu_counters or {}).get("gpus") or []
        clocks = [round(g["sm_clock_mhz_median"]) for g in gpus[:run.world_size] if g.get("sm_clock_mhz_median")]
        return "/".join(str(c) for c in clocks) or "-"


def report(paths: list[Path]) -> str:
    lines = []
    for path in paths:
        bundle = read(path)
        for host in bundle["hosts"]:
            d = Diagnosis(host, host["name"])
            timed = [a for a in d.found.against if a.run.timeline.get("steps")]
            lines += [f"## {bundle['run_id']} ({bundle['plan']['name']}), host {host['name']}", ""]
            if not timed:
                lines += ["No N-GPU DDP run with a step timeline.", ""]
                continue
            lines += ["Error of each prediction, and what each part adds to it (predicted part - measured part, over the "
                      "measured step):", ""]
            lines += table(["launch", "run", "workload", "topology", "transport", "algorithm", "measured ms",
                            "own steps: error", "before", "compute", "exposed all-reduce", "after",
                            "1-GPU timeline: error", "before", "compute", "exposed all-reduce", "after"],
                           [d.summary_row(a) for a in timed]).splitlines() + [""]
            for a in timed:
                lines += d.section(a)
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundles", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, help="also write it to this markdown file")
    args = parser.parse_args()
    text = report(args.bundles)
    print(text)
    if args.out:
        args.out.write_text(f"# Where the predictor's error comes from\n\n`python3 benchmarks/predictor_diagnosis.py "
                            f"{' '.join(str(p) for p in args.bundles)}`\n\n{text}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
