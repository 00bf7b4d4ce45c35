"""Is my number normal? A fixture bundle's figures judged against the expected ranges (each suite's
expected.json): the real 1x H200 copy run (within, and no reference where no range holds), the consumer
box's slow copies (below, with the causes its bundle shows), a CPU host (no reference), in the report and
in `ddpbench run`'s lines; this project's own 2x H100 ranges judge busbw, DDP and FSDP steps and scaling;
and a figure is judged only against a range of its own key: never of another algorithm, node count,
transport or dtype."""
from __future__ import annotations

import copy
import gzip
import json

import pytest

from bench import suites
from bench.agent import counters
from bench.bundle import write_bundle
from bench.common.run import Run
from bench.common.stats import metric
from bench.judging import normal
from bench.judging.host import Host
from bench.judging.normal import NO_REFERENCE, judgements
from bench.judging.summary import judge_host, summary_lines
from bench.judging.ranges import Ranges, expected
from bench.report import write_report
from tests.conftest import REPO
from tests.e2e.test_link_truth import H200, fixture_bundle, rtx_fingerprint

MIB = 1 << 20


def judged(run: Run, fingerprint: dict) -> list:
    """The run's figures, judged on the host of this fingerprint."""
    return judgements(run, Host.of(fingerprint), suites.get(run.suite))


def judge(run: Run, fingerprint: dict):
    """The run's first figure, judged."""
    return judged(run, fingerprint)[0]


def h200_copy_runs() -> list[dict]:
    raw = json.loads((H200 / "copy-raw.json").read_text())
    return [{**run, "transport": raw["launches"][0]["transport"]} for run in raw["runs"]]


def point(runs: list, direction: str, size: int, engine: str = "ce", bidirectional: bool = False) -> dict:
    return next(r for r in runs if (r["params"]["direction"], r["params"]["engine"], r["params"]["bidirectional"],
                                    r["params"]["size_bytes"]) == (direction, engine, bidirectional, size))


def test_the_h200s_copies_are_within_and_the_rest_has_no_reference():
    fp, runs = json.loads((H200 / "fingerprint.json").read_text()), h200_copy_runs()
    within = judge(Run(point(runs, "h2d", 256 * MIB)), fp)
    assert within.verdict == "within" and within.row["sources"] == ["ddpbench-h200x1-copy"]
    assert "NVIDIA H200, pcie5-x16; ddpbench-h200x1-copy" in within.expected()
    small = judge(Run(point(runs, "h2d", MIB)), fp)  # a 1 MiB copy measures latency: no range holds it
    assert small.verdict == NO_REFERENCE and small.why == "h2d_copy_gbps of NVIDIA H200 at 1 rank(s): ranges hold 64 MiB and up"
    assert judge(Run(point(runs, "h2d", 256 * MIB, engine="sm")), fp).verdict == NO_REFERENCE


def slow_4090_copy(gbps: float, link_in_window: "tuple | None") -> dict:
    """The H200's 256 MiB host-to-GPU1 copy as the consumer box would have measured it."""
    run = copy.deepcopy(point(h200_copy_runs(), "h2d", 256 * MIB))
    run["params"]["dst"] = "gpu1"
    run["metrics"]["copy_gbps"] = metric([gbps, gbps * 1.01, gbps * 0.99])
    if link_in_window:  # NVML read the link this way throughout the timed copies
        gen, width = link_in_window
        samples = [{"t": i / 10, "sm_clock_mhz": 2520, "mem_clock_mhz": 10501, "power_w": 80.0, "temperature_c": 40,
                    "reasons": 0, "pcie_tx_kbps": None, "pcie_rx_kbps": None, "pcie_gen": gen, "pcie_width": width,
                    "nvlink_tx_bytes": None, "nvlink_rx_bytes": None} for i in range(5)]
        window = {"start_s": 0.0, "end_s": 0.4, "steps_count": 100}
        run["gpu_counters"] = {"interval_s": 0.1, "gpus": [counters.summarize_window(1, samples, 350.0, window, 2520)]}
    return run


