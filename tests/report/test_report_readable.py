"""Plots that read at any number of bundles: every figure of a report, drawn, has no text over
another and none cut off at its edge (matplotlib's own text extents), with the fleet's four bundles
and with a crowd of twelve hosts at seven global batches."""

from __future__ import annotations

import json

import pytest

import bench.report as report
from bench.bundle import seal
from bench.report import plots as P
from bench.report.merge import merge
from tests.support.report_variants import make_variant, write
from tests.support.text_extents import cut_off, overlapping

HARDWARE = ["3090-nvlink", "4090-pcie-x4", "h200-nvlink"]
PRESETS = ["default", "p2p_off", "socket"]


def _batches_times(doc: dict, factor: int) -> dict:
    """The bundle as if its DDP sweep had run at global batches `factor` times larger (re-sealed)."""
    doc = json.loads(json.dumps(doc))
    doc.pop("sha256", None)
    for run in doc["hosts"][0]["runs"]:
        if run["suite"] == "ddp":
            run["params"]["global_batch"] *= factor
            run["params"]["global_batches"] = [b * factor for b in run["params"]["global_batches"]]
    return seal(doc)


@pytest.fixture(scope="module")
def crowd(real_bundle, tmp_path_factory) -> list[dict]:
    """Twelve hosts: the real CPU run and eleven edited copies over three kinds of machine, three
    transports and global batches from 4 to 256."""
    root = tmp_path_factory.mktemp("crowd")
    docs = [real_bundle]
    for i in range(11):
        doc = make_variant(real_bundle, f"rig-{i:02d}", hardware=HARDWARE[i % 3], preset=PRESETS[i % 3],
                           nccl_used=("P2P", "SHM", "NET")[i % 3:][:1], bandwidth=1 + i, exposed=0.02 * (i + 1))
        docs.append(_batches_times(doc, 2 ** (i % 6)))
    for i, doc in enumerate(docs):
        write(root / f"{i}.json", doc)
    return docs


def _figures(bundles: list[dict], tmp_path, monkeypatch) -> dict:
    """name -> figure of every plot the report of these bundles draws (built, not yet saved)."""
    jobs = []
    monkeypatch.setattr(report._Plots, "render", lambda plots: jobs.extend(plots.jobs))
    report.build(merge(bundles), tmp_path, [])
    assert jobs, "the report drew no plot"
    return {png.stem: builder(*args) for builder, args, png, _ in jobs}


def _fleet_docs(fleet) -> list[dict]:
    return [json.loads(path.read_text()) for path in fleet.values()]


@pytest.mark.parametrize("which", ["fleet", "crowd"])
def test_no_plot_has_a_label_over_another_or_past_its_edge(which, request, tmp_path, monkeypatch):
    bundles = _fleet_docs(request.getfixturevalue("fleet")) if which == "fleet" else request.getfixturevalue("crowd")
    figures = _figures(bundles, tmp_path, monkeypatch)
    assert any(name.startswith("per-sample-") for name in figures) and "scaling-efficiency" in figures
    for name, fig in figures.items():
        assert overlapping(fig) == [], f"{name}: labels drawn over each other"
        assert cut_off(fig) == [], f"{name}: labels cut off at the figure's edge"


def test_a_crowded_scaling_plot_keeps_every_group_with_its_label_apart(crowd, tmp_path, monkeypatch):
    fig = _figures(crowd, tmp_path, monkeypatch)["scaling-efficiency"]
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_xticklabels()]
    batches = {run["params"]["global_batch"] for doc in crowd for run in doc["hosts"][0]["runs"]
               if run["suite"] == "ddp" and run["world_size"] == 2}
    assert len(labels) == len(set(labels)) >= len(batches)  # one group per batch and rank kind, none dropped
    assert overlapping(fig) == []


def test_many_series_differ_in_marker_and_line_style_not_colour_alone(crowd, tmp_path, monkeypatch):
    figures = _figures(crowd, tmp_path, monkeypatch)
    # Twelve series are more than one figure holds apart: they part over several, each series its own style in all.
    series, name = [], "per-sample figures"
    for fig in (f for n, f in figures.items() if n.startswith("per-sample-")):
        legend = fig.legends[0]
        mine = [(handle.get_color(), handle.get_marker(), handle.get_linestyle())
                for handle, text in zip(legend.legend_handles, legend.get_texts()) if "(baseline)" not in text.get_text()]
        assert len(mine) <= P.MAX_SERIES
        series += mine
    assert len(series) == 12
    assert len(set(series)) == 12
    # Colours repeat past ten series; no two series that share a colour share a marker.
    by_colour = {}
    for colour, marker, _ in series:
        by_colour.setdefault(colour, set())
        assert marker not in by_colour[colour], f"{name}: two series of colour {colour} with marker {marker}"
        by_colour[colour].add(marker)


def test_sizes_of_several_sweeps_on_one_axis_keep_their_tick_labels_apart():
    """A 4 KiB-16 MiB CPU sweep beside GPU sweeps of 32 MiB x 8 and 83.45 MiB x 4 in one busbw figure."""
    import matplotlib.pyplot as plt
    from bench.common.units import human_bytes
    sizes = [4096 * 4 ** i for i in range(7)] + [32 << 20 << 3 * i for i in range(4)] + [87_500_000 * 4 ** i for i in range(4)]
    fig, ax = plt.subplots(figsize=(8, 6))
    ax.set_xscale("log", base=2)
    ax.plot(sizes, [1] * len(sizes))
    P.log2_ticks(ax, sizes, human_bytes)
    shown = [t.get_text() for t in ax.get_xticklabels()]
    assert overlapping(fig) == [] and shown[0] == "4 KiB" and 5 <= len(shown) <= 9, shown
    plt.close(fig)
