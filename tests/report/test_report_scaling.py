"""The answer's throughput against GPUs: a line per topology (transport, nodes, NCCL's algorithm), the
ideal from the 1-GPU baseline, the node boundary, measured ÷ ideal at the largest size in the caption.
On a GPU bundle made from a real 2x H100 one (4 GPUs and 2 emulated nodes of 2 edited in), and on a
real CPU run of the shipped scaling plan."""

from __future__ import annotations

import copy
import dataclasses
import gzip
import json
import re
import statistics

import pytest

from bench import schemas
from bench.bundle import seal
from bench.common.stats import metric
from bench.report import plots as P
from bench.report.merge import merge
from bench.suites.fsdp.report.answer import answer_plots as sharded_plots
from bench.suites.training.report import scaling_caption, scaling_figure, scaling_figures, workload
from tests.conftest import REPO, cli

H100X2 = REPO / "benchmarks" / "results" / "bundles" / "20261125T183210Z-4271cb.bundle.json.gz"
GPU_NAME = "NVIDIA H100 $80GB$"  # a $ pair that matplotlib would take for math
# Throughput at 4 GPUs against 2, per preset; the 2 emulated nodes (sockets between) per algorithm.
AT_FOUR = {"default": 1.9, "p2p_off": 1.6, "socket": 1.2}
TWO_NODES = {"ring": 1.4, "tree": 1.1}
TWO_NODES_OF_TWO = {"count": 2, "ranks_per_node": 2, "emulated": True, "proof": "nccl", "nccl_nodes": 2,
                    "nccl_ranks_per_node": 2, "grouped_as_planned": True, "inside": ["P2P"], "between": ["NET/Socket"],
                    "asked_inside": ["NVLS", "P2P", "SHM"], "asked_between": ["NET/Socket"]}


def _throughput(run: dict, factor: float) -> None:
    """The run's samples/s times factor, and its step and per-sample times to match."""
    n, batch = run["world_size"], run["params"]["global_batch"]
    rates = [s * factor for s in run["metrics"]["samples_per_s"]["samples"]]
    run["metrics"].update(samples_per_s=metric(rates), step_time_s=metric([batch / r for r in rates]),
                          per_sample_gpu_time_s=metric([n / r for r in rates]))


def _launch(host: dict, run: dict, launch_id: str, nodes: int = 1) -> None:
    launch = copy.deepcopy(next(l for l in host["launches"] if l["id"] == run["launch_id"]))
    launch.update(id=launch_id, world_size=run["world_size"], nodes=nodes)
    host["launches"].append(launch)
    run["launch_id"] = launch_id


def four_gpus_and_two_nodes(doc: dict) -> dict:
    """The 2x H100 bundle as a 4x H100 one: every training run at 2 GPUs again at 4, and the socket runs
    at 4 GPUs again as 2 emulated nodes of 2 with ring and with tree."""
    doc = copy.deepcopy(doc)
    host = doc["hosts"][0]
    fp = host["fingerprint"]
    fp["gpus"] = [dict(fp["gpus"][0], index=i, name=GPU_NAME, uuid_sha256=f"{i:016x}", pci_bus_id=f"00000000:0{i + 1}:00.0")
                  for i in range(4)]
    fp["gpu_count"] = 4
    names = [f"GPU{i}" for i in range(4)]
    for table, cell in (("matrix", "NV18"), ("p2p_read", "OK"), ("p2p_write", "OK")):
        fp["topology"][table] = {a: {b: cell for b in names if b != a} for a in names}
    for table in ("cpu_affinity", "numa_affinity"):
        fp["topology"][table] = {a: fp["topology"][table]["GPU0"] for a in names}
    added = []
    for run in [r for r in host["runs"] if r["suite"] != "collectives" and r["world_size"] == 2 and r["status"] == "ok"]:
        preset = run["transport"]["preset"]
        four = copy.deepcopy(run)
        four["world_size"] = 4
        _throughput(four, AT_FOUR[preset])
        _launch(host, four, run["launch_id"].replace("-ws2", "-ws4"))
        added.append(four)
        if preset != "socket":
            continue
        for algorithm, factor in TWO_NODES.items():
            nodes = copy.deepcopy(four)
            nodes["transport"].update(nodes=TWO_NODES_OF_TWO, algorithm=algorithm, nccl_used=["NET/Socket", "P2P"],
                                      nccl_tuning=[{"function": "AllReduce", "algorithm": algorithm.upper(), "protocol": "SIMPLE",
                                                    "calls": 3, "min_bytes": 1 << 20, "max_bytes": 1 << 28}])
            _throughput(nodes, factor / AT_FOUR[preset])
            _launch(host, nodes, run["launch_id"].replace("-ws2", f"-{algorithm}-n2-ws4"), nodes=1)
            added.append(nodes)
    host["runs"] += added
    sealed = seal(doc)
    schemas.validator("bundle").validate(sealed)
    return sealed


