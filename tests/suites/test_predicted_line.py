"""The report's predicted lines agree with its table: each link's point on the per-sample figure is its
row's step, and the figure's dashed 1-GPU line at that global batch is the baseline its row's scaling is
set against, so a point sits above the line exactly where its row says under 100%: on a weak-scaling
plan (the quick plan: one 1-GPU batch, the line drawn across), on a strong-scaling one (seed001-sharded:
the 1-GPU run at each global batch), and where launch repeats of the 1-GPU run disagree, as a busy CPU's do."""

from __future__ import annotations

import copy
import gzip
import json
import math

import pytest

from bench.report.merge import merge
from bench.suites.ddp.report import predicted as PR
from bench.suites.ddp.report import series as DS
from bench.suites.training.report import Workload
from tests.conftest import REPO

BUNDLES = REPO / "benchmarks" / "results" / "bundles"


def read(name: str) -> dict:
    data = (BUNDLES / name).read_bytes()
    return json.loads(gzip.decompress(data) if name.endswith(".gz") else data)


def with_repeats(doc: dict) -> dict:
    """The bundle with its 1-GPU run launched twice more, 30% slower and 20% faster: the launch to launch
    spread of a busy machine, which one launch's step cannot stand for."""
    doc = copy.deepcopy(doc)
    runs = doc["hosts"][0]["runs"]
    (one,) = [run for run in runs if run["suite"] == "ddp" and run["world_size"] == 1]
    for repeat, factor in ((2, 1.3), (3, 0.8)):
        again = copy.deepcopy(one)
        again["repeat"], again["launch_id"] = repeat, f"{one['launch_id']}-r{repeat}"
        for metric in ("step_time_s", "per_sample_gpu_time_s"):
            again["metrics"][metric]["samples"] = [s * factor for s in one["metrics"][metric]["samples"]]
            again["metrics"][metric]["summary"]["median"] *= factor
        runs.append(again)
    return doc


def dashed_height(points: list, batch: int) -> "float | None":
    """Where the 1-GPU line is drawn at `batch`: across the plot for one point, else through its points
    (the x axis is log 2); None outside them."""
    if len(points) == 1:
        return points[0][1].median
    for (low, low_s), (high, high_s) in zip(points, points[1:]):
        if low <= batch <= high:
            where = math.log2(batch / low) / math.log2(high / low)
            return low_s.median + (high_s.median - low_s.median) * where
    return None


@pytest.mark.parametrize("doc", [read("20261125T213922Z-6e20a7.bundle.json"), read("20261125T183210Z-4271cb.bundle.json.gz"),
                                 with_repeats(read("20261125T213922Z-6e20a7.bundle.json"))],
                         ids=["weak-plan", "strong-plan", "busy-repeats"])
def test_each_predicted_point_and_its_row_give_one_scaling_against_the_dashed_line(doc):
    comparison = merge([doc])
    found = PR.hosts(comparison)
    drawn = DS.predicted_lines(found, comparison.ranks)
    baselines = {w: next(line.points for line in lines if line.baseline) for w, lines in DS.per_sample_lines(comparison).items()}
    table = PR.links_table(found)
    column = next(i for i, name in enumerate(table.header) if name.endswith("scaling"))
    cells = {(row[5], row[2], row[3], row[1]): row[column] for row in table.rows}
    checked = 0
    for host in found:
        for p in host.links_predicted:
            shown = Workload(p.workload.model, p.workload.recipe, p.workload.seq_len, p.workload.micro_batch)
            points = dict(next(points for _, (label, points) in drawn[shown] if label.startswith(f"predicted · {p.link} ·")))
            assert points[p.global_batch] == p.per_sample_gpu_s  # the point is its row's step
            height = dashed_height(baselines[shown], p.global_batch)
            if height is None:
                continue
            assert height == pytest.approx(p.baseline_per_sample_s)  # the line is its row's baseline
            assert cells[p.link, str(p.global_batch), str(p.gpus), PR._recipe(p)] == f"{height / p.per_sample_gpu_s:.1%}"
            assert (points[p.global_batch] > height) == (p.efficiency < 1)
            checked += 1
    assert checked >= 8
