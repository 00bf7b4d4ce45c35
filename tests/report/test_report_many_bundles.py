"""A merged report of many bundles reads as a single bundle's does: a predicted line joins one bundle's
predictions only, no two lines of a figure look alike, a crowded figure is split, long tables fold
in HTML with the answer's rows first, times print in readable units, machines are counted as machines."""

from __future__ import annotations

import copy
import re

import pytest
from matplotlib.colors import to_hex

import bench.report
from bench.bundle import seal
from bench.common.stats import Spread, metric
from bench.report import plots as P
from bench.report import tables as T
from bench.report.document import Plot
from bench.report.html import FOLD_ABOVE
from bench.report.merge import GPU_RANKS, merge
from bench.suites.ddp.report import predicted as PR
from bench.suites.ddp.report import series as DS
from tests.conftest import cli
from tests.support.report_variants import make_variant, write


def _slowed(bundle: dict, factor: float) -> dict:
    """The bundle as if its ddp steps had each been `factor` times slower (a busy machine): their
    timelines and step times scaled, re-sealed."""
    doc = copy.deepcopy(bundle)
    for run in doc["hosts"][0]["runs"]:
        if run["suite"] != "ddp":
            continue
        for step in (run.get("timeline") or {}).get("steps", []):
            for key, value in step.items():
                if isinstance(value, list):
                    step[key] = [v * factor for v in value]
                elif isinstance(value, float):
                    step[key] = value * factor
        m = run["metrics"]
        for name in ("step_time_s", "per_sample_gpu_time_s"):
            m[name] = metric([s * factor for s in m[name]["samples"]])
        for name in ("samples_per_s", "tokens_per_s"):
            if name in m:
                m[name] = metric([s / factor for s in m[name]["samples"]])
    return seal(doc)


def _points(found: dict) -> list:
    return [sorted(points) for lines in found.values() for _, (_, points) in lines]


def test_a_predicted_line_joins_the_predictions_of_one_bundle_only(real_bundle, tmp_path):
    quiet = make_variant(real_bundle, "rig", run_id="20260101T000000Z-aaaaaa")
    busy = _slowed(make_variant(real_bundle, "rig", run_id="20260101T010000Z-bbbbbb"), 2.0)
    alone = [_points(DS.predicted_lines(PR.hosts(merge([bundle])), GPU_RANKS)) for bundle in (quiet, busy)]
    assert alone[0] and alone[0] != alone[1], "the two bundles predict alike: the test would prove nothing"
    merged = DS.predicted_lines(PR.hosts(merge([quiet, busy])), GPU_RANKS)
    for points in _points(merged):
        assert points in alone[0] or points in alone[1], f"a predicted line joins two bundles' points: {points}"
    assert len(_points(merged)) == len(alone[0]) + len(alone[1])

    # Drawn, two bundles' lines for every link would bury the measured ones: the figure says where they are.
    out = tmp_path / "report"
    done = cli("report", write(tmp_path / "q.json", quiet), write(tmp_path / "b.json", busy), "--out", out)
    assert done.returncode == 0, done.stderr
    assert "a row per machine and bundle" in (out / "report.md").read_text()


def _widened(bundle: dict) -> dict:
    """The bundle with every all-reduce run also measured as all_gather and reduce_scatter, in bfloat16 and
    out of place: 12 lines a host in the busbw figure."""
    doc = copy.deepcopy(bundle)
    runs = doc["hosts"][0]["runs"]
    reduce = [run for run in runs if run["suite"] == "collectives" and run["params"]["op"] == "all_reduce"]
    for op in ("all_reduce", "all_gather", "reduce_scatter"):
        for dtype in ("float32", "bfloat16"):
            for in_place in (True, False):
                if (op, dtype, in_place) == ("all_reduce", "float32", True):
                    continue
                for run in reduce:
                    twin = copy.deepcopy(run)
                    twin["params"].update(op=op, dtype=dtype, in_place=in_place)
                    runs.append(twin)
    return seal(doc)


