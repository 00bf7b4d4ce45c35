"""The bundles this repository publishes beside its results (benchmarks/results/bundles/, measured on lent GPUs)
stay readable by the current code: each renders the report it rendered before (tests/report/published/, written
by tests/support/published_reports.py), which opens with its answer, and compares with another bundle of its
samples without a difference. A schema or report change that breaks a published GPU bundle, or changes what its
report says, fails here, on the CPU."""

from __future__ import annotations

import json

import pytest

from bench.report.answer import TITLE
from tests.conftest import REPO, cli
from tests.support.published_reports import difference, published, readable, render
from tests.support.report_reading import ANSWER_FIGURE, check_answer_figure, check_per_sample_figures, check_scaling_bars, figures, section
from tests.support.same_samples import another_bundle_of

PUBLISHED = published()


def test_there_are_published_gpu_bundles(tmp_path):
    assert len(PUBLISHED) >= 5
    for path in PUBLISHED:  # each measured on a GPU, not a CPU stand-in
        assert json.loads(readable(path, tmp_path).read_text())["hosts"][0]["fingerprint"]["gpu_count"] >= 1


@pytest.mark.parametrize("path", PUBLISHED, ids=[p.name.split(".")[0] for p in PUBLISHED])
def test_a_published_bundle_renders_its_report_and_compares_with_itself(path, tmp_path):
    text = render(path, tmp_path)
    sections = [line for line in text.splitlines() if line.startswith("## ")]
    assert sections[0] == "## The answer: does the link slow training?"
    changed = difference(path, text)
    assert changed is None, (f"the report of {path.name} says something else now (if that is meant: "
                             f"python -m tests.support.published_reports --write):\n{changed}")
    bundle = readable(path, tmp_path)
    same = cli("compare", bundle, another_bundle_of(bundle, tmp_path / "again"), "--out", tmp_path / "verdict")
    verdict = json.loads((tmp_path / "verdict" / "verdict.json").read_text())
    # the same samples: reproduced, or inconclusive where the runs' own spread is wider than the tolerance
    assert same.returncode in (0, 3) and "Traceback" not in same.stderr, same.stderr  # 3: inconclusive
    assert verdict["outcome"] == "passed" or (verdict["outcome"] == "inconclusive" and "none differed" in verdict["summary"])


def test_the_published_bundles_merged_answer_first_with_a_figure_that_agrees_with_its_tables(tmp_path):
    done = cli("report", *PUBLISHED, "--out", tmp_path / "report")
    assert done.returncode == 0, done.stderr
    md = (tmp_path / "report" / "report.md").read_text()
    drawn = figures(tmp_path / "report")
    answer = section(md, TITLE)
    assert [line for line in answer.splitlines()[1:] if line.strip()][0].startswith(f"![Throughput lost per workload and link]({ANSWER_FIGURE}.png)")
    assert [panel["title"] for panel in drawn[ANSWER_FIGURE]["axes"]] == ["2x H100 80GB HBM3, NVLink NV18", "2x H200, NVLink NV18"]
    assert check_answer_figure(md, drawn) >= 20 and check_per_sample_figures(md, drawn) and check_scaling_bars(md, drawn)
    # The two-nodes bundle's hosts were one machine: said in the line of what they measured and under Hosts, not above every answer.
    said = "Bundle 20261126T162725Z-088b2d: hosts node1, node2 are one machine"
    assert "\n> **Bundle" not in answer
    (line,) = [line for line in answer.splitlines() if said in line]
    assert line.startswith("- 2x H200, NVLink NV18 — gpt2-large") and "2 emulated nodes" in line
    assert f"> **{said}" in section(md, "Hosts")