def test_a_slow_copy_on_the_consumer_box_is_below_with_the_causes_its_bundle_shows():
    fp = rtx_fingerprint()  # GPU1: 4.0 x8 under load in a x16 slot, power capped at 350 of 450 W
    found = judge(Run(slow_4090_copy(12.0, None)), fp)
    assert found.verdict == "below" and found.row["gpu"] == "NVIDIA GeForce RTX 4090" and found.row["sources"] == ["nvbandwidth-15"]
    assert any("GPU1's link trains to 4.0 x8 under load in a 4.0 x16 slot: a riser" in cause for cause in found.causes)
    assert any("GPU1's power limit is 350 W, below its default 450 W: a power cap" in cause for cause in found.causes)
    asleep = judge(Run(slow_4090_copy(3.2, (1, 16))), fp)
    assert "GPU1's link ran at 1.0 x16 at most while measured, its slot allows 4.0 x16: a sleeping link" in asleep.why
    assert judge(Run(slow_4090_copy(25.0, None)), fp).verdict == "within"


def test_a_ddp_step_slower_than_its_range_is_below_and_a_faster_one_above():
    fp = json.loads((H200 / "fingerprint.json").read_text())
    recipe = next(row["key"]["params"] for row in expected().rows if row["figure"] == "ddp_step_time_s" and "runs" not in row)
    run = {"suite": "ddp", "params": {**recipe, "global_batch": 8}, "world_size": 1, "status": "ok",
           "launch_id": "00-ddp-default-ws1", "transport": h200_copy_runs()[0]["transport"],
           "metrics": {"step_time_s": metric([0.095, 0.096, 0.094])}}
    assert judge(Run(run), fp).verdict == "within"
    run["metrics"]["step_time_s"] = metric([0.2, 0.21, 0.19])
    assert judge(Run(run), fp).verdict == "below"  # a step takes longer: below the range's pace
    run["metrics"]["step_time_s"] = metric([0.05, 0.05, 0.05])
    assert judge(Run(run), fp).verdict == "above"
    assert judge(Run({**run, "params": {**run["params"], "compile": False}}), fp).verdict == NO_REFERENCE  # another recipe


def test_the_report_and_the_run_summary_judge_every_figure_and_cite_the_sources(tmp_path):
    document = fixture_bundle()
    document["hosts"][1]["runs"] = [{**slow_4090_copy(12.0, (1, 16)), "launch_id": "00-copy-default-ws1"}]
    document["hosts"][1]["launches"] = copy.deepcopy(document["hosts"][0]["launches"])
    bundle = write_bundle(tmp_path / "bundle.json", document)
    verdicts = {host["name"]: [found.verdict for _, found in judge_host(host)] for host in bundle["hosts"]}
    assert verdicts["h200x1"].count("within") == 6 and set(verdicts["h200x1"]) == {"within", NO_REFERENCE}
    assert verdicts["rig-4090"] == ["below"]
    report = (write_report([bundle], tmp_path / "report")).read_text()
    assert "## Is my number normal?" in report and "6 within, 1 below, 42 no reference" in report
    assert "| below ⚠ |" in report and "a sleeping link" in report
    assert "nvbandwidth-15: NVIDIA/nvbandwidth issue #15" in report and "https://github.com/NVIDIA/nvbandwidth/issues/15" in report
    # the link state of the run's window, beside the counters
    assert "rig-4090 00-copy-default-ws1 (h2d ce host→gpu1 256 MiB) GPU1: PCIe 1.0 x16 at most while measured, its slot allows 4.0 x16" in report
    lines = summary_lines(bundle)
    assert lines[0].startswith("normal? host h200x1: 48 figure(s): 6 within, 42 no reference")
    assert lines[-1].startswith("below: host rig-4090: 00-copy-default-ws1: h2d ce host→gpu1 256 MiB: 12 GB/s, expected 22.7-27.7 GB/s")


def test_a_cpu_host_has_no_reference():
    run = {**h200_copy_runs()[0], "params": {**h200_copy_runs()[0]["params"], "direction": "h2h", "engine": "cpu",
                                             "src": "host", "dst": "host"}}
    found = judge(Run(run), {"gpus": []})
    assert (found.verdict, found.why) == (NO_REFERENCE, "no GPU: the expected ranges are per GPU model")


