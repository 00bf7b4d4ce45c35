"""The bundles this repository publishes beside its results (benchmarks/results/bundles/, measured on lent GPUs)
stay readable by the current code: each renders a report that opens with its answer, and compares with
another bundle of its samples without a difference. A schema or report change that breaks a published GPU bundle fails here, on the CPU."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests.conftest import REPO, cli
from tests.support.same_samples import another_bundle_of

PUBLISHED = sorted((REPO / "benchmarks" / "results" / "bundles").glob("*.bundle.json*"))


def readable(path: Path, tmp_path: Path) -> Path:
    if path.suffix != ".gz":
        return path
    plain = tmp_path / path.name.removesuffix(".gz")
    plain.write_bytes(gzip.decompress(path.read_bytes()))
    return plain


def test_there_are_published_gpu_bundles(tmp_path):
    assert len(PUBLISHED) >= 5
    for path in PUBLISHED:  # each measured on a GPU, not a CPU stand-in
        assert json.loads(readable(path, tmp_path).read_text())["hosts"][0]["fingerprint"]["gpu_count"] >= 1


@pytest.mark.parametrize("path", PUBLISHED, ids=[p.name.split(".")[0] for p in PUBLISHED])
def test_a_published_bundle_renders_its_report_and_compares_with_itself(path, tmp_path):
    bundle = readable(path, tmp_path)
    done = cli("report", bundle, "--out", tmp_path / "report")
    assert done.returncode == 0, done.stderr
    sections = [line for line in (tmp_path / "report" / "report.md").read_text().splitlines() if line.startswith("## ")]
    assert sections[0] == "## The answer: does the link slow training?"
    same = cli("compare", bundle, another_bundle_of(bundle, tmp_path / "again"), "--out", tmp_path / "verdict")
    verdict = json.loads((tmp_path / "verdict" / "verdict.json").read_text())
    # the same samples: reproduced, or inconclusive where the runs' own spread is wider than the tolerance
    assert same.returncode in (0, 3) and "Traceback" not in same.stderr, same.stderr  # 3: inconclusive
    assert verdict["outcome"] == "passed" or (verdict["outcome"] == "inconclusive" and "none differed" in verdict["summary"])
