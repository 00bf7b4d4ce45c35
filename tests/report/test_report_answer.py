"""The report opens with its answer: per host and workload, does the link slow training, by how much
and over which link; each line checked against the figures the bundles hold."""

from __future__ import annotations

import json
import re
import statistics

import pytest

from bench.bundle import seal
from bench.common.launch_floor import launches
from bench.common.run import Run
from bench.common.stats import ratio_interval
from bench.report.answer import TITLE, verdict
from bench.suites.training import pacing
from tests.support.cli_in_process import ddpbench
from tests.support.report_variants import make_variant, write


def _section(md: str, heading: str) -> str:
    start = md.index(f"## {heading}")
    end = md.find("\n## ", start + 1)
    return md[start:end if end > 0 else None]


def _answer_of(doc: dict, tmp_path) -> str:
    """The answer section of the report of `doc`, resealed after a test's edits."""
    path = write(tmp_path / "edited.json", seal({k: v for k, v in doc.items() if k != "sha256"}))
    assert ddpbench("report", str(path), "--out", str(tmp_path / "out")).returncode == 0
    return _section((tmp_path / "out" / "report.md").read_text(), TITLE)


def _rows(section: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.strip("|").split(" | ")] for line in section.splitlines()
            if line.startswith("| ") and not line.startswith("| host ·")]


def _ddp(doc: dict) -> list[dict]:
    return [r for r in doc["hosts"][0]["runs"] if r["suite"] == "ddp" and r["status"] == "ok"]


