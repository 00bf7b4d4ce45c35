"""Every report plot drawn from real bundles (one real CPU run plus edited GPU-host copies), checked
by what a reader sees: the series, axis labels and units, titles, legend entries, reference lines."""

from __future__ import annotations

import dataclasses

import json

import pytest
from matplotlib.collections import LineCollection
from matplotlib.colors import to_hex

from bench.report import plots as P
from bench.suites.collectives.report import plots as CP
from bench.suites.collectives.report import series as CS
from bench.suites.ddp.report import plots as DP
from bench.suites.ddp.report import predicted as PR
from bench.suites.ddp.report import series as DS
from bench.report.merge import merge


@pytest.fixture(scope="module")
def docs(fleet) -> dict:
    return {name: json.loads(path.read_text()) for name, path in fleet.items()}


@pytest.fixture(scope="module")
def comparison(docs):
    return merge(list(docs.values()))


@pytest.fixture(scope="module")
def colours(comparison):
    return P.palette([e.series for e in comparison.runs])


def legend_texts(fig) -> list[str]:
    return [t.get_text() for legend in fig.legends for t in legend.get_texts()]


def test_busbw_plot_has_a_line_per_host_and_transport_and_the_link_peaks(comparison, colours):
    lines = CS.busbw_lines(comparison)
    fig = CP.busbw_figure(lines, CS.link_peaks(comparison, lines), colours)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log"
    assert ax.get_xlabel() == "message size (bytes, log scale)"
    assert "bus bandwidth (GB/s" in ax.get_ylabel()
    assert "bus bandwidth against message size" in ax.get_title().lower()
    legend = legend_texts(fig)
    assert "local · CPU only · default (gloo)" in legend
    assert "rig-3090 · 2x RTX 3090, NVLink NV4 · default via P2P" in legend
    assert "rig-4090 · 2x RTX 4090, PCIe 4.0 x4 · default via P2P" in legend
    assert "rig-4090 · 2x RTX 4090, PCIe 4.0 x4 · p2p_off via P2P ⚠ transport mismatch" in legend
    # The theoretical peaks (4 x 14.0625 GB/s of NVLink; 4 lanes of PCIe 4.0) as horizontal lines.
    assert "theoretical peak of 2x RTX 3090, NVLink NV4: 56.25 GB/s (one direction)" in legend
    assert "theoretical peak of 2x RTX 4090, PCIe 4.0 x4: 7.876 GB/s (one direction)" in legend
    flat = {tuple(line.get_ydata()) for line in ax.lines if len(line.get_ydata()) == 2 and line.get_ydata()[0] == line.get_ydata()[1]}
    assert (56.25, 56.25) in flat and (7.876, 7.876) in flat
    # Each series is drawn through its medians, with p5-p95 bars (one vertical segment per size).
    real = next(line for line in lines if line.series.host == "local")
    drawn = [line for line in ax.lines if list(line.get_ydata()) == [s.median for _, s in real.points]]
    assert drawn, "the CPU host's medians are not on the plot"
    assert sum(len(c.get_segments()) for c in ax.collections if isinstance(c, LineCollection)) >= 4 * len(real.points)


def test_busbw_medians_and_spread_come_from_the_samples(docs, comparison):
    run = next(r for r in docs["cpu"]["hosts"][0]["runs"] if r["suite"] == "collectives" and r["params"]["op"] == "all_reduce")
    line = next(line for line in CS.busbw_lines(comparison) if line.series.host == "local")
    spread = dict(line.points)[run["params"]["size_bytes"]]
    summary = run["metrics"]["busbw_gbps"]["summary"]
    assert (spread.median, spread.low, spread.high, spread.n) == pytest.approx(
        (summary["median"], summary["p5"], summary["p95"], summary["n"]))


def test_per_sample_plot_is_seed_000s_figure_with_dashed_baselines(comparison, colours):
    ((workload, lines),) = DS.per_sample_lines(comparison).items()
    fig = DP.per_sample_figure(workload, lines, colours)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "global batch size (samples per optimizer step, log scale)"
    assert ax.get_ylabel() in ("per-sample time × #GPUs (ms)", "per-sample time × #GPUs (s)")
    assert "tiny, fp32" in ax.get_title()
    legend = legend_texts(fig)
    assert "rig-3090 · 2x RTX 3090, NVLink NV4 · default via P2P · 2 GPUs" in legend
    assert "local · CPU only · default (gloo) · 2 processes" in legend  # a CPU's ranks are processes, not GPUs
    assert {"local · CPU only · 1 process (baseline)", "rig-3090 · 2x RTX 3090, NVLink NV4 · 1 GPU (baseline)",
            "rig-4090 · 2x RTX 4090, PCIe 4.0 x4 · 1 GPU (baseline)"} <= set(legend)
    drawn = [line for line in ax.lines if len(line.get_xdata()) >= 2 and line.get_linestyle() != "None"]
    dashed = [line for line in drawn if line.get_linestyle() == "--"]
    solid = [line for line in drawn if line.get_linestyle() != "--"]
    assert len(dashed) == 3  # one baseline per machine: local, rig-3090, rig-4090 (two transports, one machine)
    assert len(solid) == 4  # one line per host and transport
    for line in solid:  # global batch 4 and 8: every point on its batch's tick
        assert list(line.get_xdata()) == [4, 8]
    for line in dashed:  # one rank also trained global batch 2: each of 2 ranks' work at global batch 4
        assert list(line.get_xdata()) == [2, 4, 8]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["2", "4", "8"]
    # The four N-GPU lines differ in marker, and neighbours in line style, as well as in colour.
    assert len({line.get_marker() for line in solid}) == 4 and len({line.get_linestyle() for line in solid}) == 3
    assert len({line.get_color() for line in solid}) == 4