def test_a_peer_copy_marked_by_the_gate_shows_in_the_copy_section(tmp_path):
    document = fixture_bundle()
    peer = copy.deepcopy(point(h200_copy_runs(), "h2d", 256 * MIB))
    peer["params"].update(direction="d2d", src="gpu0", dst="gpu1")
    peer["warnings"] = [{"code": "p2p_gate_failed", "message": "its data went peer to peer", "likely_cause": "a broken P2P path"}]
    document["hosts"][1]["runs"] = [{**peer, "launch_id": "00-copy-default-ws1"}]
    document["hosts"][1]["launches"] = copy.deepcopy(document["hosts"][0]["launches"])
    report = write_report([write_bundle(tmp_path / "bundle.json", document)], tmp_path / "report").read_text()
    copies = report[report.index("## Copy bandwidth"):report.index("## Is my number normal?")]
    assert "| p2p_gate_failed | its data went peer to peer | a broken P2P path |" in copies


# --- This project's own boxes: the ranges its bundles make --------------------------------------------

def _bundle(path) -> dict:
    data = (REPO / path).read_bytes()
    return json.loads(gzip.decompress(data) if path.endswith(".gz") else data)


def test_the_h100_box_answers_at_two_gpus_for_busbw_steps_and_scaling():
    """seed002 on 2x H100: every NCCL figure has a range; a step 20% slower is below its range, and so is
    its scaling; FSDP steps have ranges too."""
    bundle = _bundle("benchmarks/results/bundles/20261125T212254Z-56d161.bundle.json")
    host = bundle["hosts"][0]
    every = judge_host(host)
    figures = {found.figure.name for _, found in every if found.verdict == "within"}
    assert {"allreduce_busbw_gbps", "ddp_step_time_s", "ddp_scaling_efficiency_fraction"} <= figures
    assert {found.why for _, found in every if found.verdict == NO_REFERENCE} == {
        "no expected range of allreduce_busbw_gbps of NVIDIA H100 80GB HBM3 at 2 rank(s)"}  # gloo's: no NCCL link
    run = next(r for r in host["runs"] if r["suite"] == "ddp" and r["world_size"] == 2 and r["transport"]["preset"] == "default"
               and r["params"]["model"] == "gpt2-large")
    slower = copy.deepcopy(run)
    slower["metrics"]["step_time_s"] = metric([x * 1.2 for x in run["metrics"]["step_time_s"]["samples"]])
    slower["derived"]["scaling_efficiency_fraction"] /= 1.2
    step, scaling = judged(Run(slower), host["fingerprint"])
    assert (step.figure.name, step.verdict, scaling.figure.name, scaling.verdict) == (
        "ddp_step_time_s", "below", "ddp_scaling_efficiency_fraction", "below")
    assert scaling.expected().endswith("of ideal (NVIDIA H100 80GB HBM3, nvlink4; ddpbench-h100x2-56d161)")
    seed001 = _bundle("benchmarks/results/bundles/20261125T183210Z-4271cb.bundle.json.gz")["hosts"][0]
    fsdp = [found for run, found in judge_host(seed001) if run.suite == "fsdp"]
    assert fsdp and {found.verdict for found in fsdp} == {"within"}
    assert {found.figure.name for found in fsdp} == {"fsdp_step_time_s", "fsdp_scaling_efficiency_fraction"}


# --- A figure meets only a range of its own key ---------------------------------------------------

FOUR_H200 = "benchmarks/results/bundles/20261126T145046Z-b6143d.bundle.json.gz"


def _all_reduce_64mib(host: dict, algorithm: "str | None") -> Run:
    return next(run for run in map(Run, host["runs"])
                if run.suite == "collectives" and run.params["op"] == "all_reduce" and run.params["size_bytes"] == 64 << 20
                and run.transport.get("algorithm") == algorithm and not run.transport.get("nodes"))


