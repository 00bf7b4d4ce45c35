"""`ddpbench report` as a user runs it: globs in; report.md, a self-contained report.html and every
plot as PNG and SVG out; bad bundles named and skipped (or, --strict, stopping the report)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from bench.bundle.assembly import derive
from bench.bundle import seal
from bench.common.stats import metric
from bench.common.units import human_bytes
from tests.conftest import REPO
from tests.support import FIXTURES
from tests.support.cli_in_process import ddpbench
from tests.support.report_variants import make_variant, write


@pytest.fixture(scope="module")
def report(fleet, tmp_path_factory) -> Path:
    """The fleet's report, made the way `make report BUNDLES='...'` makes it: quoted globs."""
    out = tmp_path_factory.mktemp("report")
    root = fleet["cpu"].parent.parent
    done = ddpbench("report", str(root / "rig-*" / "bundle.json"), str(root / "cpu" / "*.json"), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert f"report: {out / 'report.md'}" in done.stdout
    return out


def table(markdown: str, first_header: str) -> list[list[str]]:
    """The rows of the Markdown table whose header row starts with first_header."""
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} |"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return rows


def test_every_plot_is_written_as_png_and_svg_and_embedded(report):
    md = (report / "report.md").read_text()
    embedded = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", md)
    assert {"busbw.png", "per-sample-tiny-fp32-s32-mb2.png", "scaling-efficiency.png", "predicted-step-time.png"} <= set(embedded)
    assert sum(name.startswith("p2p-") for name in embedded) == 4  # CPU, 3090 NVLink, 4090 PCIe default and p2p_off
    for name in embedded:
        assert (report / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert b"<svg" in (report / name).with_suffix(".svg").read_bytes()[:2000]
        assert f"[SVG]({Path(name).stem}.svg)" in md
    assert "Error bars: p5-p95 of the samples" in md
    assert "95% interval from a random-effects model on the log scale" in md


def test_html_is_self_contained(report):
    html = (report / "report.html").read_text()
    sources = re.findall(r'(?:src|href)="([^"]*)"', html)
    assert len([s for s in sources if s.startswith("data:image/svg+xml;base64,")]) == 9  # the answer's figure, and 8 beside it
    assert all(s.startswith("data:") for s in sources), "the HTML must not fetch anything"
    assert "http://" not in html and "https://" not in html
    assert "<table>" in html and "2x RTX 3090, NVLink NV4" in html


def test_hosts_table_summarizes_each_fingerprint(report):
    rows = {row[0]: row for row in table((report / "report.md").read_text(), "host (labels)")}
    host, bundle, status, gpu, count, link, pcie, driver, torch, nccl, image, version = rows["rig-3090 (rig-3090 (edited copy of a CPU run))"]
    assert (gpu, count, link) == ("NVIDIA GeForce RTX 3090", "2", "NVLink NV4 (56.25 GB/s peak)")
    assert (pcie, driver, nccl, image) == ("4.0 x16 (max 4.0 x16)", "550.54.15", "2.21.5", "sha256:ab12ab12ab12")
    assert rows["local (this machine)"][3:6] == ["none", "0", "CPU only"]


def test_tables_give_median_spread_and_n_and_flag_the_transport_mismatch(report, fleet):
    md = (report / "report.md").read_text()
    collectives = table(md, "host")
    real = json.loads(fleet["cpu"].read_text())["hosts"][0]["runs"][0]
    s = real["metrics"]["busbw_gbps"]["summary"]
    row = next(r for r in collectives if r[0] == "local" and r[7] == "4 KiB")
    assert row[8] == f"{s['median']:.3g} [{s['p5']:.3g}, {s['p95']:.3g}] n={s['n']}"
    assert any(r[2] == "p2p_off via P2P ⚠ transport mismatch" for r in collectives)
    assert "Transport mismatch in" in md
    ddp_header = next(line for line in md.splitlines() if "step time median [p5, p95]" in line)
    assert "scaling % [95% CI]" in ddp_header
    assert re.search(r"\| rig-3090 \| 2x RTX 3090, NVLink NV4 \| default via P2P \| tiny \| fp32 \| 2 GPUs \| 8 \| \d+ \| "
                     r"[\d.]+ \[[\d.]+, [\d.]+\] (ms|s) n=4 \|", md)
    assert "| 95.2% [" in md  # rig-3090 scales at 1 / 1.05


def test_duplicates_are_counted_once(fleet, tmp_path):
    copy = write(tmp_path / "copy" / "bundle.json", json.loads(fleet["cpu"].read_text()))
    done = ddpbench("report", str(fleet["cpu"]), str(copy), "--out", str(tmp_path / "out"))
    assert done.returncode == 0
    err = done.stderr
    assert f"note: {copy} is the same bundle as {fleet['cpu']}" in err
    assert "1 bundle (" in (tmp_path / "out" / "report.md").read_text()


def test_a_bad_bundle_is_named_and_skipped(fleet, tmp_path):
    doc = json.loads(fleet["cpu"].read_text())
    doc["hosts"][0]["name"] = "tampered"  # the sha256 no longer matches
    bad = write(tmp_path / "bad.json", doc)
    truncated = tmp_path / "truncated.json"
    truncated.write_text(fleet["cpu"].read_text()[:500])
    done = ddpbench("report", str(fleet["cpu"]), str(bad), str(truncated), "--out", str(tmp_path / "out"))
    assert done.returncode == 0
    tampered, cut = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert tampered.startswith(f"warning: skipped: {bad}: field sha256: recorded {doc['sha256'][:16]}... but the content")
    assert tampered.endswith("the bundle was changed after it was written: get the original")
    assert cut == f"warning: skipped: {truncated}: truncated (the JSON ends early); fetch the bundle again or rerun `ddpbench run`"
    md = (tmp_path / "out" / "report.md").read_text()
    assert "> **Skipped 2 file(s) that are not valid bundles:**" in md
    assert f"> {bad}: field sha256" in md


def test_strict_stops_at_a_bad_bundle(fleet, tmp_path):
    doc = json.loads(fleet["cpu"].read_text())
    doc["schema_version"] = 7
    bad = write(tmp_path / "future.json", doc)
    done = ddpbench("report", str(fleet["cpu"]), str(bad), "--out", str(tmp_path / "out"), "--strict")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"error: {bad}: field schema_version: 7 is major version 7, which this ddpbench does not read (1.x); use the "
        "ddpbench release that wrote it (--strict: the report stops at the first bad bundle)"]
    assert not (tmp_path / "out").exists()