def test_efficiency_bars_match_the_bundles_scaling_efficiency(docs, comparison, colours):
    bars = DS.efficiency_bars(comparison)
    fig = DP.efficiency_figure(bars, colours)
    ax = fig.axes[0]
    assert ax.get_ylabel() == "scaling efficiency (%)"
    assert "100% = perfect scaling" in legend_texts(fig)
    assert ax.get_title() == "tiny, fp32, 32 tokens x micro-batch 2"  # a panel per workload
    assert [t.get_text() for t in ax.get_xticklabels()] == ["batch 4\n2 processes", "batch 4\n2 GPUs", "batch 8\n2 processes",
                                                            "batch 8\n2 GPUs"]
    heights = sorted(round(p.get_height(), 6) for p in ax.patches)
    expected = sorted(round(r["derived"]["scaling_efficiency_fraction"] * 100, 6)
                      for doc in docs.values() for r in doc["hosts"][0]["runs"] if r["suite"] == "ddp" and r["world_size"] == 2)
    assert heights == pytest.approx(expected, abs=1e-6)
    by_host = {(bar.series.host, bar.series.transport): bar.value.median for bar in bars}
    # The edited hosts scale at 1 / (1 + exposed communication): 5%, 25% and 60% of the compute time.
    assert by_host[("rig-3090", "default via P2P")] == pytest.approx(1 / 1.05)
    assert by_host[("rig-4090", "default via P2P")] == pytest.approx(1 / 1.25)
    assert by_host[("rig-4090", "p2p_off via P2P")] == pytest.approx(1 / 1.6)
    for bar in bars:
        assert bar.value.low <= bar.value.median <= bar.value.high


@pytest.fixture(scope="module")
def predictions(comparison) -> list:
    return DS.predictions(comparison, PR.hosts(comparison))


def test_prediction_plot_splits_step_time_into_compute_and_exposed_communication(predictions):
    # A row per host and configuration the predictor set against the compute + exposed communication model.
    assert {p.group.split(",")[0] for p in predictions} == {"local", "rig-3090", "rig-4090"}  # "rig-3090, bundle ..."
    predictions = [p for p in predictions if not p.group.startswith("local")]
    fig = DP.prediction_figure(predictions)
    ax = fig.axes[0]
    assert ax.get_xlabel() in ("step time (ms)", "step time (s)")
    assert "predicted" in ax.get_title().lower()
    assert set(legend_texts(fig)) == {"compute: the 1-GPU step at this work per GPU",
                                      "all-reduce of the gradients, modelled: none of it hidden",
                                      "the rest of the step, measured: exposed communication", "p5-p95 of the measured step times"}
    factor = 1e3 if ax.get_xlabel() == "step time (ms)" else 1.0
    orange = [bar.get_width() for bar in ax.patches if bar.get_facecolor()[:3] == pytest.approx((1.0, 0.498, 0.055), abs=0.01)]
    red = [bar.get_width() for bar in ax.patches if bar.get_facecolor()[:3] == pytest.approx((0.839, 0.153, 0.157), abs=0.01)]
    for p, predicted_comm, measured_comm in zip(predictions, orange, red):
        assert p.predicted == pytest.approx(p.compute + p.allreduce) and p.allreduce > 0
        assert predicted_comm == pytest.approx(p.allreduce * factor)
        assert measured_comm == pytest.approx(max(0.0, p.measured.median - p.compute) * factor)


def test_a_step_faster_than_its_compute_share_shows_no_exposed_communication(predictions):
    (p, *_) = [p for p in predictions if not p.group.startswith("local")]
    faster = dataclasses.replace(p, compute=p.measured.median * 1.2)
    ax = DP.prediction_figure([faster]).axes[0]
    factor = 1e3 if ax.get_xlabel() == "step time (ms)" else 1.0
    grey = [bar.get_width() for bar in ax.patches if bar.get_facecolor()[:3] == pytest.approx((0.690, 0.690, 0.690), abs=0.01)]
    red = [bar.get_width() for bar in ax.patches if bar.get_facecolor()[:3] == pytest.approx((0.839, 0.153, 0.157), abs=0.01)]
    assert grey[1] == pytest.approx(p.measured.median * factor)  # the measured bar: all compute
    assert red == [pytest.approx(0.0)]