def _expected(doc: dict, run: dict) -> dict:
    """What the answer must say of one multi-rank run, from the bundle's samples and derived figures: scaled
    against the 1-rank run with its work per rank (global batch / N) where there is one, else against the
    1-rank run of its global batch."""
    one_rank = {r["params"]["global_batch"]: r for r in _ddp(doc) if r["world_size"] == 1}
    batch = run["params"]["global_batch"]
    base = one_rank.get(batch // run["world_size"]) or one_rank[batch]
    samples = lambda r, m: r["metrics"][m]["samples"]  # noqa: E731
    # One launch a side: the interval takes the launch-to-launch floor of the step time's kind.
    efficiency = ratio_interval(*(launches([Run(r)], "per_sample_gpu_time_s", "step_time_s", pacing.of_run(Run(r)).verdict)
                                  for r in (base, run)))
    assert efficiency.median == pytest.approx(run["derived"]["scaling_efficiency_fraction"])
    step = statistics.median(samples(run, "step_time_s"))
    exposed = step - statistics.median(samples(base, "step_time_s")) * batch / run["world_size"] / base["params"]["global_batch"]
    return {"efficiency": efficiency, "lost": 1 - efficiency.median, "step": step, "exposed": exposed, "base": base}


def test_the_report_opens_with_the_answer(fleet_report):
    md = (fleet_report / "report.md").read_text()
    headings = [line for line in md.splitlines() if line.startswith("## ")]
    assert headings[0] == f"## {TITLE}"
    answer = _section(md, TITLE)
    assert "negligible under 5% lost, noticeable to 15%, severe past it" in answer
    # The fleet's CPU host trains beside its GPU hosts: the figure they share names both kinds of rank.
    assert "![Per-sample time × #GPUs or processes, tiny, fp32, 32 tokens x micro-batch 2](per-sample-tiny-fp32-s32-mb2.png)" in answer


@pytest.mark.parametrize("name, expected_verdict", [("rig-3090", "negligible"), ("rig-4090", "severe"),
                                                    ("rig-4090-p2p_off", "severe")])
def test_each_line_of_the_answer_is_the_bundles_figures(fleet, fleet_report, name, expected_verdict):
    doc = json.loads(fleet[name].read_text())
    answer = _section((fleet_report / "report.md").read_text(), TITLE)
    transport = "p2p_off via P2P ⚠ transport mismatch" if name.endswith("p2p_off") else "default via P2P"
    rows = {row[4]: row for row in _rows(answer) if row[0].startswith(doc["hosts"][0]["name"] + " · ") and row[3] == transport}
    runs = [r for r in _ddp(doc) if r["world_size"] == 2]
    assert sorted(rows) == sorted(str(r["params"]["global_batch"]) for r in runs)
    for run in runs:
        want = _expected(doc, run)
        e = want["efficiency"]
        row = rows[str(run["params"]["global_batch"])]
        assert row[1:3] == ["tiny fp32", "2 GPUs"]
        assert row[5] == f"{e.median * 100:.1f}% [{e.low * 100:.1f}, {e.high * 100:.1f}]"
        assert row[6].startswith(f"{expected_verdict}")
        assert row[6].endswith(f": {want['lost'] * 100:.1f}% lost [{(1 - e.high) * 100:.1f}, {(1 - e.low) * 100:.1f}]")
        assert verdict(want["lost"]) == expected_verdict
        width = (e.high - e.low) * 100
        assert row[7].startswith(f"{width:.1f} points wide, {'within' if width <= 5 else 'wider than'} the 5-point target")
        assert row[8] == f"{want['exposed'] * 1e3:.3g} of {want['step'] * 1e3:.3g} ms"
    # The machine's line leads with NCCL's own choice (preset default) at the largest global batch.
    machine = "rig-4090 · 2x RTX 4090, PCIe 4.0 x4" if name.startswith("rig-4090") else "rig-3090 · 2x RTX 3090, NVLink NV4"
    (line,) = [line for line in answer.splitlines() if line.startswith(f"- {machine} — ")]
    largest = max(runs, key=lambda r: r["params"]["global_batch"])
    want = _expected(doc, largest)
    if name == "rig-4090-p2p_off":
        assert f"Over {transport}: severe, {want['lost'] * 100:.1f}% lost" in line
    else:
        assert line.startswith(f"- {machine} — tiny fp32, 2 GPUs over {transport}: {expected_verdict}")
        assert f"{want['lost'] * 100:.1f}% lost [" in line
        assert f"{want['exposed'] * 1e3:.3g} of {want['step'] * 1e3:.3g} ms per step is exposed communication" in line
        assert f"(global batch {largest['params']['global_batch']};" in line


def test_the_real_cpu_run_is_answered_in_processes_with_its_own_derived_figures(fleet, fleet_report):
    doc = json.loads(fleet["cpu"].read_text())
    answer = _section((fleet_report / "report.md").read_text(), TITLE)
    rows = {row[4]: row for row in _rows(answer) if row[0] == "local · CPU only"}
    for run in (r for r in _ddp(doc) if r["world_size"] == 2):
        row = rows[str(run["params"]["global_batch"])]
        assert row[2:4] == ["2 processes", "default (gloo)"]
        derived = run["derived"]
        assert row[5].startswith(f"{derived['scaling_efficiency_fraction'] * 100:.1f}% [")
        assert row[8].startswith(f"{derived['exposed_comm_s'] * 1e3:.3g} of ")
    assert re.search(r"^- local · CPU only — tiny fp32, 2 processes over default \(gloo\): ", answer, re.M)


def test_the_answer_names_the_one_rank_run_it_scaled_against(real_bundle, fleet_report):
    """Two processes at global batch 8 accumulate 2 micro-batches of 2 each: the 1-process run of global batch 4
    does the same work, not the one of global batch 8 (4 micro-batches); the 1-process launch also trains
    global batch 2, the work of each of two processes at global batch 4, which the plan does not sweep."""
    one_rank = {r["params"]["global_batch"]: r for r in _ddp(real_bundle) if r["world_size"] == 1}
    assert sorted(one_rank) == [2, 4, 8] and one_rank[2]["params"]["baseline_for"] == 2
    assert all("baseline_for" not in one_rank[batch]["params"] for batch in (4, 8))
    two = {r["params"]["global_batch"]: r for r in _ddp(real_bundle) if r["world_size"] == 2}
    for batch, run in two.items():
        base = one_rank[batch // 2]
        assert run["derived"]["scaling_efficiency_fraction"] == pytest.approx(
            statistics.median(base["metrics"]["per_sample_gpu_time_s"]["samples"])
            / statistics.median(run["metrics"]["per_sample_gpu_time_s"]["samples"]))
        accumulated = "1 micro-batch" if batch == 4 else "2 micro-batches"  # of 2 samples
        assert any(note.startswith(f"baseline: 1 process at global batch {batch // 2}, accumulating {accumulated}, the same "
                                   "work per rank") for note in run["notes"]), run["notes"]
    answer = _section((fleet_report / "report.md").read_text(), TITLE)
    (line,) = [line for line in answer.splitlines() if line.startswith("- local · CPU only — tiny fp32, 2 processes")]
    assert "Baseline: 1 process at global batch 4, accumulating 2 micro-batches, the same work per rank" in line


def test_one_gpu_only_says_there_is_no_link_to_judge(real_bundle, tmp_path):
    doc = make_variant(real_bundle, "one-gpu", hardware="h200-nvlink")
    host = doc["hosts"][0]
    host["runs"] = [r for r in host["runs"] if r["world_size"] == 1]
    answer = _answer_of(doc, tmp_path)
    assert "one-gpu · 2x H200, NVLink NV18 — tiny fp32: only 1 GPU ran, so no link to judge (step " in answer
    assert "| no link (1 rank) |" in answer


def test_without_training_runs_the_answer_says_so(real_bundle, tmp_path):
    doc = json.loads(json.dumps(real_bundle))
    doc["hosts"][0]["runs"] = [r for r in doc["hosts"][0]["runs"] if r["suite"] == "collectives"]
    answer = _answer_of(doc, tmp_path)
    assert "No training run in these bundles (suites ddp, fsdp)" in answer


def test_failed_bundles_stand_apart_from_the_results(fleet, real_bundle, tmp_path):
    """make test used to leave bundles of refused plans in results/; reported beside good ones, each is
    a line under What failed and a row of the hosts table that says it failed, and nothing in the answer."""
    failed = json.loads(json.dumps(real_bundle))
    failed["run_id"] = failed["run_id"][:-6] + "fa11ed"
    host = failed["hosts"][0]
    host.update(name="refused", status="failed", runs=[], launches=[],
                error="collectives: begin_bytes 8192 is larger than end_bytes 4096; lower begin_bytes")
    bad = write(tmp_path / "failed.json", seal({k: v for k, v in failed.items() if k != "sha256"}))
    assert ddpbench("report", str(fleet["rig-3090"]), str(bad), "--out", str(tmp_path / "out")).returncode == 0
    md = (tmp_path / "out" / "report.md").read_text()
    assert "1 host(s) measured nothing: see What failed, at the end." in md.split("\n## Hosts\n", 1)[1].split("\n## ", 1)[0]
    (row,) = [line for line in _section(md, "Hosts").splitlines() if line.startswith("| refused")]
    assert f"| {failed['run_id']} | failed: collectives: begin_bytes 8192 is larger than end_bytes 4096" in row
    assert (f"- refused (bundle {failed['run_id']}): failed: collectives: begin_bytes 8192 is larger than end_bytes 4096; "
            "lower begin_bytes") in _section(md, "What failed")
    assert "refused" not in _section(md, TITLE)


def test_a_host_that_failed_is_what_the_answer_says_and_a_row_of_the_hosts_table(real_bundle, tmp_path):
    """The Docker host down: the plan trains, and the answer says the host failed, not that the plan trains nothing."""
    doc = json.loads(json.dumps(real_bundle))
    assert "ddp" in {entry["suite"] for entry in doc["plan"]["suites"]}
    doc["hosts"][0].update(name="gpu-box", runtime="docker", status="failed", fingerprint=None, runs=[], launches=[],
                           error="docker: Cannot connect to the Docker daemon at unix:///var/run/docker.sock; start it")
    path = write(tmp_path / "down.json", seal({k: v for k, v in doc.items() if k != "sha256"}))
    assert ddpbench("report", str(path), "--out", str(tmp_path / "out")).returncode == 0
    md = (tmp_path / "out" / "report.md").read_text()
    answer = _section(md, TITLE)
    assert "No training run measured: the plan trains (ddp), but 1 host failed (gpu-box)" in answer
    assert "Run a plan that trains" not in answer
    (row,) = [line for line in _section(md, "Hosts").splitlines() if line.startswith("| gpu-box")]
    assert "| failed: docker: Cannot connect to the Docker daemon" in row
    assert "- gpu-box (bundle " in _section(md, "What failed")


def test_a_healthy_member_of_a_multi_node_group_is_not_a_failure(real_bundle, tmp_path):
    """A group's runs are all on its first member's entry: the second measured nothing of its own and failed nothing."""
    doc = json.loads(json.dumps(real_bundle))
    first = doc["hosts"][0]
    second = {**json.loads(json.dumps(first)), "name": "node2", "runs": [], "node_rank": 1, "group": "pair"}
    # One all-reduce run is all the group's job need have measured (and all this report need draw).
    first.update(name="node1", node_rank=0, group="pair", runs=[next(r for r in first["runs"] if r["params"].get("op") == "all_reduce")])
    doc["hosts"].append(second)
    path = write(tmp_path / "pair.json", seal({k: v for k, v in doc.items() if k != "sha256"}))
    assert ddpbench("report", str(path), "--out", str(tmp_path / "out")).returncode == 0
    md = (tmp_path / "out" / "report.md").read_text()
    assert "## What failed" not in md and "measured nothing" not in md
    assert [line.split(" | ")[2] for line in _section(md, "Hosts").splitlines() if line.startswith("| node")] == ["ok", "ok"]


def test_a_multi_gpu_run_without_a_baseline_says_what_is_missing(real_bundle, tmp_path):
    doc = make_variant(real_bundle, "no-baseline", hardware="4090-pcie-x4")
    host = doc["hosts"][0]
    host["runs"] = [r for r in host["runs"] if r["world_size"] == 2]
    answer = _answer_of(doc, tmp_path)
    assert ("no-baseline · 2x RTX 4090, PCIe 4.0 x4 — tiny fp32, 2 GPUs over default via P2P: no scaling to judge (step "
            in answer)
    assert "these bundles hold no 1-rank run of the same shape to set it against; run world size 1 beside it." in answer
    assert "| no baseline |" in answer


def test_a_busy_bundle_is_kept_apart_from_a_quiet_one_of_the_same_machine(real_bundle, tmp_path):
    busy = json.loads(json.dumps(real_bundle))
    busy["run_id"] = busy["run_id"][:-6] + "b0b0b0"
    for launch in busy["hosts"][0]["launches"]:
        launch["cpu_taken_by_others_fraction"] = 0.6
    paths = [write(tmp_path / "quiet.json", real_bundle),
             write(tmp_path / "busy.json", seal({k: v for k, v in busy.items() if k != "sha256"}))]
    assert ddpbench("report", *map(str, paths), "--out", str(tmp_path / "out")).returncode == 0
    md = (tmp_path / "out" / "report.md").read_text()
    answer = _section(md, TITLE)
    assert re.search(r"^- local · CPU only — tiny fp32, 2 processes over default \(gloo\): (negligible|noticeable|severe)", answer, re.M)
    assert re.search(r"^- local · CPU only \(busy\) — tiny fp32, 2 processes over default \(gloo\): measured on a busy machine "
                     r"\(others took 60% of the CPU\), (negligible|noticeable|severe).* Rerun on a quiet machine for this "
                     r"machine's own figures\.$", answer, re.M)
    assert "every table and figure keeps them apart from the quiet runs of the same machine" in answer
    # Each bundle's all-reduce samples stand in a row of their own: none pools the two.
    rows = [line for line in md.splitlines() if "| all_reduce | float32 | in | 2 | 4 KiB |" in line]
    assert sorted(row.split(" | ")[0] for row in rows) == ["| local", "| local (busy)"]
    assert all(row.endswith(" | 1 |") for row in rows)


def test_a_gpu_others_were_on_marks_the_answer(real_bundle, tmp_path):
    doc = make_variant(real_bundle, "shared-gpu", hardware="h200-nvlink")
    held = [{"pid": 4242, "used_memory_bytes": 3 * 2**30}]
    doc["hosts"][0]["fingerprint"]["health"] = {"source": "nvml", "gpus": [
        {"index": i, "memory_used_bytes": None, "processes": held if i == 0 else [], "ecc_uncorrected_volatile": None,
         "ecc_corrected_volatile": None, "retired_pages_pending": None, "row_remap_pending": None, "row_remap_failed": None,
         "power_limit_w": None, "power_limit_default_w": None, "sm_clock_idle_mhz": None, "clock_reasons_idle": None}
        for i in range(2)]}
    answer = _answer_of(doc, tmp_path)
    assert re.search(r"^- shared-gpu · 2x H200, NVLink NV18 \(busy\) — tiny fp32, 2 GPUs over default via P2P: measured on a "
                     r"busy machine \(other processes were on GPU0 \(1 process, 3\.0 GiB\)\), ", answer, re.M)