def test_a_sealed_bundle_that_breaks_the_schema_is_named_by_field(fleet, tmp_path):
    from bench.bundle import seal

    doc = json.loads(fleet["cpu"].read_text())
    doc["hosts"][0]["runs"][0]["metrics"]["busbw_gbps"]["summary"]["n"] = 0
    bad = write(tmp_path / "bad.json", seal(doc))
    done = ddpbench("report", str(bad), "--out", str(tmp_path / "out"))
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"error: {bad}: field hosts[0].runs[0].metrics.busbw_gbps.summary.n: 0 is less than the minimum of 1; "
        "the bundle does not follow schema/bundle.schema.json: get the original"]
    assert not (tmp_path / "out").exists()


def test_no_valid_bundle_among_several_is_one_error_line(fleet, tmp_path):
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text("<html>404</html>")
    second.write_text("[]")
    done = ddpbench("report", str(tmp_path / "*.json"), "--out", str(tmp_path / "out"))
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"error: none of the 2 files is a valid bundle; the first: {first}: not valid JSON (Expecting value: line 1 "
        "column 1 (char 0)); fetch the bundle again or rerun `ddpbench run`"]


def test_an_empty_glob_is_an_error(tmp_path):
    done = ddpbench("report", str(tmp_path / "nothing" / "*.json"), "--out", str(tmp_path / "out"))
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"error: {tmp_path / 'nothing' / '*.json'}: the pattern matches no file; check the path "
        "(`make bench` writes results/*/bundle.json)"]


