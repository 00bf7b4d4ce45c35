"""Every figure agrees with its table: what each figure of a report drew (NAME.json beside its PNG and
SVG) read back and set against the numbers its table prints, on the fleet's report (the real CPU run
and GPU hosts made from it). Also: the answer's figure comes first, and a flag stands beside the
figure it is about (a negative exposed communication beside a positive one once did not)."""

from __future__ import annotations

import json

import pytest

from bench.bundle import seal
from bench.common.stats import metric
from bench.report.answer import TITLE
from tests.conftest import cli
from tests.support.report_reading import (ANSWER_FIGURE, check_answer_figure, check_answer_lines, check_per_sample_figures,
                                          check_prediction_figure, check_scaling_bars, figures, section, table_with)


@pytest.fixture(scope="module")
def md(fleet_report) -> str:
    return (fleet_report / "report.md").read_text()


@pytest.fixture(scope="module")
def drawn(fleet_report) -> dict:
    return figures(fleet_report)


def _answer_rows(md: str) -> list[dict]:
    return table_with(section(md, TITLE), "verdict: throughput lost")


def test_the_answer_opens_with_its_figure_before_any_prose(md):
    answer = section(md, TITLE).splitlines()
    blocks = [line for line in answer[1:] if line.strip()]
    assert blocks[0] == f"![Throughput lost per workload and link]({ANSWER_FIGURE}.png)"
    assert md.splitlines()[:3] == ["# ddpbench report", "", f"## {TITLE}"]  # nothing before it but the title


def test_the_answer_figure_draws_the_answer_tables_figures(md, drawn):
    assert check_answer_figure(md, drawn) >= 4  # the CPU host, rig-3090, and rig-4090 over two transports
    assert check_answer_lines(md) >= 4


def test_a_lost_interval_past_perfect_scaling_is_said_as_the_figure_draws_it(md, drawn):
    """The edited GPU hosts keep the CPU run's spread: their intervals reach past 100% scaling, and the words
    print the ends the figure draws, an end below 0 too (never cut at 0), as the scaling column's end above 100 says."""
    values = [value for panel in drawn[ANSWER_FIGURE]["axes"] for value in panel["values"]]
    assert min(value["low"] for value in values) < 0
    said = " ".join(row["verdict: throughput lost"] for row in _answer_rows(md))
    for value in values:
        assert f"lost [{value['low']:.1f}, {value['high']:.1f}]" in said, (value, said)


def test_each_per_sample_point_is_a_step_times_row(md, drawn):
    assert check_per_sample_figures(md, drawn) >= 8


def test_each_scaling_bar_is_its_rows_scaling(md, drawn):
    assert check_scaling_bars(md, drawn) >= 4


def _flag_exposed(real_bundle: dict, exposed_s: float) -> dict:
    """The real bundle with its 2-rank DDP runs flagged negative_exposed_comm, as one launch's own figure
    would flag them, and their median step set so that the pooled exposed communication is exposed_s."""
    doc = json.loads(json.dumps(real_bundle))
    doc.pop("sha256")
    runs = doc["hosts"][0]["runs"]
    for run in runs:
        if run["suite"] == "ddp" and run["world_size"] == 2:
            # The baseline the report scales it against: one process doing its work per rank where the 1-process
            # launch trained it, else one process doing all of it (its step halved).
            batch = run["params"]["global_batch"]
            ones = {r["params"]["global_batch"]: r for r in runs if r["suite"] == "ddp" and r["world_size"] == 1}
            base, share = (ones[batch // 2], 1) if batch // 2 in ones else (ones[batch], 2)
            compute = base["metrics"]["step_time_s"]["summary"]["median"] / share
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


def test_the_prediction_figure_draws_the_predicted_against_measured_tables_model(md, drawn):
    """The figure and the table give one figure for the compute + exposed communication model: each launch's row of
    the table says the same compute + all-reduce = step that the figure draws for its configuration."""
    assert check_prediction_figure(md, drawn) >= 4  # the CPU host, rig-3090, and rig-4090 over two transports


def _bytes(size: str) -> float:
    value, unit = size.split()
    return float(value) * 1024 ** ["B", "KiB", "MiB", "GiB", "TiB"].index(unit)


def test_the_busbw_table_lists_each_lines_sizes_ascending(md):
    rows = table_with(section(md, "Collectives"), "algbw GB/s median [p5, p95]")
    lines = {}
    for row in rows:
        key = (row["host"], row["transport"], row["op"], row["dtype"], row["place"], row["ranks"])
        lines.setdefault(key, []).append(_bytes(row["size"]))
    assert lines and all(sizes == sorted(sizes) and len(sizes) > 1 for sizes in lines.values()), lines


def test_a_mixed_report_never_calls_the_cpus_processes_gpus(md, drawn):
    """The fleet holds a CPU host beside GPU hosts: the words its figures and tables share say both, and the CPU's own
    rows say processes."""
    (xlabel,) = [panel["xlabel"] for panel in drawn[ANSWER_FIGURE]["axes"] if panel["xlabel"]]
    assert "by N GPUs or processes against N × one" in xlabel
    assert any(panel["title"] == "local · CPU only" for panel in drawn[ANSWER_FIGURE]["axes"])
    per_sample = [panel["ylabel"] for name, figure in drawn.items() if name.startswith("per-sample-") for panel in figure["axes"]]
    assert per_sample and all("× #GPUs or processes" in label for label in per_sample)
    cpu = [row for row in table_with(section(md, "Predicted against measured"), "link replayed") if row["host"].startswith("local")]
    assert cpu and all(row["topology"] == "1 node x 2 processes" and row["algorithm"] == "the backend's choice" for row in cpu)
