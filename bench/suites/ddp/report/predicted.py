"""The ddp suite's predictions as the report and `ddpbench predict` show them: what each link gives
(step, scaling, samples/s, samples per dollar), the predictions set against the runs measured, and
the predictor's signed error per world size, topology and link."""

from __future__ import annotations

import math

from bench.common.stats import Spread
from bench.common.units import plain
from bench.report.document import Bullets, Heading, Paragraph, Table
from bench.report.merge import CPU_RANKS, GPU_RANKS, MIXED_RANKS, Comparison, Ranks
from bench.suites.ddp.predict import predict_host
from bench.suites.ddp.predict.results import CHOSEN, Against, ErrorRow, HostPrediction, Predicted, error_table, relative
from bench.suites.ddp.predict.scaling import STRONG, WEAK
from bench.suites.ddp.predict.topology import REPORT_LINKS, link_specs
from bench.suites.ddp.predict.validated import MIN_LAUNCHES, unvalidated


def scaling_caption(scaling: str, ranks: Ranks) -> str:
    """What a scaling figure is set against, in words."""
    if scaling == WEAK:
        return (f"Scaling is weak: each {ranks.one} keeps the bundle's micro-batch and accumulation, the global batch growing "
                f"with the {ranks.many}, against the 1-{ranks.one} run of the same batch per {ranks.one} (its step / the "
                "predicted step).")
    return (f"Scaling is strong: the global batch is kept and split over the {ranks.many} where it divides, against the "
            f"1-{ranks.one} run at that global batch (its step / N x the predicted step).")


def scalings_of(found: list[HostPrediction]) -> list:
    """The kinds of scaling the predictions hold, weak first."""
    held = {p.scaling for host in found for p in host.predicted}
    return [kind for kind in (WEAK, STRONG) if kind in held]


def source_caption(ranks: Ranks, scalings: list) -> str:
    algorithms = "a" if ranks.cpu else "NCCL's"
    return ("Predicted by replaying the step's timeline (when each gradient bucket is ready in the backward, "
            "bench/common/replay.py) on each link: bucket i's all-reduce starts when it is ready and bucket i-1's has "
            "ended, and lasts what the link's curve (this bundle's all_reduce sweep where it has one, else the link table, "
            f"bench/common/reference.py) gives for its bytes; on several nodes, {algorithms} "
            "ring or tree over the link within a node and the one between them, the faster unless an algorithm is named "
            "(bench/common/allreduce.py). " + " ".join(scaling_caption(kind, ranks) for kind in scalings)
            + ("" if ranks.cpu else f" {LIKE_CAPTION}"))


LIKE_CAPTION = ("The predictor's error on runs like this one: its signed error (predicted / measured - 1, mean and range) on "
                f"this project's GPU bundles of that GPU count, nodes, link and algorithm, over at least {MIN_LAUNCHES} launches "
                "(bench/suites/ddp/predictor_error.json); unvalidated where none stands behind it, as on a link no bundle measured.")


def ranks_of(found: list[HostPrediction]) -> Ranks:
    """Processes where every host's ranks computed on its CPU, GPUs where none did, else both."""
    cpu = {host.cpu for host in found}
    return MIXED_RANKS if cpu == {True, False} else CPU_RANKS if cpu == {True} else GPU_RANKS


def _in_ranks(text: str, ranks: Ranks) -> str:
    """The predictor's words for its ranks ("1 node x 2 GPUs", "the 2-GPU run's timeline") as this report
    calls them: on the CPU, "1 node x 2 processes", "the 2-process run's timeline"."""
    if not ranks.cpu:
        return text
    return text.replace(" GPUs", f" {CPU_RANKS.many}").replace(" GPU", f" {CPU_RANKS.one}").replace("-GPU", f"-{CPU_RANKS.one}")


def _algorithm(algorithm: str, ranks: Ranks) -> str:
    return "the backend's choice" if ranks.cpu and algorithm == CHOSEN else algorithm


def hosts(comparison: Comparison) -> list[HostPrediction]:
    """Every merged host with an ok ddp run, predicted on the report's links (REPORT_LINKS) and scaled as
    its plan measured each run (the report's scaling efficiency and figures set them against the same
    1-GPU runs); of several bundles, each host's prediction names its bundle: one bundle's timeline and
    conditions (a busy machine, another batch) are never another's."""
    specs = link_specs(None)
    several = len(comparison.bundles) > 1
    return [predict_host(host.host, f"{host.name}, bundle {host.run_id}" if several else host.name, specs, None, scaling=None)
            for host in comparison.hosts if any(run.suite == "ddp" and run.ok for run in host.runs)]