def test_bundles_with_nothing_in_common_still_make_a_report(real_bundle, tmp_path):
    collectives_only = {**real_bundle, "hosts": [{**real_bundle["hosts"][0],
                                                  "runs": [r for r in real_bundle["hosts"][0]["runs"] if r["suite"] == "collectives"]}]}
    # Without its collectives a bundle has nothing to predict a step time from.
    unpredicted = [{**r, "derived": {**r.get("derived", {}), "predicted_step_time_s": None}}
                   for r in real_bundle["hosts"][0]["runs"] if r["suite"] == "ddp"]
    ddp_only = make_variant({**real_bundle, "hosts": [{**real_bundle["hosts"][0], "runs": unpredicted}]}, "other-host")
    from bench.bundle import seal

    a = write(tmp_path / "a.json", seal(collectives_only))
    b = write(tmp_path / "b.json", ddp_only)
    assert ddpbench("report", str(a), str(b), "--out", str(tmp_path / "out")).returncode == 0
    md = (tmp_path / "out" / "report.md").read_text()
    assert "These bundles have nothing in common" in md
    assert "## Collectives" in md and "## DDP training" in md
    assert "nothing to set the measured step times against" in md


def test_many_hosts_are_grouped_by_gpus_and_link(real_bundle, tmp_path):
    for i in range(13):
        write(tmp_path / f"b{i}.json", make_variant(real_bundle, f"node-{i:02d}", hardware="4090-pcie-x4", bandwidth=5))
    assert ddpbench("report", str(tmp_path / "b*.json"), "--out", str(tmp_path / "out")).returncode == 0
    md = (tmp_path / "out" / "report.md").read_text()
    assert "Plots and tables group the hosts by GPUs and link" in md
    rows = [line for line in md.splitlines() if line.startswith("| 13 hosts | 2x RTX 4090, PCIe 4.0 x4 | default via P2P | all_reduce")]
    assert len(rows) == 5  # one row per message size, 13 bundles pooled
    assert all("n=65" in row and row.endswith("| 13 |") for row in rows)  # 13 bundles x 5 samples


