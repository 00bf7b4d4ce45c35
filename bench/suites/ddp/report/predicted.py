"""The ddp suite's predictions as the report and `ddpbench predict` show them: what each link gives
(step, scaling, samples/s, samples per dollar), and the predictions set against the runs measured."""

from __future__ import annotations

from bench.common.stats import Spread
from bench.report.document import Bullets, Heading, Paragraph, Table
from bench.report.merge import Comparison
from bench.suites.ddp.predict import REPORT_LINKS, Against, HostPrediction, Predicted, link_specs, predict_host, relative

SOURCE_CAPTION = (
    "Predicted by replaying the step's timeline (when each gradient bucket is ready in the backward, "
    "bench/common/replay.py) on each link: bucket i's all-reduce starts when it is ready and bucket i-1's has "
    "ended, and lasts what the link's curve (this bundle's all_reduce sweep where it has one, else the link table, "
    "bench/common/reference.py) gives for its bytes. Scaling is against the 1-GPU run at the same global batch.")


def hosts(comparison: Comparison) -> list[HostPrediction]:
    """Every merged host with an ok ddp run, predicted on the report's links (REPORT_LINKS)."""
    specs = link_specs(None)
    return [predict_host(host.host, host.name, specs, None) for host in comparison.hosts
            if any(run["suite"] == "ddp" and run["status"] == "ok" for run in host.host["runs"])]


LINES_CAPTION = (f"Thin lines: the step predicted on each link ({', '.join(REPORT_LINKS)}; `ddpbench predict` names others) "
                 "from the bundle's timeline.")


def _ms(seconds: "float | None") -> str:
    return f"{seconds * 1e3:.4g}" if seconds is not None else "-"


def _recipe(p: Predicted) -> str:
    return f"{p.workload.model} {p.workload.recipe}, micro-batch {p.workload.micro_batch}"


def links_table(found: list[HostPrediction]) -> "Table | None":
    """Every configuration on every link, the measured runs among them, with samples per dollar where priced."""
    rows = []
    priced = any(p.price_per_hour for host in found for p in host.predicted)
    for host in found:
        for p in sorted(host.predicted, key=lambda p: (p.workload, p.global_batch, p.gpus, p.measured is None, p.step_s)):
            scaling = f"{p.scaling:.1%}" if p.scaling is not None else "-"
            row = [p.host, _recipe(p), str(p.global_batch), str(p.gpus), p.link, p.basis, _ms(p.step_s), scaling,
                   f"{p.samples_per_s:.4g}", _ms(p.exposed_s), p.source or "-"]
            if priced:
                row.insert(9, f"{p.samples_per_dollar:.4g}" if p.samples_per_dollar else "-")
            rows.append(row)
    if not rows:
        return None
    header = ["host", "workload", "global batch", "GPUs", "link", "basis", "step ms", "scaling", "samples/s",
              "exposed comm ms", "timeline replayed"]
    if priced:
        header.insert(9, "samples/$")
    return Table(header, rows)


def _measured_cell(against: Against) -> str:
    run = against.run["metrics"]["step_time_s"]
    spread = Spread.of(run["samples"]).scaled(1e3)
    if spread.low is None or spread.high is None:
        return f"{spread.median:.4g} [-, -] n={spread.n}"
    return f"{spread.median:.4g} [{spread.low:.4g}, {spread.high:.4g}] n={spread.n}"


def against_table(found: list[HostPrediction]) -> "Table | None":
    """Predicted against measured for every measured transport, with the signed error."""
    rows = []
    for host in found:
        for a in host.against:
            p = a.run["params"]
            rows.append([
                host.host, p["model"], str(p["global_batch"]), str(a.run["world_size"]), a.run["transport"]["preset"], a.link,
                _measured_cell(a),
                f"{_ms(a.from_one_gpu)} ({relative(a.error(a.from_one_gpu))})",
                f"{_ms(a.from_own_steps)} ({relative(a.error(a.from_own_steps))})",
                f"{_ms(a.exposed_model)} ({relative(a.error(a.exposed_model))})",
                f"{a.slowdown.compute:.2f} / {a.slowdown.comm:.2f}",
            ])
    if not rows:
        return None
    return Table(["host", "model", "global batch", "GPUs", "transport", "link replayed", "measured step ms: median [p5, p95]",
                  "predicted from the 1-GPU timeline ms (error)", "predicted from its own steps without all-reduce ms (error)",
                  "seed 002's model ms (error)", "slowdown: compute / all-reduce"], rows)


def notes(found: list[HostPrediction]) -> list:
    lines = sorted({f"{host.host}: {note}" for host in found for note in host.notes})
    return [Bullets(lines)] if lines else []


def blocks(found: list[HostPrediction]) -> list:
    """The tables with their captions, for the report and the command line alike."""
    out = []
    links = links_table(found)
    if links is not None:
        out += [Heading(3, "What link do I need?"), Paragraph(SOURCE_CAPTION), links]
    against = against_table(found)
    if against is not None:
        out += [Heading(3, "Predicted against measured"),
                Paragraph("Error = predicted / measured - 1. The slowdown (compute slowed while an all-reduce runs beside "
                          "it; each all-reduce longer in the step than its curve says) is fitted from the other N-GPU runs "
                          "over the same link, each timed with and without its all-reduces (timeline_steps), never from the "
                          "run predicted; none where no other run crossed that link. The 1-GPU timeline column takes "
                          "nothing else from the N-GPU runs."), against]
    return out + notes(found)