def test_p2p_heatmap_beside_the_topology_matrix(comparison):
    matrices = {m.series.hardware: m for m in CS.p2p_matrices(comparison) if m.series.transport.startswith("default")}
    nvlink = matrices["2x RTX 3090, NVLink NV4"]
    fig = CP.p2p_figure(nvlink)
    heat, topology, colour_bar = fig.axes
    assert heat.get_xlabel() == "destination rank" and heat.get_ylabel() == "source rank"
    image = heat.images[0].get_array()
    assert image[0][1] == pytest.approx(nvlink.cells[(0, 1)].median)
    assert image[1][0] == pytest.approx(nvlink.cells[(1, 0)].median)
    assert colour_bar.get_ylabel() == "send/recv bandwidth (GB/s)"
    assert [t.get_text() for t in topology.texts].count("NV4") == 2
    assert "rig-3090" in fig._suptitle.get_text()
    cpu = CP.p2p_figure(matrices["CPU only"])
    assert "no topology matrix in the fingerprint" in cpu.axes[1].texts[0].get_text()


def test_every_plot_saves_as_png_and_svg(tmp_path, comparison, colours):
    lines = CS.busbw_lines(comparison)
    png, svg = tmp_path / "busbw.png", tmp_path / "busbw.svg"
    P.save(CP.busbw_figure(lines, CS.link_peaks(comparison, lines), colours), png, svg)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in svg.read_bytes()[:2000]


def test_a_one_batch_baseline_is_a_dashed_line_across_the_plot_in_its_own_colour(comparison, colours):
    # One global batch per rank count (quick, seed001, seed002): each line is a single point.
    ((workload, lines),) = DS.per_sample_lines(comparison).items()
    local = [dataclasses.replace(line, points=line.points[:1]) for line in lines if line.series.host in ("local", "")]
    assert len(local) == 2 and sum(line.baseline for line in local) == 1
    fig = DP.per_sample_figure(workload, local, colours)
    ax = fig.axes[0]
    baseline = next(line for line in local if line.baseline)
    level = baseline.points[0][1].median * (1e3 if "(ms)" in ax.get_ylabel() else 1)
    across = [l for l in ax.lines if l.get_linestyle() == "--" and list(l.get_xdata()) == [0, 1]]
    assert [tuple(l.get_ydata()) for l in across] == [pytest.approx((level, level))]
    points = {l.get_label(): l for l in ax.lines if l.get_label() in {line.label for line in local}}
    assert len(points) == 2
    one, two = (points[line.label] for line in sorted(local, key=lambda line: not line.baseline))
    assert one.get_color() != two.get_color() and one.get_marker() != two.get_marker()


def test_busbw_lines_of_one_series_are_told_apart_by_marker(comparison, colours):
    lines = [line for line in CS.busbw_lines(comparison) if line.series.host == "local"]
    ops = [dataclasses.replace(lines[0], label=f"{lines[0].label} · {op}", detail=(op, *lines[0].detail[1:]))
           for op in ("all_reduce", "all_gather", "reduce_scatter")]
    fig = CP.busbw_figure(ops, {}, colours)
    drawn = [l for l in fig.axes[0].lines if l.get_label() in {line.label for line in ops}]
    assert len({l.get_color() for l in drawn}) == 1 and len({l.get_marker() for l in drawn}) == 3


def _looks(fig) -> dict:
    """label -> (colour, marker) of each line a figure drew with a legend entry."""
    return {line.get_label(): (to_hex(line.get_color()), line.get_marker()) for ax in fig.axes for line in ax.get_lines()
            if not line.get_label().startswith("_") and line.get_marker() in P.MARKERS}


def test_a_series_keeps_its_colour_and_marker_when_a_bundle_is_added(docs):
    """The report of the CPU run and rig-4090, then of the whole fleet (rig-3090 sorts before rig-4090): every line of the
    first is drawn alike in the second."""
    fewer, every = merge([docs["cpu"], docs["rig-4090"]]), merge(list(docs.values()))
    drawn = []
    for comparison in (fewer, every):
        lines = CS.busbw_lines(comparison)
        drawn.append(_looks(CP.busbw_figure(lines, {}, P.palette([e.series for e in comparison.runs]))))
    assert len(drawn[0]) == 2 and len(drawn[1]) == 4
    assert drawn[0] == {label: look for label, look in drawn[1].items() if label in drawn[0]}