def test_tree_and_ring_figures_are_never_judged_against_nccls_own_choice(monkeypatch):
    """4x H200 over NV18: the tree all-reduce's 183 GB/s at 64 MiB is no slot's or riser's doing: a range of
    the tree's holds it; without one, the range of NCCL's own choice (which ran ring or NVLS) does not; nor
    the ring's."""
    host = _bundle(FOUR_H200)["hosts"][0]
    own = judged(_all_reduce_64mib(host, None), host["fingerprint"])[0]
    assert own.verdict == "within" and "algorithm" not in own.row["key"]
    for algorithm in ("tree", "ring"):
        found = judged(_all_reduce_64mib(host, algorithm), host["fingerprint"])[0]
        assert found.verdict == "within" and found.row["key"]["algorithm"] == algorithm, found
        others = tuple(row for row in expected().rows if row["key"].get("algorithm") != algorithm)
        monkeypatch.setattr(normal, "expected", lambda: Ranges(others, {}))
        found = judged(_all_reduce_64mib(host, algorithm), host["fingerprint"])[0]
        monkeypatch.undo()
        assert found.verdict == NO_REFERENCE and found.row is None and found.missing == ("algorithm",), found
        held = found.why.removeprefix(f"no expected range of allreduce_busbw_gbps of NVIDIA H200 over nvlink at 4 rank(s) with "
                                      f"NCCL's {algorithm} algorithm: ranges hold NCCL's ")
        assert held in ("own algorithm", f"{({'tree', 'ring'} - {algorithm}).pop()} algorithm"), found.why
    assert not any(found.verdict in ("below", "above") and run.transport.get("algorithm") for run, found in judge_host(host))


@pytest.mark.parametrize("field, other", [("algorithm", "tree"), ("nodes", 2), ("transport", "host_memory"), ("ranks", 2),
                                          ("dtype", "bfloat16"), ("protocol", "LL128"), ("env", {"NCCL_BUFFSIZE": "1048576"}),
                                          ("nccl", "2.32")])
def test_a_range_of_another_key_judges_nothing(monkeypatch, field, other):
    """A range far below the figure, of its key: "above"; the same range for another algorithm, node
    count, path, ranks, dtype, protocol or env: no reference, whichever way the figure lies."""

    host = _bundle(FOUR_H200)["hosts"][0]
    run = _all_reduce_64mib(host, None)
    key = {"ranks": 4, "transport": "nvlink", "dtype": "float32", "size_bytes_min": 64 << 20}
    row = {"suite": "collectives", "figure": "allreduce_busbw_gbps", "gpu": "NVIDIA H200", "link": "nvlink4", "low": 1.0,
           "high": 2.0, "key": key, "basis": "measured", "sources": ["ddpbench-h200x2-nccl-tests"], "derivation": "a test's"}
    monkeypatch.setattr(normal, "expected", lambda: Ranges((row,), {}))
    assert judged(run, host["fingerprint"])[0].verdict == "above"
    for low, high in ((1.0, 2.0), (1000.0, 2000.0)):  # far below the figure, and far above it
        unlike = {**row, "low": low, "high": high, "key": {**key, field: other}}
        monkeypatch.setattr(normal, "expected", lambda: Ranges((unlike,), {}))
        found = judged(run, host["fingerprint"])[0]
        assert found.verdict == NO_REFERENCE and found.row is None, (field, found)


def test_a_range_of_one_nccl_minor_judges_no_figure_of_another():
    """The 4x H200's ranges were measured on NCCL 2.28: the same box's figure on NCCL 2.32 (its library,
    or the run's own NCCL, an imported nccl-tests result's) has no reference, saying which; a patch
    release judges as before; a copy between GPUs, which no NCCL runs, is judged whatever the NCCL."""
    host = _bundle(FOUR_H200)["hosts"][0]
    run = _all_reduce_64mib(host, None)
    assert judged(run, host["fingerprint"])[0].row["key"]["nccl"] == "2.28"
    newer = copy.deepcopy(host["fingerprint"])
    newer["software"]["nccl"] = "2.32.6"
    found = judged(run, newer)[0]
    assert found.verdict == NO_REFERENCE and found.missing == ("nccl",)
    assert found.why == ("no reference for NCCL 2.32: the ranges of allreduce_busbw_gbps of NVIDIA H200 over nvlink at 4 rank(s) "
                         "were measured with NCCL 2.28, whose choice of algorithm may differ")
    own = Run({**run.record, "transport": {**run.transport, "nccl_version": "2.32.6"}})
    assert judged(own, host["fingerprint"])[0].missing == ("nccl",)
    patched = Run({**run.record, "transport": {**run.transport, "nccl_version": "2.28.3"}})
    assert judged(patched, newer)[0].verdict == "within"
    copies = h200_copy_runs()
    fingerprint = json.loads((H200 / "fingerprint.json").read_text())
    before = [found.verdict for found in judged(Run(copies[0]), fingerprint)]
    fingerprint["software"]["nccl"] = "2.32.6"
    assert [found.verdict for found in judged(Run(copies[0]), fingerprint)] == before