@pytest.fixture(scope="module")
def nine(real_bundle) -> list[dict]:
    """Nine bundles of nine machines: three GPU kinds, each at three speeds, 12 collective lines each."""
    wide = _widened(real_bundle)
    kinds = ("3090-nvlink", "4090-pcie-x4", "h200-nvlink")
    return [make_variant(wide, f"rig-{i}", hardware=kinds[i % 3], bandwidth=1 + i, exposed=0.05 * (i + 1))
            for i in range(9)]


@pytest.fixture(scope="module")
def nine_figures(nine, tmp_path_factory) -> tuple[list, list]:
    """The report's blocks of the nine bundles and every figure it drew, as matplotlib objects."""
    drawn = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bench.report.os, "cpu_count", lambda: 1)  # drawn here, not in forked workers
        patch.setattr(P, "save", lambda fig, png, svg: drawn.append((png.stem, fig)))
        blocks = bench.report.build(merge(nine), tmp_path_factory.mktemp("nine"), [])
    return blocks, drawn


def test_no_two_lines_of_a_plot_share_colour_and_marker(nine_figures):
    """Within one plot (an axes): a figure of several panels draws a series alike in each, as its legend's one entry says."""
    _, drawn = nine_figures
    assert any(stem.startswith("busbw") for stem, _ in drawn)
    for stem, fig in drawn:
        for ax in fig.axes:
            styles = [(to_hex(line.get_color()), line.get_marker()) for line in ax.get_lines()
                      if len(line.get_xdata()) and line.get_marker() in (*P.MARKERS, P.BASELINE_MARKER, ".")]
            alike = {style for style in styles if styles.count(style) > 1}
            assert not alike, f"{stem}: lines alike in colour and marker: {alike}"


def test_a_crowded_figure_is_split_by_op_then_dtype(nine_figures):
    blocks, drawn = nine_figures
    busbw = [(stem, fig) for stem, fig in drawn if stem.startswith("busbw")]
    for stem, fig in busbw:
        lines = [line for ax in fig.axes for line in ax.get_lines() if len(line.get_xdata()) and line.get_marker() in P.MARKERS]
        assert 0 < len(lines) <= P.MAX_SERIES, f"{stem} holds {len(lines)} lines"
    # 9 hosts x 3 ops x 2 dtypes x 2 placements: every line drawn once, in a figure of its op and dtype.
    assert sum(len([l for ax in fig.axes for l in ax.get_lines() if len(l.get_xdata()) and l.get_marker() in P.MARKERS])
               for _, fig in busbw) == 9 * 12
    titles = [block.title for block in blocks if isinstance(block, Plot) and block.png.stem.startswith("busbw")]
    # Where one op, dtype and placement still holds more than a figure can, its lines part evenly.
    assert "Bus bandwidth against message size, all_gather · bfloat16 · in-place · part 2" in titles, titles


def test_long_tables_fold_in_html_with_the_answers_rows_first(nine, tmp_path):
    out = tmp_path / "report"
    bench.report.write_report(nine, out)
    html = (out / "report.html").read_text()
    md = (out / "report.md").read_text()
    header = "<th>busbw GB/s median [p5, p95]</th>"
    shown, folded = html.split(header, 1)[1].split("<details>", 1)
    assert "</summary>" in folded.split("</details>", 1)[0], "the collectives table is not folded"
    # Above the fold: each line's largest message, the bandwidth a reader sets against the link's peak.
    sizes = re.findall(r"<td>(\d+(?:\.\d+)? [KM]iB)</td>", shown.split("</table>", 1)[0])
    assert sizes and set(sizes) == {"1 MiB"}, sizes
    # The markdown holds every row, each line's sizes ascending.
    rows = [line for line in md.splitlines() if line.startswith("| rig-") and " all_gather " in line]
    assert len(rows) > FOLD_ABOVE and " 1 MiB " not in rows[0] and " 1 MiB " in rows[-1]


