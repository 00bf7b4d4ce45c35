"""Every figure agrees with its table: what each figure of a report drew (NAME.json beside its PNG and
SVG) read back and set against the numbers its table prints, on the fleet's report (the real CPU run
and GPU hosts made from it). Also: the answer's figure comes first, and a flag stands beside the
figure it is about (a negative exposed communication beside a positive one once did not)."""

from __future__ import annotations

import json
import re

import pytest

from bench.bundle import seal
from bench.common.stats import metric
from bench.report.answer import TITLE
from tests.conftest import cli
from tests.support.report_reading import axis_unit, close, figures, section, spread, table_with

ANSWER_FIGURE = "answer-throughput-lost"


@pytest.fixture(scope="module")
def md(fleet_report) -> str:
    return (fleet_report / "report.md").read_text()


@pytest.fixture(scope="module")
def drawn(fleet_report) -> dict:
    return figures(fleet_report)


def _answer_rows(md: str) -> list[dict]:
    return table_with(section(md, TITLE), "verdict: throughput lost")


def _headline_rows(rows: list[dict]) -> list[dict]:
    """The answer table's rows the figure draws: each machine, workload, ranks and link at its largest global batch."""
    largest = {}
    for row in rows:
        key = (row["host · GPUs and link"], row["workload"], row["ranks"], row["link NCCL used"])
        if row["scaling % [95% CI]"] != "-" and int(row["global batch"]) >= int(largest.get(key, {"global batch": 0})["global batch"]):
            largest[key] = row
    return list(largest.values())


def test_the_answer_opens_with_its_figure_before_any_prose(md):
    answer = section(md, TITLE).splitlines()
    blocks = [line for line in answer[1:] if line.strip()]
    assert blocks[0] == f"![Throughput lost per workload and link]({ANSWER_FIGURE}.png)"
    assert md.splitlines()[:3] == ["# ddpbench report", "", f"## {TITLE}"]  # nothing before it but the title


def test_the_answer_figure_draws_the_answer_tables_figures(md, drawn):
    rows = _answer_rows(md)
    points = [(panel["title"], value) for panel in drawn[ANSWER_FIGURE]["axes"] for value in panel["values"]]
    expected = _headline_rows(rows)
    assert len(points) == len(expected) >= 4  # the CPU host, rig-3090, and rig-4090 over two transports
    for row in expected:
        group = f"{row['workload']} · {row['ranks']} · global batch {row['global batch']}"
        (value,) = [v for machine, v in points if machine == row["host · GPUs and link"] and v["label"] == row["link NCCL used"]
                    and v["group"].removesuffix(" ⚠") == group]
        scaling, low, high = spread(row["scaling % [95% CI]"])
        # Lost = 100 - scaling, its interval the scaling's turned around, to the 0.1 the table prints.
        assert value["value"] == pytest.approx(100 - scaling, abs=0.051)
        assert value["low"] == pytest.approx(100 - high, abs=0.051) and value["high"] == pytest.approx(100 - low, abs=0.051)
        said = row["verdict: throughput lost"]  # "noticeable: 6.2% lost [..]", or "none lost (1.8% above perfect scaling)"
        above = re.search(r"none lost \(([\d.]+)% above perfect scaling\)", said)
        lost = -float(above.group(1)) if above else float(re.search(r"([\d.]+)% lost", said).group(1))
        assert value["value"] == pytest.approx(lost, abs=0.051)
        assert value["group"].endswith(" ⚠") == ("⚠" in row["scaling % [95% CI]"])


def _ddp_rows(md: str) -> list[dict]:
    return table_with(section(md, "DDP training"), "per-sample time × GPUs")


