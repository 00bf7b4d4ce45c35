"""The predictor on nodes of GPUs and on bundles the schema accepts but nothing can compute: a run on
2 emulated nodes replayed on its links inside and between nodes (or on the sweep measured on that
topology, with the algorithm its NCCL_ALGO named), the signed-error table, `ddpbench predict`'s
topology beside the flat links, the runs left out with their reason, 100,000 buckets, and the bad
arguments, each one line."""
from __future__ import annotations

import gzip
import json
import os
import re
import time
from pathlib import Path

import pytest

from bench.bundle import seal
from bench.common.allreduce import Link, Topology
from bench.common.run import Run
from bench.common.replay import NONE, Bucket, Timeline, replay
from bench.report.markdown import render
from bench.suites.ddp.predict import predict, predict_host
from bench.suites.ddp.predict.results import error_table
from bench.suites.ddp.predict.sweeps import algorithm_of
from bench.suites.ddp.predict.topology import link_specs
from bench.suites.ddp.report.predicted import blocks
from tests.conftest import REPO
from tests.support.cli_in_process import ddpbench

BUNDLES = REPO / "benchmarks" / "results" / "bundles"
H100_SEED002 = BUNDLES / "20261125T212254Z-56d161.bundle.json"  # gpt2 and gpt2-large at 1 and 2 GPUs, micro-batch 16
MB = 25_000_000


def metric(value: float) -> dict:
    return {"samples": [value] * 3, "summary": {"n": 3, "median": value, "mean": value, "stdev": 0.0, "cv": 0.0, "p5": value,
                                                "p95": value, "min": value, "max": value}}


def transport(preset: str, used: list, env: "dict | None" = None) -> dict:
    return {"preset": preset, "backend": "nccl", "env": env or {}, "nccl_used": used, "nccl_via": [], "matches_preset": True}


def step(step_s: float, last_backward_s: float, ready: list) -> dict:
    return {"step_s": step_s, "forward_s": 0.01, "backward_s": last_backward_s, "optimizer_s": 0.01, "last_backward_start_s": 0.01,
            "last_backward_s": last_backward_s, "bucket_ready_s": ready}