def test_a_two_node_figure_is_never_judged_against_a_one_node_range(monkeypatch):
    """The emulated 2 nodes x 1 H200 over sockets, against a socket range of one box at 2 ranks: no reference."""

    host = _bundle("benchmarks/results/bundles/20261126T162725Z-088b2d.bundle.json.gz")["hosts"][0]
    runs = [run for run in map(Run, host["runs"]) if run.suite == "collectives" and run.ok]
    row = {"suite": "collectives", "figure": "allreduce_busbw_gbps", "gpu": "NVIDIA H200", "link": "socket-loopback", "low": 1e-3,
           "high": 2e-3, "key": {"ranks": 2, "transport": "net_socket", "dtype": "float32"},
           "basis": "measured", "sources": ["ddpbench-h200x2-nccl-tests"], "derivation": "a test's"}
    for run in runs:
        one_box = {**row, "key": {**row["key"], "algorithm": run.transport["algorithm"]}}
        monkeypatch.setattr(normal, "expected", lambda: Ranges((one_box,), {}))
        found = judged(run, host["fingerprint"])[0]
        assert run.transport["nodes"]["count"] == 2 and found.verdict == NO_REFERENCE, found
        assert found.why.endswith("with 2 nodes: ranges hold one node")
        monkeypatch.setattr(normal, "expected", lambda: Ranges(({**one_box, "key": {**one_box["key"], "nodes": 2}},), {}))
        assert judged(run, host["fingerprint"])[0].verdict == "above"  # the range of its own nodes judges it


def test_a_figure_below_its_range_names_only_the_causes_on_its_own_path(monkeypatch):
    """A PCIe link trained down under load (GPU0 at 1.0 x4 in a 5.0 x16 slot) slows what crosses PCIe,
    not an all-reduce over NVLink: there the figure is below with no cause this bundle shows; through
    host memory, the trained-down link is its likely cause."""

    host = _bundle(FOUR_H200)["hosts"][0]
    host["fingerprint"]["link_load"]["pcie_loaded"]["0"] = {"gen_loaded": 1, "width_loaded": 4}
    run = _all_reduce_64mib(host, None)
    row = {"suite": "collectives", "figure": "allreduce_busbw_gbps", "gpu": "NVIDIA H200", "link": "nvlink4", "low": 1000.0,
           "high": 2000.0, "key": {"ranks": 4, "transport": "nvlink", "dtype": "float32"}, "basis": "measured",
           "sources": ["ddpbench-h200x2-nccl-tests"], "derivation": "a test's"}
    monkeypatch.setattr(normal, "expected", lambda: Ranges((row,), {}))
    over_nvlink = judged(run, host["fingerprint"])[0]
    assert over_nvlink.verdict == "below" and over_nvlink.causes == (normal.USUAL_CAUSES,)
    shm = Run({**run.record, "transport": {**run.transport, "nccl_used": ["SHM"]}})
    through_host = {**row, "link": "pcie5-x16-host", "key": {**row["key"], "transport": "host_memory"}}
    monkeypatch.setattr(normal, "expected", lambda: Ranges((through_host,), {}))
    (cause,) = judged(shm, host["fingerprint"])[0].causes
    assert cause.startswith("GPU0's link trains to 1.0 x4 under load in a 5.0 x16 slot: a riser")