LINES_CAPTION = (f"Thin lines: the step predicted on each link ({', '.join(REPORT_LINKS)}; `ddpbench predict` names others) "
                 "from the bundle's timeline.")
LINES_LEFT_OUT = ("The step predicted on each link is in the table \"What link do I need?\" of the DDP section, a row per "
                  "machine and bundle: each bundle's prediction stands on its own timeline and conditions, and a line for "
                  "each would bury the measured ones.")
CPU_LINES_CAPTION = LINES_CAPTION[:-1] + ", with this CPU's compute."


def _ms(seconds: "float | None") -> str:
    return _figure(seconds * 1e3 if seconds is not None else None)


def _figure(value: "float | None") -> str:
    """4 significant digits, never e-notation; "-" for no figure or one past a float's range."""
    return plain(value, 4) if value is not None and math.isfinite(value) else "-"


def _recipe(p: Predicted) -> str:
    return f"{p.workload.model} {p.workload.recipe}, micro-batch {p.workload.micro_batch}"


def links_table(found: list[HostPrediction]) -> "Table | None":
    """Every configuration on every link, the measured runs among them, with samples per dollar where priced."""
    rows, ranks, scalings = [], ranks_of(found), scalings_of(found)
    priced = any(p.samples_per_dollar is not None for host in found for p in host.predicted)
    for host in found:
        mine = ranks_of([host])
        for p in sorted(host.predicted, key=lambda p: (p.workload, p.global_batch, p.gpus, p.measured is None, p.step_s)):
            scaling = f"{p.efficiency:.1%}" if p.efficiency is not None and math.isfinite(p.efficiency) else "-"
            if len(scalings) > 1 and scaling != "-":
                scaling += f" {p.scaling}"
            row = [p.host, _recipe(p), str(p.global_batch), str(p.gpus), _in_ranks(p.shape, mine), p.link, p.basis, _ms(p.step_s), scaling,
                   _figure(p.samples_per_s), _ms(p.exposed_s), _in_ranks(p.source, mine) or "-"]
            if priced:
                row.insert(10, _figure(p.samples_per_dollar))
            if not ranks.cpu:  # what a CPU's processes would take is no GPU's, which the errors are
                row.append(p.like or "-")
            rows.append(row)
    if not rows:
        return None
    header = ["host", "workload", "global batch", ranks.many, "topology", "link", "basis", "step ms",
              f"{scalings[0]} scaling" if len(scalings) == 1 else "scaling", "samples/s",
              "exposed comm ms", "timeline replayed"]
    if priced:
        header.insert(10, "samples/$")
    if not ranks.cpu:
        header.append("the predictor's error on runs like this one")
    return Table(header, rows)


def _measured_cell(against: Against) -> str:
    spread = Spread.of(against.run.samples("step_time_s")).scaled(1e3)
    return f"{_figure(spread.median)} [{_figure(spread.low)}, {_figure(spread.high)}] n={spread.n}"


def against_table(found: list[HostPrediction]) -> "Table | None":
    """Predicted against measured for every measured transport, with the signed error."""
    rows, ranks = [], ranks_of(found)
    for host in found:
        mine = ranks_of([host])
        for a in host.against:
            p = a.run.params
            rows.append([
                host.host, p["model"], str(p["global_batch"]), str(a.run.world_size), _in_ranks(a.shape, mine),
                a.run.preset, _algorithm(a.algorithm or CHOSEN, mine), _in_ranks(a.link, mine),
                _measured_cell(a),
                f"{_ms(a.from_one_gpu)} ({relative(a.error(a.from_one_gpu))})",
                f"{_ms(a.from_own_steps)} ({relative(a.error(a.from_own_steps))})",
                _model_cell(a),
                f"{a.slowdown.compute:.2f} / {a.slowdown.comm:.2f}",
            ])
    if not rows:
        return None
    return Table(["host", "model", "global batch", ranks.many, "topology", "transport", "algorithm", "link replayed",
                  "measured step ms: median [p5, p95]",
                  f"predicted from the 1-{ranks.one} timeline ms (error)", "predicted from its own steps without all-reduce ms (error)",
                  f"{MODEL_COLUMN} ms: compute + all-reduce = step (error)", "slowdown: compute / all-reduce"], rows)


MODEL_COLUMN = "compute + exposed communication model"


