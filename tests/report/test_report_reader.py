"""The scaling plan's CPU form read as a new user reads it (DDP and FSDP of a tiny Llama on 1 and 2
processes and over 2 emulated nodes of 1 process each, on gloo), smoke-run (each configuration once at
its least work: what is read here is the report's, not the sampling's): the report says first that it
shows the tool working, not a link; its ranks are processes everywhere (text, tables, figures); FSDP's
answer names the run it is measured against; each figure draws its table's figures, and none shades
a single-node run as "2 nodes"."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bench.common.transports import ranks_label
from bench.report import CPU_ONLY
from bench.report.answer import TITLE
from tests.conftest import cli
from tests.support.report_reading import (axis_unit, check_answer_figure, check_per_sample_figures, check_scaling_bars, close, figures,
                                          section, spread, table_with)
from tests.support.report_variants import quiet, write


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    """The report of the smoke run's bundle as a quiet machine records it: on a busy CI machine some runs
    would be marked "(busy)" and answered on lines of their own, which other tests read."""
    out = tmp_path_factory.mktemp("scaling")
    done = cli("run", "--plan", "scaling", "--smoke", "--out", out)
    assert done.returncode == 0, done.stdout + done.stderr
    (path,) = out.glob("*/bundle.json")
    bundle = write(out / "quiet" / "bundle.json", quiet(json.loads(path.read_text())))
    done = cli("report", bundle, "--out", out / "report")
    assert done.returncode == 0, done.stderr
    return out / "report"


@pytest.fixture(scope="module")
def md(report) -> str:
    return (report / "report.md").read_text()


def test_a_cpu_report_says_first_that_it_shows_the_tool_working_not_a_link(md):
    lines = md.splitlines()
    assert lines[0] == "# ddpbench report" and lines[2].startswith("**Smoke run: ")  # before it, only that it is a smoke run
    assert lines[4] == f"**{CPU_ONLY}**"
    assert "shows ddpbench working, not a link" in CPU_ONLY


def test_no_word_of_a_cpu_only_report_calls_its_ranks_gpus(report, md):
    html = re.sub(r'src="data:[^"]*"', "", (report / "report.html").read_text())  # base64 spells anything
    texts = {"report.md": md, "report.html": html}
    texts.update({path.name: path.read_text() for path in sorted(report.glob("*.svg")) + sorted(report.glob("*.json"))
                  if path.name not in ("bundle.json", "run.json")})
    assert any(name.startswith("fsdp-per-sample-") for name in texts)  # FSDP's figure is among them
    for name, text in texts.items():
        assert "GPU" not in text, (name, text[max(0, text.find("GPU") - 200):text.find("GPU") + 100])
    fsdp = section(md, "Sharded data parallelism (FSDP) beside DDP")
    assert "### Per-sample time × #processes by strategy" in fsdp
    assert "1 process" in {row["transport"] for row in table_with(fsdp, "a rank's bytes per step")}


def test_the_fsdp_answer_names_the_run_it_is_measured_against(md):
    answer = section(md, TITLE)
    (line,) = [line for line in answer.splitlines() if line.startswith("- ") and "fsdp full" in line]
    assert re.search(r"\d+\.\d% lost \[[\d.]+, [\d.]+\] of the training throughput against ddp's 1-process run", line), line
    rows = [row for row in table_with(answer, "verdict: throughput lost") if "fsdp full" in row["workload"]]
    assert rows and all(row["verdict: throughput lost"].endswith("against ddp's 1-process run") for row in rows)
    plain = [line for line in answer.splitlines() if line.startswith("- ") and "fsdp" not in line]
    assert plain and not any("throughput against" in line for line in plain)  # DDP's own runs: against its own 1-process run


def _throughput_rows(md: str) -> list[dict]:
    ddp = table_with(section(md, "DDP training"), "per-sample time × processes")
    fsdp = table_with(section(md, "Sharded data parallelism (FSDP) beside DDP"), "a rank's bytes per step")
    return ddp + fsdp


def test_the_throughput_figures_draw_their_tables_samples_per_second_and_shade_no_single_node_run(report, md):
    rows = _throughput_rows(md)
    drawn = {name: figure for name, figure in figures(report).items() if name.startswith("throughput-")}
    assert len(drawn) == 2  # the plain model's and the sharded one's
    for name, figure in drawn.items():
        (panel,) = figure["axes"]
        # A 2-process run on one node stands beside the 2 emulated nodes at 2 processes: no side is "2 nodes".
        assert panel["shaded"] == [], name
        lines = {line["label"]: line["points"] for line in panel["lines"]}
        assert {"default (gloo)", "default (gloo), 2 emulated nodes"} <= set(lines)
        for label, points in lines.items():
            for x, median, *ends in points:
                if label.startswith("ideal"):
                    continue
                # The DDP table writes "2 processes", FSDP's "2".
                cells = [spread(row["samples/s"]) for row in rows if row["processes"] in (f"{x:g}", ranks_label(int(x), False))]
                assert any(close(median, m) and close(ends[0], lo) and close(ends[1], hi) for m, lo, hi in cells), (name, label, x, cells)


def test_the_answer_and_ddp_figures_draw_their_tables(report, md):
    drawn = figures(report)
    assert check_answer_figure(md, drawn) == 4  # DDP and FSDP, each on one node and over 2 nodes
    assert check_per_sample_figures(md, drawn) >= 3 and check_scaling_bars(md, drawn) == 2


def test_the_fsdp_figure_draws_its_step_table(report, md):
    rows = table_with(section(md, "Sharded data parallelism (FSDP) beside DDP"), "a rank's bytes per step")
    (name,) = [name for name in figures(report) if name.startswith("fsdp-per-sample-")]
    (panel,) = figures(report)[name]["axes"]
    unit = axis_unit(panel["ylabel"])
    points = [(line["label"], point) for line in panel["lines"] for point in line["points"]]
    assert len(points) == len(rows) >= 4
    for label, (batch, median, low, high) in points:
        strategy = "ddp" if label.endswith("(baseline)") else label.split(" · ")[0]  # the baseline: the plain model's
        cells = [spread(row["per-sample time × processes"], seconds=True) for row in rows
                 if row["global batch"] == f"{batch:g}" and row["strategy"] == strategy]
        assert any(close(median * unit, m) and close(low * unit, lo) and close(high * unit, hi) for m, lo, hi in cells), (label, cells)


def test_the_throughput_captions_give_each_topology_at_two_processes(md):
    answer = section(md, TITLE)
    captions = [line for line in answer.splitlines() if "measured ÷ ideal" in line]
    assert len(captions) == 2, answer  # the plain model's training and the sharded one
    for caption in captions:
        assert re.search(r"At 2 processes, measured ÷ ideal: default \(gloo\) \d+%, default \(gloo\), 2 emulated nodes \d+%",
                         caption), caption
        assert "dotted: where the multi-node lines' ranks outgrow one node" in caption