def test_each_per_sample_point_is_a_step_times_row(md, drawn):
    rows = _ddp_rows(md)
    shown = [name for name in drawn if name.startswith("per-sample-")]
    assert shown
    for name in shown:
        (panel,) = drawn[name]["axes"]
        unit = axis_unit(panel["ylabel"])
        measured = [line for line in panel["lines"] if not line["label"].startswith("predicted")]
        assert measured
        for line in measured:
            ranks = line["label"].rsplit(" · ", 1)[1].removesuffix(" (baseline)")  # "2 GPUs", "1 process"
            for batch, median, low, high in line["points"]:
                cells = [spread(row["per-sample time × GPUs"], seconds=True) for row in rows
                         if row["global batch"] == f"{batch:g}" and row["GPUs or processes"] == ranks]
                assert any(close(median * unit, m) and close(low * unit, lo) and close(high * unit, hi) for m, lo, hi in cells), \
                    (name, line["label"], batch, median, cells)


def test_each_scaling_bar_is_its_rows_scaling(md, drawn):
    rows = {(" · ".join([row["host"], row["GPUs and link"], row["transport"]]), row["global batch"], row["GPUs or processes"]): row
            for row in _ddp_rows(md)}
    bars = drawn["scaling-efficiency"]["axes"][0]["values"]
    assert len(bars) == sum(1 for row in rows.values() if not row["transport"].endswith("(baseline)")) >= 4
    for bar in bars:
        batch, ranks = re.fullmatch(r"batch (\d+)\n(.+)", bar["group"]).groups()
        row = rows[(bar["label"], batch, ranks)]
        median, low, high = spread(row["scaling % [95% CI]"])
        assert (bar["value"], bar["low"], bar["high"]) == pytest.approx((median, low, high), abs=0.051)


def _flag_exposed(real_bundle: dict, exposed_s: float) -> dict:
    """The real bundle with its 2-rank DDP runs flagged negative_exposed_comm, as one launch's own figure
    would flag them, and their median step set so that the pooled exposed communication is exposed_s."""
    doc = json.loads(json.dumps(real_bundle))
    doc.pop("sha256")
    runs = doc["hosts"][0]["runs"]
    for run in runs:
        if run["suite"] == "ddp" and run["world_size"] == 2:
            base = next(r for r in runs if r["suite"] == "ddp" and r["world_size"] == 1
                        and r["params"]["global_batch"] == run["params"]["global_batch"])
            compute = base["metrics"]["step_time_s"]["summary"]["median"] / 2
            for name, by in (("step_time_s", 1.0), ("per_sample_gpu_time_s", 2 / run["params"]["global_batch"])):
                run["metrics"][name] = metric([(compute + exposed_s) * by] * len(run["metrics"][name]["samples"]))
            run["warnings"] = [{"code": "negative_exposed_comm", "message": "exposed communication -1 ms is negative",
                                "likely_cause": "one launch's baseline ran slow"}]
    return seal(doc)


@pytest.mark.parametrize("exposed_s, flagged", [(0.004, False), (-0.004, True)], ids=["positive", "negative"])
def test_a_negative_exposed_communication_flag_stands_only_beside_a_negative_figure(real_bundle, tmp_path, exposed_s, flagged):
    path = tmp_path / "bundle.json"
    path.write_text(json.dumps(_flag_exposed(real_bundle, exposed_s)))
    done = cli("report", path, "--out", tmp_path / "report")
    assert done.returncode == 0, done.stderr
    md = (tmp_path / "report" / "report.md").read_text()
    rows = [row for row in _answer_rows(md) if row["ranks"] == "2 processes"]
    assert rows
    for row in rows:
        shown = float(row["exposed communication of step"].split(" of ")[0])
        assert (shown < 0) == flagged
        assert ("negative_exposed_comm" in row["scaling % [95% CI]"]) == flagged
    (line,) = [line for line in section(md, TITLE).splitlines() if line.startswith("- local")]
    assert ("⚠ negative_exposed_comm" in line) == flagged
    # Each launch's own flag stays in the DDP section's list of flagged figures, with its cause.
    assert "one launch's baseline ran slow" in section(md, "DDP training")