def test_make_report_passes_each_glob_quoted_to_the_cli():
    done = subprocess.run(["make", "-n", "report", "BUNDLES=results/*/bundle.json downloaded/*.json", "OUT=somewhere/"],
                          cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "-m bench report 'results/*/bundle.json' 'downloaded/*.json' --out somewhere/" in done.stdout
    empty = subprocess.run(["make", "-n", "report"], cwd=REPO, capture_output=True, text=True)
    assert empty.returncode != 0 and "BUNDLES is empty" in empty.stderr


def test_failed_hosts_runs_and_launches_are_listed_beside_what_did_finish(real_bundle, tmp_path):
    from bench.bundle import seal

    doc = json.loads(json.dumps(real_bundle))
    local = doc["hosts"][0]
    dead = {**json.loads(json.dumps(local)), "name": "dead-box", "status": "failed", "fingerprint": None,
            "error": "ssh: connection refused; check the address", "launches": [], "runs": []}
    doc["hosts"].append(dead)
    oom = next(r for r in local["runs"] if r["suite"] == "ddp" and r["world_size"] == 2 and r["params"]["global_batch"] == 8)
    oom.update(status="oom", error="out of memory at micro-batch 2", metrics={}, derived={})
    local["launches"][0].update(status="timeout", error="ran past 300 s")
    assert ddpbench("report", str(write(tmp_path / "a.json", seal(doc))), "--out", str(tmp_path / "out")).returncode == 0
    md = (tmp_path / "out" / "report.md").read_text()
    # A host that failed is a row of the hosts table that says so, and heads what failed, in one line.
    assert f"| dead-box (this machine) | {doc['run_id']} | failed: ssh: connection refused; check the address |" in md
    failed_section = md[md.index("## What failed"):]
    assert f"- dead-box (bundle {doc['run_id']}): failed: ssh: connection refused; check the address" in failed_section
    failed = table(md, "host | bundle | suite")
    assert [row[2:] for row in failed] == [
        ["ddp", "tiny fp32, batch 8, 2 processes", "default (gloo)", "oom", "out of memory at micro-batch 2"],
        ["collectives", "launch 00-collectives-default-ws2", "default", "timeout", "ran past 300 s"],
    ]
    assert "| tiny | fp32 | 2 processes | 4 |" in md  # the batch-4 run that finished is still reported


def _steady_ddp(bundle: dict) -> dict:
    """The bundle with every DDP sample within 0.5% of its run's median: a figure built from it
    is the one the test makes, not the CI machine's noise (4 steps a run; on a busy machine one
    slow step can widen an interval across 100%)."""
    doc = json.loads(json.dumps(bundle))
    for run in doc["hosts"][0]["runs"]:
        if run["suite"] == "ddp" and run["status"] == "ok":
            for name, found in run["metrics"].items():
                n, median = len(found["samples"]), found["summary"]["median"]
                run["metrics"][name] = metric([median * (1 + 0.001 * (i - n // 2)) for i in range(n)])
    return doc


def test_implausible_figures_are_flagged_beside_them_with_their_likely_cause(real_bundle, tmp_path):
    # Two ranks at twice the speed of one each, and a busbw 1000 times a CPU's over a 56 GB/s NVLink.
    doc = make_variant(_steady_ddp(real_bundle), "too-good", hardware="3090-nvlink", bandwidth=1000, exposed=-0.5)
    host = doc["hosts"][0]
    for launch in host["launches"]:
        launch["cpu_taken_by_others_fraction"] = 0.0 if launch["world_size"] > 1 else 0.45
    derive(host)
    path = write(tmp_path / "too-good.json", seal(doc))
    assert ddpbench("report", str(path), "--out", str(tmp_path / "out")).returncode == 0
    md = (tmp_path / "out" / "report.md").read_text()
    # Its 1-rank runs were measured on a busy machine: the 2-rank runs scaled against them are marked (busy) too.
    rows = [[cell.strip() for cell in line.strip("|").split(" | ")] for line in md.splitlines()
            if line.startswith(("| too-good |", "| too-good (busy) |"))]
    ddp_rows = [row for row in rows if row[3] == "tiny" and row[5] == "2 GPUs"]
    assert ddp_rows and all(row[11].startswith("200.0% [") and row[11].endswith(" ⚠ negative_exposed_comm, scaling_above_perfect")
                            for row in ddp_rows)
    assert any(row[3] == "all_reduce" and row[8].endswith(" ⚠ busbw_above_link_peak") for row in rows)
    flagged = {row[4]: row for row in rows if len(row) == 7}  # the warnings tables: host, bundle, what, transport, warning, figure, cause
    assert set(flagged) >= {"scaling_above_perfect", "negative_exposed_comm", "busbw_above_link_peak"}
    assert "did not get the resources per rank" in flagged["scaling_above_perfect"][6]
    assert flagged["scaling_above_perfect"][6].endswith("(other processes took 45% of the machine's CPU during the 1-rank run)")
    assert "above the link's theoretical peak of 56.25 GB/s" in flagged["busbw_above_link_peak"][5]
    assert "flagged figure(s), marked ⚠ in the table above: implausible ones" in md


def _gpu_window(index: int, per_step: "tuple | None", clock_mhz: float = 1980, reasons: "dict | None" = None,
                held_back: "dict | None" = None) -> dict:
    """One GPU's counters over a run's timed steps (bench/agent/counters.summarize_window's fields):
    `per_step` (NVLink bytes, PCIe bytes) per step each way, or None for a window of fewer than two
    samples; `reasons` NVML's over all samples; `held_back` the per-sample judgement of newer bundles
    ({"fraction", "clock_mhz", "reasons"}), absent from older ones."""
    measured = per_step is not None
    nvlink, pcie = per_step or (None, None)
    gpu = {"index": index, "samples_count": 20 if measured else 0, "duration_s": 2.0 if measured else 0.0,
           "sm_clock_mhz_median": clock_mhz if measured else None, "mem_clock_mhz_median": 3201 if measured else None,
           "power_w_median": 600.0 if measured else None, "power_w_max": 690.0 if measured else None,
           "power_limit_w": 700.0, "temperature_c_max": 61 if measured else None,
           "throttled_fraction": max((reasons or {}).values(), default=0.0) if measured else None,
           "throttle_reasons_fraction": (reasons or {}) if measured else None,
           **{f"{link}_{way}_bytes{tail}": None if not measured else (round(value * 20) if not tail else value)
              for link, value in (("pcie", pcie), ("nvlink", nvlink)) for way in ("tx", "rx") for tail in ("", "_per_step")}}
    if held_back is not None:
        gpu.update(sm_clock_max_mhz=1980, held_back_fraction=held_back["fraction"],
                   held_back_sm_clock_mhz_median=held_back["clock_mhz"], held_back_reasons_fraction=held_back["reasons"])
    return gpu


def test_ddp_runs_show_each_links_traffic_beside_the_gradient_data_and_where_clocks_were_held_back(real_bundle, tmp_path):
    doc = json.loads(json.dumps(real_bundle))
    host = doc["hosts"][0]
    h200 = json.loads((FIXTURES / "h200x1" / "fingerprint.json").read_text())["gpus"][0]  # max SM clock 1980 MHz
    host["fingerprint"].update(gpus=[{**h200, "index": i} for i in (0, 1)], gpu_count=2)
    first, last = [r for r in host["runs"] if r["suite"] == "ddp" and r["world_size"] == 2]  # batches 4 and 8
    shm = {"preset": "p2p_off", "backend": "nccl", "env": {}, "nccl_used": ["SHM"], "nccl_via": [], "matches_preset": True}
    grad = first["metrics"]["grad_allreduce_bytes"]["summary"]["median"]
    traffic = (0, 2 * grad)  # per step: no NVLink, twice the gradient bytes over PCIe
    first["gpu_counters"] = {"interval_s": 0.1, "gpus": [
        # A newer bundle judged each sample: held back in 30% of them although the median is the maximum;
        _gpu_window(0, traffic, reasons={"sw_power_cap": 1.0}, held_back={"fraction": 0.3, "clock_mhz": 1500, "reasons": {"sw_power_cap": 0.3}}),
        # an older one: the median clock 490 MHz below the maximum, at 689 W (an H200's large matmuls).
        _gpu_window(1, traffic, clock_mhz=1490, reasons={"sw_power_cap": 0.8})]}
    last["gpu_counters"] = {"interval_s": 0.1, "gpus": [
        _gpu_window(0, traffic, reasons={"sw_power_cap": 1.0}),  # sw_power_cap at the maximum clock (an H200's gpt2 run)
        _gpu_window(1, None)]}  # fewer than two samples
    for run in (first, last):
        run["transport"] = shm
    assert ddpbench("report", str(write(tmp_path / "a.json", seal(doc))), "--out", str(tmp_path / "out")).returncode == 0
    md = (tmp_path / "out" / "report.md").read_text()
    assert "| host | run | transport | GPU | PCIe traffic per step tx / rx (kernel launches included) |" in md
    labels = [f"tiny fp32, batch {run['params']['global_batch']}, 2 GPUs" for run in (first, last)]
    sent, data = f"{human_bytes(2 * grad)} / {human_bytes(2 * grad)}", f"{human_bytes(grad)}, 50% of PCIe rx"
    below = "1490 of 1980 MHz, 490 MHz (25%) below the maximum"
    assert table(md, "host | run | transport | GPU") == [
        ["local", labels[0], "p2p_off via SHM", "GPU0", sent, "0 B / 0 B", data,
         "30%: 1500 of 1980 MHz, 480 MHz (24%) below the maximum (sw_power_cap 30%)"],
        ["local", labels[0], "p2p_off via SHM", "GPU1", sent, "0 B / 0 B", data, f"80%: {below} (sw_power_cap 80%)"],
        ["local", labels[1], "p2p_off via SHM", "GPU0", sent, "0 B / 0 B", data, "no"],
        ["local", labels[1], "p2p_off via SHM", "GPU1", "- / -", "- / -", f"{human_bytes(grad)}, over PCIe", "-"],
    ]
    assert (f"local {first['launch_id']} ({labels[0]}) GPU1: clocks held back in 80% of the samples, {below} "
            "(NVML's reasons: sw_power_cap 80%)") in md
    assert len([line for line in md.splitlines() if "clocks held back in" in line]) == 2  # never the GPU at its maximum


def test_collectives_runs_show_their_data_over_nvlink_and_the_report_states_the_samplers_cost(real_bundle, tmp_path):
    doc = json.loads(json.dumps(real_bundle))
    host = doc["hosts"][0]
    h200 = json.loads((FIXTURES / "h200x1" / "fingerprint.json").read_text())["gpus"][0]
    host["fingerprint"].update(gpus=[{**h200, "index": i} for i in (0, 1)], gpu_count=2)
    host["fingerprint"]["topology"]["matrix"] = {"GPU0": {"GPU1": "NV18"}, "GPU1": {"GPU0": "NV18"}}
    p2p = {"preset": "default", "backend": "nccl", "env": {}, "nccl_used": ["P2P"], "nccl_via": [], "matches_preset": True}
    run = next(r for r in host["runs"] if r["suite"] == "collectives" and r["params"]["op"] == "all_reduce")
    run["transport"] = p2p
    run["gpu_counters"] = {"interval_s": 0.1, "gpus": [_gpu_window(i, (run["params"]["size_bytes"], 4096)) for i in (0, 1)]}
    launch = next(l for l in host["launches"] if l["id"] == run["launch_id"])
    launch["gpu_counters"] = {"interval_s": 0.1, "sampler_cpu_s": 0.25, "sampler_duration_s": 10.0, "sweeps_count": 66,
                              "gpus": [_gpu_window(i, (0, 0)) for i in (0, 1)]}
    assert ddpbench("report", str(write(tmp_path / "a.json", seal(doc))), "--out", str(tmp_path / "out")).returncode == 0
    md = (tmp_path / "out" / "report.md").read_text()
    rows = table(md, "host | run | transport | GPU")
    size = run["params"]["size_bytes"]  # all_reduce on 2 ranks: each rank sends and receives its size once (bus factor 1)
    assert [row[3:] for row in rows] == [[f"GPU{i}", "4 KiB / 4 KiB", f"{human_bytes(size)} / {human_bytes(size)}",
                                          f"{human_bytes(size)}, over NVLink", "no"] for i in (0, 1)]
    assert "The sampler itself used 25 ms of CPU a second." in md


def test_report_writes_into_report_by_default(real_bundle, tmp_path):
    path = write(tmp_path / "bundle.json", real_bundle)
    done = ddpbench("report", path, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "report" / "report.md").is_file() and (tmp_path / "report" / "report.html").is_file()


def test_a_pair_much_slower_one_way_is_flagged_with_its_samples(real_bundle, tmp_path):
    doc = json.loads(json.dumps(real_bundle))
    for run in doc["hosts"][0]["runs"]:
        if run["suite"] == "collectives" and run["params"]["op"] == "sendrecv":
            gbps = [1.0, 1.1, 0.9] if run["params"]["src_rank"] == 1 else [0.4, 0.44, 0.36]
            run["metrics"]["busbw_gbps"] = metric(gbps)
    path = write(tmp_path / "asymmetric.json", seal({k: v for k, v in doc.items() if k != "sha256"}))
    assert ddpbench("report", str(path), "--out", str(tmp_path / "out")).returncode == 0
    md = (tmp_path / "out" / "report.md").read_text()
    assert ("local · CPU only · default (gloo), float32 256 KiB: 0 → 1 at 0.4 GB/s is 2.5x slower than 1 → 0 at 1 GB/s "
            "(n=3 and n=3 samples); their p5-p95 do not overlap.") in md