def test_times_print_in_readable_units(nine, tmp_path):
    assert T.time_spread(Spread(20.224e-3, 17.04e-3, 29.25e-3, 12)) == "20.22 [17.04, 29.25] ms n=12"
    assert T.time_spread(Spread(2.5e-6, 1.2e-6, 3.0e-6, 3)) == "2.5 [1.2, 3] µs n=3"
    assert T.spread(Spread(20224.7, 17040.0, 29250.0, 5)) == "20200 [17000, 29200] n=5"
    out = tmp_path / "report"
    bench.report.write_report(nine, out)
    md = (out / "report.md").read_text()
    cells = [cell for line in md.splitlines() if line.startswith("|") for cell in line.split("|")]
    assert not [cell for cell in cells if re.search(r"\de[+-]\d", cell)], "a table cell in e-notation"
    assert re.search(r"\| [\d.]+ \[[\d.]+, [\d.]+\] (ns|µs|ms|s) n=\d+ \| \d+ \|", md), "no collectives time with its unit"


def test_hosts_are_counted_as_machines(nine, real_bundle, tmp_path, monkeypatch):
    monkeypatch.setattr(P, "save", lambda fig, png, svg: None)  # the summary is what this test reads
    def provenance(blocks: list) -> str:  # under Hosts: where the bundles came from
        return next(block.text for block in blocks if getattr(block, "text", "").startswith("3 bundles ("))

    blocks = bench.report.build(merge(nine[:3]), tmp_path / "three", [])
    assert provenance(blocks).startswith("3 bundles (") and " from 3 machines; " in provenance(blocks)
    same = [make_variant(real_bundle, "local", run_id=f"20260101T00000{i}Z-cccccc") for i in range(3)]
    blocks = bench.report.build(merge(same), tmp_path / "one", [])
    assert " from 1 machine (3 host entries of the bundles); " in provenance(blocks), provenance(blocks)


def test_a_bundle_of_many_workloads_draws_the_figures_of_its_first_and_says_what_it_left_out(real_bundle, tmp_path):
    """The real bundle's DDP runs as twelve workloads (twelve sequence lengths): each figure drawn per workload
    is drawn for the first eight alone, the rest said in a line; the tables hold all twelve."""
    doc = copy.deepcopy(real_bundle)
    host = doc["hosts"][0]
    ddp = [run for run in host["runs"] if run["suite"] == "ddp"]
    host["runs"] = [run for run in host["runs"] if run["suite"] != "ddp"] + [
        {**run, "params": {**run["params"], "seq_len": seq_len}} for seq_len in range(16, 28) for run in ddp]
    out = tmp_path / "report"
    done = cli("report", write(tmp_path / "bundle.json", seal({k: v for k, v in doc.items() if k != "sha256"})), "--out", out)
    assert done.returncode == 0, done.stderr
    drawn = sorted(int(re.search(r"-s(\d+)-mb", path.name)[1]) for path in out.glob("per-sample-*.png"))
    assert drawn == list(range(16, 16 + P.MOST_WORKLOADS_DRAWN))
    report = (out / "report.md").read_text()
    assert ("Per-sample time × #processes figures of 4 more workloads (tiny, fp32, 24 tokens x micro-batch 2; tiny, fp32, "
            "25 tokens x micro-batch 2; tiny, fp32, 26 tokens x micro-batch 2; ...) are not drawn: a report draws those of the "
            "first 8 workloads; the tables hold every one.") in report
    answer = report[report.index("## The answer"):report.index("## Hosts")]
    for seq_len in range(16, 28):  # the answer's table has a row for each
        assert re.search(rf"^\| local · .* \| tiny, fp32, {seq_len} tokens x micro-batch 2 \| 2 processes \|", answer, re.M)
