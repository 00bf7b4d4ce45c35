"""benchmarks/normal_coverage.py: how much of each bundle "Is my number normal?" judges, with the counts the
report gives, and why the rest has no reference, grouped by what no range holds; per plan, whether the
share without a reference is within the target. A file that is not a bundle is one error line."""
from __future__ import annotations

import subprocess
import sys

from bench.judging import normal
from bench.judging.ranges import Ranges, expected
from benchmarks.normal_coverage import bundle_lines, judged
from tests.conftest import REPO
from tests.support.plan_bundles import FOUR_H200, _four_h200
from tests.support.published_reports import SAID, stem

QUICK = REPO / "benchmarks" / "results" / "bundles" / "20261126T162558Z-9ea34b.bundle.json.gz"


def coverage(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "benchmarks/normal_coverage.py", *map(str, args)], cwd=REPO, capture_output=True,
                          text=True, timeout=300)


def test_each_bundle_and_plan_is_counted_as_its_report_counts_it():
    done = coverage(FOUR_H200, QUICK)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for path, counted in ((FOUR_H200, "17 figure(s): 17 within"), (QUICK, "9 figure(s): 9 within")):
        line = next(line for line in lines if line.startswith(stem(path)))
        assert f"): {counted}; no reference 0% (within the target 20%) [{path}]" in line
        said = (SAID / f"{stem(path)}.report.md").read_text()  # the report's own count of its figures
        assert f"(the expected.json of each suite's folder): {counted.split(': ')[1]}." in said
    assert "20261126T145046Z-b6143d (plan smoke, 4x NVIDIA H200, NVLink NV18): " in done.stdout
    assert "plan quick: 1 bundle(s), 9 figure(s), no reference 0%: target (at most 20%) met" in lines
    assert "plan smoke: 1 bundle(s), 17 figure(s), no reference 0%: target (at most 20%) met" in lines


def test_the_figures_without_a_reference_are_grouped_by_what_no_range_holds(monkeypatch):
    """The 4x H200 bundle against the ranges less those of 4 ranks on the H200 with an algorithm or 2 nodes:
    its ring and tree all-reduces lack their algorithm, its emulated nodes' figures their node count."""
    kept = tuple(row for row in expected().rows
                 if not (row["gpu"] == "NVIDIA H200" and row["key"]["ranks"] == 4 and ("algorithm" in row["key"] or "nodes" in row["key"])))
    monkeypatch.setattr(normal, "expected", lambda: Ranges(kept, {}))
    found = judged(_four_h200())
    lines = bundle_lines(FOUR_H200, _four_h200(), found, 0.2)
    assert lines[0].startswith("20261126T145046Z-b6143d (plan smoke, 4x NVIDIA H200, NVLink NV18): 17 figure(s): 3 within, 14 no reference; "
                               "no reference 82% (above the target 20%)")
    groups = {line.split(":")[0].strip(): line for line in lines[1:]}
    assert groups["no algorithm"].startswith("  no algorithm: 6 figure(s): 3 x no expected range of allreduce_busbw_gbps of NVIDIA H200 over "
                                             "nvlink at 4 rank(s) with NCCL's ")
    assert {name for name in groups if "nodes" in name} and sum(int(line.split(": ")[1].split()[0]) for line in groups.values()) == 14


def test_a_file_that_is_not_a_bundle_is_one_error_line(tmp_path):
    (tmp_path / "notes.json").write_text("{")
    done = coverage(tmp_path / "notes.json")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    missing = coverage(tmp_path / "none.json")
    assert missing.returncode == 2 and missing.stderr == f"error: {tmp_path / 'none.json'}: no such bundle file; check the path\n"
