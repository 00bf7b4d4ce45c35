"""The bundles this repository publishes beside its results (benchmarks/results/bundles/, measured on lent GPUs)
stay readable by the current code: each renders the report it rendered before (tests/report/published/, written
by tests/support/published_reports.py), which opens with its answer, and compares with another bundle of its
samples without a difference. A schema or report change that breaks a published GPU bundle, or changes what its
report says, fails here, on the CPU."""

from __future__ import annotations

import json

import pytest

from tests.conftest import cli
from tests.support.published_reports import difference, published, readable, render
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