def ddp_run(launch: str, ranks: int, step_s: float, preset: str = "default", used=("P2P",), env=None) -> dict:
    """A tiny model's run, global batch 8 at micro-batch 2; with peers, steps with and without all-reduce:
    the backward 30 ms alone (buckets of 25 MB ready at 10, 20, 30 ms), 50 ms with its all-reduces."""
    params = {"model": "tiny", "micro_batch": 2, "seq_len": 64, "precision": "fp32", "compile": False, "global_batch": 8,
              "grad_accum": 8 // (2 * ranks), "grad_reduce_dtype": "fp32", "weights_dtype": "float32", "num_params": 3 * MB // 4}
    ready = [0.01, 0.02, 0.03]
    timeline = {"clock": "perf_counter", "bucket_cap_bytes": MB, "first_bucket_bytes": MB, "bucket_bytes": [MB] * 3,
                "steps": [step(step_s, 0.05 if ranks > 1 else 0.03, ready)] * 3, "recorder_cpu_s": 0.0, "recorder_cpu_fraction": 0.0}
    if ranks > 1:
        timeline["steps_without_allreduce"] = [step(0.05, 0.03, ready)] * 3
    return {"suite": "ddp", "params": params, "world_size": ranks, "status": "ok", "metrics": {"step_time_s": metric(step_s)},
            "transport": transport(preset, list(used) if ranks > 1 else [], env), "launch_id": launch, "repeat": 0,
            "timeline": timeline}


def sweep(launch: str, ranks: int, preset: str, used: list, seconds_at: dict, env=None) -> list:
    return [{"suite": "collectives", "params": {"op": "all_reduce", "dtype": "float32", "size_bytes": size}, "world_size": ranks,
             "status": "ok", "metrics": {"time_s": metric(seconds)}, "transport": transport(preset, used, env), "launch_id": launch}
            for size, seconds in seconds_at.items()]


NVLINK_LIKE = {1_000_000: 30e-6, 100_000_000: 1e-3}  # 2 ranks: 100 GB/s busbw at 100 MB
SOCKET_LIKE = {1_000_000: 500e-6, 100_000_000: 33e-3}  # 2 ranks: 3 GB/s busbw at 100 MB


def emulated_host(extra_runs=(), extra_launches=(), env=None) -> dict:
    """1 GPU, and 2 nodes of 2 GPUs (sockets between them, P2P inside): with the sweeps of each link at 2 ranks."""
    runs = [ddp_run("ddp-ws1", 1, 0.09), ddp_run("ddp-2x2", 4, 0.08, "socket", ("P2P", "NET/Socket"), env),
            *sweep("ar-default", 2, "default", ["P2P"], NVLINK_LIKE), *sweep("ar-socket", 2, "socket", ["NET/Socket"], SOCKET_LIKE),
            *extra_runs]
    launches = [{"id": "ddp-ws1", "nodes": 1}, {"id": "ddp-2x2", "nodes": 2}, {"id": "ar-default", "nodes": 1},
                {"id": "ar-socket", "nodes": 1}, *extra_launches]
    return {"name": "box", "fingerprint": None, "runs": runs, "launches": launches}


def own_steps(topology: Topology) -> float:
    """The 2x2 run's step replayed from its steps without all-reduce: 10 ms before the backward, its 30 ms
    alone with buckets ready at 10, 20, 30 ms, and 20 ms after (its 80 ms step less the 60 ms to the end of
    its backward with all-reduces); no slowdown (no other run crossed the link)."""
    timeline = Timeline(0.01, 0.03, tuple(Bucket(t, MB) for t in (0.01, 0.02, 0.03)), 0.08 - 0.01 - 0.05)
    return replay(timeline, topology.time_s).step_s


def test_a_run_on_two_emulated_nodes_is_replayed_on_its_links_inside_and_between_and_tabled():
    (found,) = [predict_host(emulated_host(), "box", link_specs(["nvlink4"]), None)]
    (against,) = found.against
    inside = Link.of_curve("default", "", sorted(NVLINK_LIKE.items()), 2)
    between = Link.of_curve("socket", "", sorted(SOCKET_LIKE.items()), 2)
    assert against.shape == "2 nodes x 2 GPUs" and against.algorithm is None
    assert against.link == "default (measured all_reduce) / socket (measured all_reduce), 2 nodes x 2 GPUs"
    assert against.from_own_steps == pytest.approx(own_steps(Topology(2, 2, inside, between)))
    (row,) = error_table([found])
    assert (row.gpus, row.shape, row.link, row.algorithm, row.runs) == (4, "2 nodes x 2 GPUs", against.link, "NCCL's choice", 1)
    assert row.from_own_steps[0] == pytest.approx(against.from_own_steps / 0.08 - 1)
    text = render(blocks([found]))
    assert "### The predictor's error" in text and "| box | 4 | 2 nodes x 2 GPUs |" in text
    assert "no all_reduce" not in text.split("### The predictor's error")[1].split("\n- ")[0]


def test_a_sweep_measured_on_the_topology_itself_wins_and_one_of_another_algorithm_does_not():
    """The 2x2 sweep run with NCCL_ALGO=Ring times the ring run; the run that asked for the tree keeps the model."""
    measured = {1_000_000: 900e-6, 100_000_000: 40e-3}
    ring = sweep("ar-2x2-ring", 4, "socket", ["P2P", "NET/Socket"], measured, env={"NCCL_ALGO": "Ring"})
    launches = [{"id": "ar-2x2-ring", "nodes": 2}]
    (against,) = predict_host(emulated_host(ring, launches, env={"NCCL_ALGO": "Ring"}), "box", [], None).against
    assert against.link == "socket, 2 nodes x 2 GPUs (measured all_reduce)" and against.algorithm == "ring"
    assert against.from_own_steps == pytest.approx(own_steps(Topology(4, measured=Link.of_curve("m", "", sorted(measured.items()), 4))))
    (tree,) = predict_host(emulated_host(ring, launches, env={"NCCL_ALGO": "allreduce:tree"}), "box", [], None).against
    inside = Link.of_curve("default", "", sorted(NVLINK_LIKE.items()), 2)
    between = Link.of_curve("socket", "", sorted(SOCKET_LIKE.items()), 2)
    assert tree.algorithm == "tree" and tree.link.endswith(", 2 nodes x 2 GPUs") and "measured all_reduce)" in tree.link
    assert tree.from_own_steps == pytest.approx(own_steps(Topology(2, 2, inside, between, "tree")))


def tuned(runs: list, ran: dict) -> list:
    """The sweep's runs with the TUNING lines NCCL printed for each: size -> the algorithm it ran."""
    for run in runs:
        size = run["params"]["size_bytes"]
        run["transport"]["nccl_tuning"] = [{"function": "AllReduce", "algorithm": ran[size], "protocol": "SIMPLE", "calls": 9,
                                            "min_bytes": size, "max_bytes": size}]
    return runs


def test_a_sweep_of_nccls_choice_prices_the_algorithm_its_tuning_lines_say_it_ran_at_its_largest_sizes():
    """NCCL's choice at 2x2 ran RING at 1 MiB and TREE from 8 MiB: its points from 8 MiB time the tree run; the ring
    run, which no sweep of this topology measured at its buckets' sizes, keeps the model over the links."""
    measured = {2**20: 900e-6, 2**23: 5e-3, 2**26: 40e-3}
    choice = tuned(sweep("ar-2x2", 4, "socket", ["P2P", "NET/Socket"], measured), {2**20: "RING", 2**23: "TREE", 2**26: "TREE"})
    launches = [{"id": "ar-2x2", "nodes": 2}]
    (tree,) = predict_host(emulated_host(choice, launches, env={"NCCL_ALGO": "Tree"}), "box", [], None).against
    assert tree.link == "socket, 2 nodes x 2 GPUs (measured all_reduce: NCCL's choice, which ran tree from 8 MiB)"
    tree_points = Link.of_curve("m", "", [(2**23, 5e-3), (2**26, 40e-3)], 4)
    assert tree.from_own_steps == pytest.approx(own_steps(Topology(4, measured=tree_points)))
    (ring,) = predict_host(emulated_host(choice, launches, env={"NCCL_ALGO": "Ring"}), "box", [], None).against
    assert "NCCL's choice" not in ring.link and ring.link.endswith(", 2 nodes x 2 GPUs")


def test_a_ring_and_a_tree_run_over_one_link_never_lend_each_other_their_slowdown():
    """Two measured 2x1 runs over the same socket sweep name, one ring, one tree: each is predicted with no
    slowdown (no other run of its algorithm), not with the other's."""
    measured = {1_000_000: 900e-6, 100_000_000: 40e-3}
    runs = [*sweep("ar-ring", 2, "socket", ["NET/Socket"], measured, env={"NCCL_ALGO": "Ring"}),
            *sweep("ar-tree", 2, "socket", ["NET/Socket"], measured, env={"NCCL_ALGO": "Tree"}),
            ddp_run("ddp-ring", 2, 0.08, "socket", ("NET/Socket",), {"NCCL_ALGO": "Ring"}),
            ddp_run("ddp-tree", 2, 0.2, "socket", ("NET/Socket",), {"NCCL_ALGO": "Tree"})]
    host = {"name": "box", "fingerprint": None, "runs": runs,
            "launches": [{"id": launch, "nodes": 2} for launch in ("ar-ring", "ar-tree", "ddp-ring", "ddp-tree")]}
    found = predict_host(host, "box", [], None)
    assert {a.algorithm: a.slowdown for a in found.against} == {"ring": NONE, "tree": NONE}


def test_an_all_reduce_faster_in_the_step_than_its_sweep_alone_is_carried_to_the_other_runs_over_that_link():
    """On 2x H100, seed002's socket sweep (its own launch) was 1.5x slower than the same sizes inside the DDP steps:
    each socket run, predicted with the stretch the other measured (GPT-2 with GPT-2 Large's, and back), lands
    within 8% of its step; held at the sweep's own time the two missed by 41% and 45%."""
    (host,) = predict([json.loads(H100_SEED002.read_text())], scaling=None)
    socket = [a for a in host.against if a.run.preset == "socket"]
    assert len(socket) == 2
    for a in socket:
        assert a.slowdown.comm < -0.2
        assert abs(a.error(a.from_own_steps)) < 0.08 and abs(a.error(a.from_one_gpu)) < 0.08


@pytest.mark.parametrize("said, algorithm", [("Ring", "ring"), ("Tree", "tree"), ("^Ring", "tree"), ("^tree", "ring"),
                                             ("allreduce:tree;allgather:ring", "tree"), ("allgather:tree", None),
                                             ("Tree,Ring", None), ("", None), ("NVLS", None)])
def test_the_algorithm_is_read_from_the_runs_nccl_algo(said, algorithm):
    assert algorithm_of(Run({"transport": {"env": {"NCCL_ALGO": said}}})) == algorithm


@pytest.fixture(scope="module")
def h100_seed001(tmp_path_factory) -> Path:
    """seed001-sharded on 2x H100: gpt2-large and Llama 3.2 1B at micro-batch 2, global batches 4, 8, 16."""
    path = tmp_path_factory.mktemp("seed001") / "bundle.json"
    path.write_bytes(gzip.decompress((BUNDLES / "20261125T183210Z-4271cb.bundle.json.gz").read_bytes()))
    return path


def test_predict_answers_two_nodes_of_two_gpus_beside_the_flat_links(h100_seed001):
    done = ddpbench("predict", h100_seed001, "--link", "nvlink4", "--link", "eth-25g", "--link", "nvlink4+eth-25g",
               "--gpus", "4", "--gpus-per-node", "2")
    assert done.returncode == 0, done.stderr
    rows = [[cell.strip() for cell in line.split(" | ")] for line in done.stdout.splitlines() if line.startswith("| local | gpt2-large")]
    by_link = {row[5]: row for row in rows if row[2] == "16"}
    assert by_link["nvlink4"][4] == "1 node x 4 GPUs" and by_link["eth-25g"][4] == "4 nodes x 1 GPU"
    assert by_link["nvlink4+eth-25g"][4] == "2 nodes x 2 GPUs"
    step = {name: float(row[7]) for name, row in by_link.items()}
    assert step["nvlink4"] < step["nvlink4+eth-25g"] < step["eth-25g"]  # NVLink inside spares a part of the network's cost
    assert "nvlink4+eth-25g at 2 nodes x 2 GPUs: no all_reduce was measured on this topology" in done.stdout
    assert "no measured all_reduce curve, in this bundle or the link table, for eth-25g (1.5 GB/s, 70 us, cited)" in done.stdout
    ring = ddpbench("predict", h100_seed001, "--link", "nvlink4+eth-25g", "--gpus", "4", "--gpus-per-node", "2", "--algorithm", "ring")
    ring_rows = [line for line in ring.stdout.splitlines() if line.startswith("| local | gpt2-large") and "| 16 |" in line]
    assert float(ring_rows[0].split(" | ")[7]) > step["nvlink4+eth-25g"]  # at 2 nodes the tree moves 1/1.5 of the ring's bytes


# --- bundles the schema accepts that nothing can compute ---------------------------------------------

def _seed002() -> dict:
    return json.loads(H100_SEED002.read_text())


def _runs(doc: dict, suite: str) -> list:
    return [run for run in doc["hosts"][0]["runs"] if run["suite"] == suite]


def short_ready(doc):
    step = _runs(doc, "ddp")[1]["timeline"]["steps"][0]
    step["bucket_ready_s"] = step["bucket_ready_s"][:-1]


def median_step_zero(doc):
    _runs(doc, "ddp")[1]["metrics"]["step_time_s"]["summary"]["median"] = 0.0


def step_samples_zero(doc):
    for run in _runs(doc, "ddp"):
        run["metrics"]["step_time_s"]["samples"] = [0.0] * len(run["metrics"]["step_time_s"]["samples"])


def allreduce_time_zero(doc):
    for run in _runs(doc, "collectives"):
        run["metrics"]["time_s"]["summary"]["median"] = 0.0


def allreduce_size_zero(doc):
    for run in _runs(doc, "collectives"):
        run["params"]["size_bytes"] = 0


def price_subnormal(doc):
    doc["hosts"][0]["price_per_hour"] = 5e-324


@pytest.mark.parametrize("edit, says", [
    (short_ready, "03-ddp-default-ws2 (run 1, gpt2, global batch 32): left out: its step timeline has 5 bucket size(s) but a "
                  "step (steps) with 4 ready time(s)"),
    (median_step_zero, "03-ddp-default-ws2 (run 1, gpt2, global batch 32): left out: its median step is 0 s, which no step takes"),
    (step_samples_zero, None),
    (allreduce_time_zero, "point(s) with a size or time of 0 left out"),
    (allreduce_size_zero, "point(s) with a size or time of 0 left out"),
    (price_subnormal, "price_per_hour 4.94066e-324 USD is below 0.001 USD, which no machine rents for: no samples per dollar"),
], ids=lambda value: getattr(value, "__name__", ""))
def test_a_bundle_nothing_can_compute_in_part_is_predicted_without_it_and_says_why(edit, says):
    doc = _seed002()
    edit(doc)
    (found,) = predict([doc], ["nvlink4", "eth-25g", "nvlink4+eth-25g"], gpus_per_node=1)
    text = render(blocks([found]))
    assert found.predicted and not re.search(r"\b(inf|nan)\b", text)
    if says:
        assert any(says in note for note in found.notes), found.notes
    (again,) = predict([doc])  # the measured runs too
    assert again.against and render(blocks([again]))


def test_six_runs_of_a_hundred_thousand_buckets_predict_in_seconds():
    """Guards against a replay quadratic in its buckets (it took past 600 s): about 2 s of CPU here, each
    bucket of its own size (the CPU time, not the wall clock: this machine is shared)."""
    doc = _seed002()
    ddp = _runs(doc, "ddp")
    for run in ddp:
        timeline = run["timeline"]
        ready = [timeline["steps"][0]["last_backward_s"] * i / 100_000 for i in range(100_000)]
        timeline["bucket_bytes"] = [timeline["bucket_bytes"][0] // 20_000 + i for i in range(100_000)]
        for arm in ("steps", "steps_without_allreduce"):
            for each in timeline.get(arm) or []:
                each["bucket_ready_s"] = ready
    doc["hosts"][0]["runs"] = [r for r in doc["hosts"][0]["runs"] if r["suite"] != "ddp"] + ddp[:6]
    started = time.process_time()
    (found,) = predict([doc])
    took = time.process_time() - started
    assert len(found.against) == sum(run["world_size"] == 2 for run in ddp[:6]) and all(a.from_own_steps for a in found.against)
    assert took < 10, f"{took:.1f} s"


# --- arguments -----------------------------------------------------------------------------------

@pytest.mark.parametrize("args, says", [
    (["--gpus-per-node", "-1", "--link", "nvlink4+eth-25g"], "error: --gpus-per-node -1: a node holds 1 to 1024 GPUs"),
    (["--gpus-per-node", "0", "--link", "nvlink4+eth-25g"], "error: --gpus-per-node 0: a node holds 1 to 1024 GPUs"),
    (["--gpus-per-node", "8", "--gpus", "4", "--link", "nvlink4+eth-25g"], "error: --gpus-per-node 8 is more than --gpus 4"),
    (["--gpus-per-node", "2", "--link", "nvlink4"], "error: --gpus-per-node 2 applies to INTRA+NETWORK links"),
    (["--gpus", "100000000"], "error: --gpus 100000000: a prediction needs at least 2 GPUs to cross a link, and at most 65536"),
    (["--link", "1e-320,5"], "error: link '1e-320,5': the bandwidth '1e-320' is outside 0.001-100000 GB/s"),
    (["--link", "x" * 100_000], "error: link 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...' is not in the link table"),
    (["--link", "nvlink4+nvlink4"], "error: link 'nvlink4+nvlink4': two levels are INTRA+NETWORK"),
])
def test_arguments_outside_sense_are_one_short_line(args, says):
    done = ddpbench("predict", H100_SEED002, *args)
    assert done.returncode == 2 and done.stderr.startswith(says), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and len(done.stderr) < 2000


def test_a_fifo_is_refused_without_naming_an_option_predict_lacks(tmp_path):
    fifo = tmp_path / "bundle.json"
    os.mkfifo(fifo)
    done = ddpbench("predict", fifo)
    assert done.returncode == 2 and done.stderr.startswith("error:") and "--strict" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_one_bad_bundle_among_several_is_skipped_with_its_reason(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    done = ddpbench("predict", H100_SEED002, bad, "--link", "nvlink4")
    assert done.returncode == 0 and "warning: skipped:" in done.stderr and "bad.json" in done.stderr, done.stderr
    assert "### What link do I need?" in done.stdout


def test_a_subnormal_price_in_a_sealed_bundle_is_refused_by_the_schema(tmp_path):
    """The schema's floor on a price keeps a samples-per-dollar figure finite; predict says which field."""
    doc = _seed002()
    price_subnormal(doc)
    path = tmp_path / "priced.json"
    path.write_text(json.dumps(seal({k: v for k, v in doc.items() if k != "sha256"})))
    done = ddpbench("predict", path, "--link", "nvlink4")
    assert done.returncode == 2 and "price_per_hour" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert not re.search(r"\binf\b", done.stdout)