@pytest.fixture(scope="module")
def gpu_bundle() -> dict:
    return four_gpus_and_two_nodes(json.loads(gzip.decompress(H100X2.read_bytes())))


def _median(run: dict) -> float:
    return statistics.median(run["metrics"]["samples_per_s"]["samples"])


def test_a_line_per_topology_against_the_ideal_from_one_gpu(gpu_bundle):
    comparison = merge([gpu_bundle])
    found = scaling_figures(comparison, "ddp", workload)
    # One figure per model the runs trained, at the largest global batch (the answer's headline).
    assert [f.title.split(" — ")[1].split(",")[0] for f in found] == ["gpt2-large", "llama3.2-1b"]
    figure = found[0]
    assert figure.title.endswith("global batch 16")
    runs = gpu_bundle["hosts"][0]["runs"]
    ddp16 = [r for r in runs if r["suite"] == "ddp" and r["params"]["global_batch"] == 16 and r["params"]["model"] == "gpt2-large"]
    one_gpu = {r["params"]["global_batch"]: r for r in runs if r["suite"] == "ddp" and r["params"]["model"] == "gpt2-large"
               and r["world_size"] == 1 and r["transport"]["preset"] == "default"}
    # The ideal of N GPUs is N times one GPU's throughput at their work per GPU: global batch 16 / N.
    assert figure.ideal == {n: _median(one_gpu[16 // n]) for n in (1, 2, 4)}
    base = one_gpu[4]
    labels = {line.label: [x for x, _ in line.points] for line in figure.lines}
    assert labels == {
        "default via P2P": [1, 2, 4],
        "p2p_off via SHM": [2, 4],
        "socket via NET/Socket": [2, 4],
        "socket via NET/Socket+P2P, 2 emulated nodes, ring (NCCL ran RING/SIMPLE)": [4],
        "socket via NET/Socket+P2P, 2 emulated nodes, tree (NCCL ran TREE/SIMPLE)": [4],
    }, labels
    assert figure.boundaries == [(2, 2)]
    # Measured ÷ ideal at 4 GPUs, in the caption, for every line measured there.
    (tree,) = [r for r in ddp16 if r["transport"].get("algorithm") == "tree"]
    efficiency = dict(figure.efficiencies())
    assert len(efficiency) == 5
    tree_label = "socket via NET/Socket+P2P, 2 emulated nodes, tree (NCCL ran TREE/SIMPLE)"
    assert efficiency[tree_label] == pytest.approx(_median(tree) / (4 * _median(base)))
    caption = scaling_caption(figure)
    assert "At 4 GPUs, measured ÷ ideal: default via P2P " in caption
    assert f"tree (NCCL ran TREE/SIMPLE) {_median(tree) / (4 * _median(base)):.0%}" in caption


def test_the_figure_draws_each_line_the_ideal_and_the_node_boundary(gpu_bundle, tmp_path):
    (figure, *_) = scaling_figures(merge([gpu_bundle]), "ddp", workload)
    fig = scaling_figure(figure)
    (ax,) = fig.axes
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert all(any(text.startswith(line.label) for text in legend) for line in figure.lines)
    assert "ideal: the 1-GPU throughput × GPUs" in legend
    assert "node boundary of the lines over 2 nodes: 2 GPUs a node" in legend
    (ideal,) = [line for line in ax.lines if line.get_label().startswith("ideal")]
    assert list(ideal.get_xdata()) == [1, 2, 4]
    assert list(ideal.get_ydata()) == pytest.approx([figure.ideal_at(x) for x in (1, 2, 4)])
    (boundary,) = [line for line in ax.lines if line.get_label().startswith("node boundary")]
    assert list(boundary.get_xdata()) == [3, 3]  # between 2 GPUs (one node) and 4 (two)
    P.save(fig, tmp_path / "f.png", tmp_path / "f.svg")  # the GPU's $...$ stays text, not math
    assert "H100 $80GB$" in (tmp_path / "f.svg").read_text()
    # 4 GPUs on one node stand right of it beside the 2 nodes: that side is not shaded as "2 nodes".
    (drawn,) = json.loads((tmp_path / "f.json").read_text())["axes"]
    assert drawn["shaded"] == [] and not any(text.get_text().strip() == "2 nodes →" for text in ax.texts)
    assert {line["label"]: [point[0] for point in line["points"]] for line in drawn["lines"]} == {
        "ideal: the 1-GPU throughput × GPUs": [1, 2, 4], **{line.label: [x for x, _ in line.points] for line in figure.lines}}


def test_only_a_side_where_every_run_crossed_nodes_is_shaded_as_nodes(gpu_bundle, tmp_path):
    (figure, *_) = scaling_figures(merge([gpu_bundle]), "ddp", workload)
    # The figure as a plan that ran 4 GPUs only as 2 nodes of 2 would draw it.
    single_node_below_4 = [dataclasses.replace(line, points=[p for p in line.points if p[0] < 4]) if line.detail == (1,) else line
                           for line in figure.lines]
    fig = scaling_figure(dataclasses.replace(figure, lines=single_node_below_4))
    P.save(fig, tmp_path / "f.png", tmp_path / "f.svg")
    (drawn,) = json.loads((tmp_path / "f.json").read_text())["axes"]
    assert drawn["shaded"] == [{"from": 3, "to": 4.5, "label": "2 nodes"}]
    assert any(text.get_text() == " 2 nodes →" for text in fig.axes[0].texts)


def test_sharded_training_is_drawn_against_the_plain_model_on_one_gpu(gpu_bundle):
    drawn = sharded_plots(merge([gpu_bundle]), lambda builder, args, stem, title, caption: args[0], {})
    assert drawn, "no throughput figure for the sharded runs"
    runs = gpu_bundle["hosts"][0]["runs"]
    for figure in drawn:
        batch = int(figure.title.rsplit(" ", 1)[1])
        (plain,) = [r for r in runs if r["suite"] == "ddp" and r["world_size"] == 1 and r["params"]["global_batch"] == batch
                    and r["transport"]["preset"] == "default" and r["params"]["model"] in figure.title]
        assert figure.ideal[1] == _median(plain)
        assert [x for x, _ in figure.lines[0].points] == [1, 2, 4]  # the sharded run on 1 GPU is its own point
    assert any("2 emulated nodes" in line.label for figure in drawn for line in figure.lines)


def test_the_report_puts_the_figure_in_its_answer(gpu_bundle, tmp_path):
    path = tmp_path / "bundle.json"
    path.write_text(json.dumps(gpu_bundle))
    done = cli("report", path, "--out", tmp_path / "report")
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "report" / "report.md").read_text()
    answer = text.split("\n## ")[1]
    assert answer.startswith("The answer")
    pictures = re.findall(r"!\[Throughput against GPUs, [^]]*\]\((throughput-[^)]+\.png)\)", answer)
    assert len(pictures) >= 2 and all((tmp_path / "report" / p).is_file() for p in pictures)
    assert "At 4 GPUs, measured ÷ ideal: default via P2P" in answer