def _model_cell(a: Against) -> str:
    """"117 + 11.7 = 128.7 (-20.2%)": the model's compute (the 1-GPU step at this work per GPU, its launches pooled),
    its all-reduce, their sum and its error; the figure "Measured against predicted step time" draws the same."""
    if a.exposed_model is None:
        return "-"
    return f"{_ms(a.exposed_compute_s)} + {_ms(a.exposed_allreduce_s)} = {_ms(a.exposed_model)} ({relative(a.error(a.exposed_model))})"


def _signed(errors: tuple) -> str:
    """'+1.2% (-0.5% to +3.0%)': the mean, then the least and most where they differ."""
    if not errors:
        return "-"
    mean, least, most = errors
    return relative(mean) if least == most else f"{relative(mean)} ({relative(least)} to {relative(most)})"


def errors_table(rows: list[ErrorRow], found: list[HostPrediction]) -> "Table | None":
    """The predictor's signed error per host, world size, topology, link and algorithm, whether enough launches
    stand behind it, and what a miss comes from, measured."""
    if not rows:
        return None
    ranks, each = ranks_of(found), {host.host: ranks_of([host]) for host in found}
    header = ["host", ranks.many, "topology", "link replayed", "algorithm", "launches", "runs", f"from the 1-{ranks.one} timeline",
              "from its own steps without all-reduce", MODEL_COLUMN, "validated",
              "all-reduce in the step / its sweep alone"]
    if not ranks.cpu:
        header.append(f"1-{ranks.one} step's GPU busy")
    body = []
    for r in rows:
        mine = each[r.host]
        row = [r.host, str(r.gpus), _in_ranks(r.shape, mine), _in_ranks(r.link, mine), _algorithm(r.algorithm, mine),
               str(r.launches), str(r.runs), _signed(r.from_one_gpu), _signed(r.from_own_steps), _signed(r.exposed_model),
               unvalidated(r.launches) or "yes",
               "-" if r.in_step_over_sweep is None else f"{r.in_step_over_sweep:.2f}x"]
        if not ranks.cpu:
            row.append("-" if r.one_gpu_busy is None else f"{r.one_gpu_busy:.0%}")
        body.append(row)
    return Table(header, body)


ERRORS_CAPTION = ("Signed error = predicted / measured - 1 over the measured runs of each world size, topology, link and "
                  "algorithm, every launch of them: the mean, then the least and the most")
PUBLISHED_ERROR = " (ASTRA-sim publishes its own all-reduce error against NCCL's ring on HGX-H100 so: 20.6/12.0/9.7% at 2/4/8 GPUs)"


def errors_caption(ranks: Ranks) -> str:
    busy = "" if ranks.cpu else (", and the share of the 1-GPU step its GPU computed (well under 100%: that step is its "
                                 "CPU's pace, which moves from launch to launch)")
    return (ERRORS_CAPTION + ("" if ranks.cpu else PUBLISHED_ERROR) + f"; unvalidated below {MIN_LAUNCHES} launches (launch to "
            "launch one configuration moves by several percent). What a miss comes from, measured: the all-reduces inside "
            f"the steps over their sweep alone (each run's own steps with and without them; 1.00x: as the sweep says){busy}.")


def notes(found: list[HostPrediction]) -> list:
    lines = sorted({f"{host.host}: {_in_ranks(note, ranks_of([host]))}" for host in found for note in host.notes})
    return [Bullets(lines)] if lines else []


def blocks(found: list[HostPrediction]) -> list:
    """The tables with their captions, for the report and the command line alike."""
    out, ranks = [], ranks_of(found)
    links = links_table(found)
    if links is not None:
        out += [Heading(3, "What link do I need?"), Paragraph(source_caption(ranks, scalings_of(found))), links]
    against = against_table(found)
    if against is not None:
        out += [Heading(3, "Predicted against measured"),
                Paragraph("Error = predicted / measured - 1. The slowdown (compute slowed while an all-reduce runs beside "
                          f"it; each all-reduce longer in the step than its curve says) is fitted from the other N-{ranks.one} "
                          "runs over the same link, each timed with and without its all-reduces (timeline_steps), never from "
                          f"the run predicted; none where no other run crossed that link. The 1-{ranks.one} timeline column "
                          f"takes nothing else from the N-{ranks.one} runs."), against,
                Heading(3, "The predictor's error"), Paragraph(errors_caption(ranks)),
                errors_table(error_table(found), found)]
    return out + notes(found)
