"""Link truth on fixtures: the GPUs' health and the link under load in the fingerprint, the
concerns printed from them, the NVML counter sampler, and the report and verify on a real 1x H200
capture and a consumer box without P2P (tests/fixtures/README.md says which is which)."""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
import time
from types import SimpleNamespace

import pytest

from bench.agent import counters, switches
from bench.agent.fingerprint import health, link_load, nvidia_smi, nvml
from bench.bundle import write_bundle
from bench.common.links import link_summary, pairs_without_p2p
from bench.judging.health import health_warnings
from bench.controller.plans import check
from bench.report import write_report
from bench.verify.machines import differences
from bench import schemas
from tests.conftest import FIXTURES as H200X2, REPO
from tests.support import host_tree
from tests.support import FIXTURES
from tests.support.nvml_capture import SteppingClock, fake_pynvml, load, sample_until

import yaml

H200 = FIXTURES / "h200x1"
RTX = FIXTURES / "rtx4090x2"


def h200_fingerprint() -> dict:
    return json.loads((H200 / "fingerprint.json").read_text())


def rtx_fingerprint() -> dict:
    """The consumer box's fingerprint as the agent would assemble it from these NVML and nvidia-smi answers."""
    errors: list[str] = []
    read = nvml.read(errors, fake_pynvml(load("rtx4090x2")))
    fp = h200_fingerprint()
    fp.update(gpus=read["gpus"], gpu_count=2, driver_version=read["driver_version"], cuda_driver_version=read["cuda_driver_version"],
              health=read["health"], link_load=json.loads((RTX / "link_load.json").read_text()))
    fp["topology"].update(nvidia_smi.parse_topo_matrix((RTX / "topo-m.txt").read_text()))
    fp["topology"]["p2p_read"] = nvidia_smi.parse_p2p_matrix((RTX / "topo-p2p.txt").read_text())
    fp.update(host_tree.readings("rtx4090x2", fp["gpus"]))
    return fp


def test_fingerprints_validate():
    for fp in (h200_fingerprint(), rtx_fingerprint()):
        assert schemas.first_problem(fp, "fingerprint") is None


def test_h200_health_read_from_its_nvml_capture_is_what_the_agent_recorded_and_raises_nothing():
    assert health.read(fake_pynvml(load("h200x1"))) == h200_fingerprint()["health"]
    assert health_warnings(h200_fingerprint()) == []


def test_h200_capture_parses_and_its_link_held_gen5_x16_under_load():
    (gpu,) = nvidia_smi.parse_query_xml((H200 / "nvidia-smi-q.xml").read_text())["gpus"]
    assert gpu["pcie"] == {"gen_current": 5, "gen_max": 5, "width_current": 16, "width_max": 16}
    assert h200_fingerprint()["link_load"] == {"pcie_loaded": {"0": {"gen_loaded": 5, "width_loaded": 16}}, "p2p_access": {"GPU0": {}}}
    assert link_summary(h200_fingerprint())["link_peak_gbps"] == pytest.approx(63.0, abs=0.01)


# The consumer box's planted problems (tests/fixtures/README.md): the start of each one's
# line, and its fix.
PLANTED = {
    "/dev/shm is 64 MiB": "start the container with `--shm-size=1g` (or `--ipc=host`)",
    "GPUs split over NUMA nodes (GPU0 on node 0, GPU1 on node 1)": "`torchrun --numa-binding=node`",
    "persistence mode off on GPU0, GPU1": "`sudo nvidia-smi -pm 1`",
    "IOMMU in translated mode (GPU0 DMA-FQ, GPU1 DMA-FQ)": "boot with `iommu=pt`",
}


def test_consumer_box_concerns_one_line_each_with_its_fix():
    lines = health_warnings(rtx_fingerprint())
    assert lines[:3] == [
        "GPU0: 1 other process(es) on the GPU before the first launch, holding 1.1 GiB (pid 1873)",
        "GPU1: power limit 350 W, below its default 450 W",
        "GPU1: PCIe link under load is 4.0 x8, its slot allows 4.0 x16",
    ]
    for problem, fix in PLANTED.items():
        (line,) = [line for line in lines if line.startswith(problem)]
        assert fix in line.split("; fix: ", 1)[1], line
    assert len(lines) == 3 + len(PLANTED)


def with_p2p(fp: dict) -> dict:
    """The box as a P2P-enabled driver (tinygrad's patched open module, say) shows it: CUDA may access each peer."""
    return {**fp, "link_load": {**fp["link_load"], "p2p_access": {"GPU0": {"GPU1": True}, "GPU1": {"GPU0": True}}}}


def test_acs_on_the_path_between_gpus_is_named_where_p2p_may_cross_it():
    fp = rtx_fingerprint()
    # Read from the root ports' configuration spaces: what Linux sets on them when an IOMMU is on.
    assert fp["pcie_path"]["gpus"] == {"GPU0": ["0000:00:01.0"], "GPU1": ["0000:80:01.0"]}
    assert fp["pcie_path"]["bridges"]["0000:80:01.0"] == {"acs_ctl": ["SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd"]}
    # The stock driver gives these GeForce cards no P2P: NCCL goes through host memory, which ACS does not touch.
    assert not [line for line in health_warnings(fp) if "ACS" in line]
    (line,) = [line for line in health_warnings(with_p2p(fp)) if "ACS" in line]
    assert line.startswith("ACS redirects peer-to-peer traffic on the PCIe path between the GPUs at "
                           "0000:00:01.0 (ReqRedir+ CmpltRedir+), 0000:80:01.0 (ReqRedir+ CmpltRedir+): ")
    assert "fix: disable ACS" in line and "ECAP_ACS+0x6.w=0000" in line and "NCCL_P2P_DISABLE=1" in line
    # Where the bridges' ACS could not be read (no CAP_SYS_ADMIN), nothing is claimed.
    unread = with_p2p(fp)
    unread["pcie_path"] = {**fp["pcie_path"], "bridges": {b: {"acs_ctl": None} for b in fp["pcie_path"]["bridges"]}}
    assert not [line for line in health_warnings(unread) if "ACS" in line]


def test_a_link_asleep_at_rest_is_a_concern_only_where_it_was_never_read_awake():
    fp = rtx_fingerprint()
    assert [gpu["pcie"]["gen_current"] for gpu in fp["gpus"]] == [1, 1]  # both asleep at rest, both read at 4.0 under load
    assert not [line for line in health_warnings(fp) if "at rest" in line]  # power saving, not a concern
    # The same box fingerprinted where the link probe cannot run (no nvidia-ml-py): one note for both links.
    unread = {**fp, "link_load": {"pcie_loaded": None, "p2p_access": None}}
    (line,) = [line for line in health_warnings(unread) if "at rest" in line]
    assert line.startswith("PCIe link below its slot at rest and never read under load: "
                           "GPU0 1.0 x16 (slot 4.0 x16), GPU1 1.0 x8 (slot 4.0 x16); ")
    assert "fix: wake the link before judging it" in line
    assert not [line for line in health_warnings(unread) if "under load is" in line]  # nothing measured to call narrow


def test_a_rank_allowed_no_cpu_of_its_gpus_node_is_named():
    fp = rtx_fingerprint()
    fp["numa"] = {**fp["numa"], "allowed_cpus": "0-15"}  # e.g. docker run --cpuset-cpus 0-15
    (line,) = [line for line in health_warnings(fp) if line.startswith("GPU1 hangs off NUMA node 1")]
    assert "CPUs 0-15" in line and "fix: give the agent CPUs of node 1" in line
    # A bundle is hostile input: a list of a billion CPUs is no machine's, read as unknown.
    fp["numa"]["allowed_cpus"] = "0-999999999"
    assert not [line for line in health_warnings(fp) if "hangs off" in line]


def test_h200_fixtures_raise_no_false_concern():
    assert health_warnings(h200_fingerprint()) == []
    (from_xml,) = nvidia_smi.parse_query_xml((H200 / "nvidia-smi-q.xml").read_text())["gpus"]
    assert health_warnings({**h200_fingerprint(), "gpus": [from_xml]}) == []
    assert health_warnings(h200x2_fingerprint()) == []


def h200x2_fingerprint() -> dict:
    """The lent 2x H200 (tests/conftest.py's FIXTURES) from its captures: nvidia-smi's XML (persistence
    mode on, BAR1 256 GiB), NVLink status, topology and P2P matrices; NUMA as its lscpu printed it
    (one node, CPUs 0-31); an NVML that could not read the host (no IOMMU, ACS or /dev/shm reading)."""
    fp = h200_fingerprint()
    gpus = nvidia_smi.parse_query_xml((H200X2 / "nvidia-smi-q.xml").read_text())["gpus"]
    for gpu, status in zip(gpus, nvidia_smi.parse_nvlink_status((H200X2 / "nvlink-s.txt").read_text()).values()):
        gpu["nvlink"] = status
    p2p = (H200X2 / "topo-p2p.txt").read_text()
    fp.update(gpus=gpus, gpu_count=2, link_load={"pcie_loaded": None, "p2p_access": None},
              numa={"node_cpus": {"0": "0-31"}, "gpu_nodes": {}, "allowed_cpus": "0-31"},
              kernel_module={"flavor": None, "version": None}, pcie_path=None, iommu=None, dev_shm_total_bytes=None)
    fp["topology"] = {**nvidia_smi.parse_topo_matrix((H200X2 / "topo-m.txt").read_text()),
                      "p2p_read": nvidia_smi.parse_p2p_matrix(p2p),
                      "p2p_write": nvidia_smi.parse_p2p_matrix(p2p[p2p.index("### nvidia-smi topo -p2p w"):])}
    assert schemas.first_problem(fp, "fingerprint") is None
    return fp


def test_geforce_health_fields_nvml_cannot_tell_are_not_measured():
    gpu = rtx_fingerprint()["health"]["gpus"][1]
    assert (gpu["ecc_uncorrected_volatile"], gpu["retired_pages_pending"], gpu["row_remap_pending"]) == (None, None, None)
    assert gpu["clock_reasons_idle"] == ["gpu_idle"]


def test_label_and_peak_come_from_the_link_under_load_not_the_idle_gen1():
    fp = rtx_fingerprint()
    assert (link_summary(fp)["link_label"], link_summary(fp)["link_peak_gbps"]) == ("2x NVIDIA GeForce RTX 4090, PCIe 4.0 x8", pytest.approx(15.752))
    at_rest = {**fp, "link_load": {"pcie_loaded": None, "p2p_access": None}}
    assert link_summary(at_rest)["link_label"] == "2x NVIDIA GeForce RTX 4090, PCIe 1.0 x8"


def test_pairs_without_p2p():
    assert pairs_without_p2p(rtx_fingerprint()) == [("GPU0", "GPU1"), ("GPU1", "GPU0")]
    assert pairs_without_p2p(h200_fingerprint()) == []


def throttling_box():
    capture = load("rtx4090x2")
    capture["gpus"][1]["clock_reasons"] = 0x4  # sw_power_cap: the capped GPU1 under load
    for gpu in capture["gpus"]:
        gpu["pcie_throughput_tx_kbps"] = 1_000_000  # 1 GB/s each way
    return fake_pynvml(capture)


def test_sampler_summarises_each_gpu_ends_with_its_launch_and_states_its_cost(monkeypatch):
    monkeypatch.setattr(counters, "time", SteppingClock())
    with counters.Sampler(nvml=throttling_box(), interval_s=0.001) as sampler:
        sample_until(sampler, 12)
    assert not sampler._thread.is_alive()
    summary = sampler.summary()
    gpu0, gpu1 = summary["gpus"]
    assert gpu0["samples_count"] >= 12 and gpu0["throttled_fraction"] == 0.0
    assert (gpu1["throttled_fraction"], gpu1["throttle_reasons_fraction"]) == (1.0, {"sw_power_cap": 1.0})
    assert (gpu1["power_w_median"], gpu1["power_limit_w"], gpu1["sm_clock_mhz_median"]) == (21.0, 350.0, 210)
    # The capture does not answer the maximum clock: whether the clocks were held back is not measured.
    assert (gpu1["sm_clock_max_mhz"], gpu1["held_back_fraction"]) == (None, None)
    assert gpu0["pcie_tx_bytes"] == pytest.approx(1e9 * gpu0["duration_s"], rel=0.05)
    assert gpu0["nvlink_tx_bytes"] is None  # no NVLink: not measured
    # from the sampler's start to its end, beyond its first and last samples
    assert summary["sweeps_count"] == gpu0["samples_count"] and summary["sampler_duration_s"] > gpu1["duration_s"] > 0
    assert summary["sampler_cpu_s"] > 0
    launch = {"id": "00-ddp-default-ws2", "suite": "ddp", "preset": "default", "world_size": 2, "status": "ok",
              "error": None, "duration_s": 1.0, "gpu_counters": summary}
    assert schemas.first_problem(launch, "bundle", "launch") is None


NOT_READ = dict.fromkeys(counters.BYTE_COUNTERS)  # the NVLink counters at a launch's start and end


def h200_samples(clocks_and_watts: list[tuple[int, float]]) -> list[dict]:
    """An H200 sampled every 0.1 s with sw_power_cap raised in every sample, at these SM clocks and powers."""
    return [{"t": i / 10, "sm_clock_mhz": mhz, "mem_clock_mhz": 3201, "power_w": watts, "temperature_c": 50, "reasons": 0x4,
             "pcie_tx_kbps": None, "pcie_rx_kbps": None, "nvlink_tx_bytes": None, "nvlink_rx_bytes": None}
            for i, (mhz, watts) in enumerate(clocks_and_watts)]


def test_clocks_count_as_held_back_only_below_the_maximum():
    # As NVML answered on an H200: sw_power_cap at 1965-1980 MHz and 122 W under a gpt2 step,
    # and at 1455-1530 MHz and 689 W of 700 under large matmuls.
    at_max = counters.summarize(0, h200_samples([(1980, 122.0), (1965, 122.0)] * 5), NOT_READ, NOT_READ, 700.0, 1980)
    assert (at_max["throttled_fraction"], at_max["held_back_fraction"], at_max["held_back_reasons_fraction"]) == (1.0, 0.0, {})
    assert at_max["held_back_sm_clock_mhz_median"] is None
    capped = counters.summarize(0, h200_samples([(1980, 122.0)] * 7 + [(1455, 689.0), (1500, 689.0), (1530, 689.0)]),
                                NOT_READ, NOT_READ, 700.0, 1980)
    assert capped["sm_clock_mhz_median"] == 1980  # the median alone would hide it
    assert (capped["held_back_fraction"], capped["held_back_sm_clock_mhz_median"]) == (pytest.approx(0.3), 1500)
    assert capped["held_back_reasons_fraction"] == {"sw_power_cap": pytest.approx(0.3)}
    idle = counters.summarize(0, [{**s, "reasons": 0x1} for s in h200_samples([(345, 80.0)] * 3)], NOT_READ, NOT_READ, 700.0, 1980)
    assert idle["held_back_fraction"] == 0.0  # an idle GPU's low clock is not held back
    assert counters.summarize(0, h200_samples([(1455, 689.0)] * 3), NOT_READ, NOT_READ, 700.0, None)["held_back_fraction"] is None


def test_sampler_reads_the_maximum_clock_and_judges_each_sample_against_it():
    capture = load("rtx4090x2")
    capture["gpus"][1].update(clock_reasons=0x4, sm_clock_mhz=2235, max_sm_clock_mhz=2520)  # capped 11% below
    capture["gpus"][0].update(clock_reasons=0x4, sm_clock_mhz=2520, max_sm_clock_mhz=2520)  # the reason at the maximum
    with counters.Sampler(nvml=fake_pynvml(capture), interval_s=0.001) as sampler:
        sample_until(sampler, 3)
    gpu0, gpu1 = sampler.summary()["gpus"]
    assert (gpu0["sm_clock_max_mhz"], gpu0["throttled_fraction"], gpu0["held_back_fraction"]) == (2520, 1.0, 0.0)
    assert (gpu1["held_back_fraction"], gpu1["held_back_sm_clock_mhz_median"], gpu1["held_back_reasons_fraction"]) == (
        1.0, 2235, {"sw_power_cap": 1.0})
    window = {"start_s": 0.0, "end_s": time.monotonic(), "steps_count": 3}
    assert sampler.window_summary(window)["gpus"][1]["held_back_fraction"] == 1.0


def test_sampler_stops_when_the_launch_raises():
    with pytest.raises(RuntimeError):
        with counters.Sampler(nvml=throttling_box(), interval_s=0.01) as sampler:
            raise RuntimeError("launch died")
    assert not sampler._thread.is_alive()
    assert not [t for t in threading.enumerate() if t.name == "gpu-counters"]


def test_sampler_without_nvml_or_switched_off_measures_nothing():
    assert counters.Sampler(nvml=None).__enter__().summary() is None
    with counters.Sampler(nvml=throttling_box(), env={switches.GPU_COUNTERS: "0"}) as off:
        pass
    assert off.summary() is None
    broken = throttling_box()
    broken.nvmlInit = lambda: (_ for _ in ()).throw(broken.NVMLError(9))
    with counters.Sampler(nvml=broken) as no_driver:
        pass
    assert no_driver.summary() is None


def synthetic_samples() -> list[dict]:
    """A GPU sampled every 0.1 s for a second: 1 GB/s sent over PCIe (NVML's KB/s) and 1 GB/s over
    NVLink (its cumulative counter), clocks held back by the power cap from t = 0.5 s on."""
    return [{"t": i / 10, "sm_clock_mhz": 1980, "mem_clock_mhz": 2619, "power_w": 500.0, "temperature_c": 60,
             "reasons": 0x4 if i >= 5 else 0, "pcie_tx_kbps": 1_000_000, "pcie_rx_kbps": None,
             "nvlink_tx_bytes": i * 100_000_000, "nvlink_rx_bytes": None} for i in range(11)]


def test_a_runs_counters_are_the_samples_inside_its_window_with_bytes_per_step():
    gpu = counters.summarize_window(0, synthetic_samples(), 700.0, {"start_s": 0.25, "end_s": 0.75, "steps_count": 10})
    assert (gpu["samples_count"], gpu["duration_s"]) == (5, 0.4)  # t = 0.3 ... 0.7
    assert (gpu["throttled_fraction"], gpu["throttle_reasons_fraction"]) == (0.6, {"sw_power_cap": 0.6})
    assert (gpu["pcie_tx_bytes"], gpu["nvlink_tx_bytes"]) == (pytest.approx(4e8), 4e8)  # over the samples' 0.4 s
    # scaled to the window's 0.5 s, over its 10 steps
    assert gpu["pcie_tx_bytes_per_step"] == pytest.approx(5e7) and gpu["nvlink_tx_bytes_per_step"] == pytest.approx(5e7)
    assert (gpu["pcie_rx_bytes_per_step"], gpu["nvlink_rx_bytes_per_step"]) == (None, None)  # never read: not measured
    run = {**json.loads((H200 / "copy-raw.json").read_text())["runs"][0], "launch_id": "00-copy-default-ws1",
           "measured_window": {"start_s": 0.25, "end_s": 0.75, "steps_count": 10},
           "gpu_counters": {"interval_s": 0.1, "gpus": [gpu]}}
    run.setdefault("transport", json.loads((H200 / "copy-raw.json").read_text())["launches"][0]["transport"])
    assert schemas.first_problem(run, "bundle", "run") is None


@pytest.mark.parametrize("window", [{"start_s": 0.21, "end_s": 0.29, "steps_count": 4},
                                    {"start_s": 0.25, "end_s": 0.35, "steps_count": 4},
                                    {"start_s": 0.3, "end_s": 0.5, "steps_count": 0}])
def test_a_window_too_short_for_two_samples_or_without_steps_is_not_measured(window):
    gpu = counters.summarize_window(0, synthetic_samples(), 700.0, window)
    per_step = [gpu[f"{name}_bytes_per_step"] for name in ("pcie_tx", "pcie_rx", "nvlink_tx", "nvlink_rx")]
    assert per_step == [None] * 4
    if window["steps_count"]:
        assert gpu["samples_count"] == 0 and gpu["sm_clock_mhz_median"] is None and gpu["throttled_fraction"] is None
        assert (gpu["pcie_tx_bytes"], gpu["nvlink_tx_bytes"]) == (None, None)


def test_sampler_cuts_its_samples_to_each_runs_window(monkeypatch):
    clock = SteppingClock()
    monkeypatch.setattr(counters, "time", clock)
    box = throttling_box()

    def nvlink(handle, ids):  # 1 GB/s over NVLink on the sampler's clock, on each GPU (KiB)
        kib = int(clock.now * 1e9 / 1024)
        return [SimpleNamespace(nvmlReturn=0, value=SimpleNamespace(ullVal=kib)) for _ in ids]

    box.nvmlDeviceGetFieldValues = nvlink
    with counters.Sampler(nvml=box, interval_s=0.001) as sampler:
        sample_until(sampler, 30)
    # The clock reads 0.01 at the start, then GPU0 at 0.02, GPU1 at 0.03, GPU0 at 0.04 ...: a run timed
    # from 0.105 to 0.405 holds GPU0's samples at 0.12 ... 0.40.
    window = {"start_s": 0.105, "end_s": 0.405, "steps_count": 3}
    gpu0, gpu1 = sampler.window_summary(window)["gpus"]
    assert (gpu0["samples_count"], gpu0["duration_s"]) == (15, 0.28)
    assert gpu0["samples_count"] < sampler.summary()["gpus"][0]["samples_count"]
    assert gpu0["nvlink_tx_bytes_per_step"] == pytest.approx(1e8, rel=1e-3)  # 1 GB/s for 0.1 s a step
    assert gpu0["pcie_tx_bytes_per_step"] == pytest.approx(1e8, rel=1e-3)
    assert gpu1["throttle_reasons_fraction"] == {"sw_power_cap": 1.0}
    assert sampler.window_summary(None) is None  # a run that timed nothing
    assert counters.Sampler(nvml=None).__enter__().window_summary(window) is None


def fixture_bundle() -> dict:
    """The real 1x H200 copy run, beside the consumer box's fingerprint (a host that measured nothing)."""
    raw = json.loads((H200 / "copy-raw.json").read_text())
    plan = check(yaml.safe_load((REPO / "bench" / "plans" / "copy.yaml").read_text()), "copy")
    host = {"runtime": "local", "labels": [], "status": "ok", "error": None}
    return {
        "schema_version": 1, "kind": "ddpbench.bundle", "run_id": "20261123T125600Z-c0b1e5",
        "started_at": raw["started_at"], "finished_at": raw["finished_at"], "complete": True,
        "tool": {"name": "ddpbench", "version": "0.1.0", "git_commit": None}, "plan": plan,
        "hosts": [{**host, "name": "h200x1", "fingerprint": raw["fingerprint"], "launches": raw["launches"],
                   "runs": [{**r, "transport": raw["launches"][0]["transport"]} if "transport" not in r else r for r in raw["runs"]]},
                  {**host, "name": "rig-4090", "fingerprint": rtx_fingerprint(), "launches": [], "runs": []}],
        "sha256": "0" * 64,
    }


def test_report_shows_the_copy_matrix_bars_concerns_and_counters(tmp_path):
    bundle = write_bundle(tmp_path / "bundle.json", fixture_bundle())
    report = write_report([bundle], tmp_path / "report").read_text()
    assert "## Copy bandwidth" in report and (tmp_path / "report" / "copy-per-gpu.png").exists()
    assert "h200x1, CE, 1 GiB per copy: GB/s, median (source row → destination column)." in report
    assert "| source \\ destination | host | gpu0 |" in report
    assert "| h200x1 | 1x H200, PCIe 5.0 x16 | h2d | CE | host → gpu0 | 1 GiB |" in report
    assert "5.0 x16 loaded (max 5.0 x16)" in report
    assert "GPU1: PCIe link under load is 4.0 x8, its slot allows 4.0 x16" in report
    assert "GPU1: power limit 350 W, below its default 450 W" in report
    assert "no P2P between GPU0→GPU1, GPU1→GPU0" in report and "`default` and `p2p_off` are the same path" in report
    assert "## GPU counters" in report and "| h200x1 | 00-copy-default-ws1 | GPU0 |" in report


def test_verify_names_health_and_p2p_when_machines_differ():
    found = {d["field"]: d for d in differences(h200_fingerprint(), rtx_fingerprint())}
    assert found["health"]["original"] == [] and "power limit 350 W, below its default 450 W" in found["health"]["new"]
    assert (found["pairs_without_p2p"]["original"], found["pairs_without_p2p"]["new"]) == (0, 2)
    old = {k: v for k, v in h200_fingerprint().items() if k not in ("health", "link_load")}
    assert "health" not in {d["field"] for d in differences(old, rtx_fingerprint())}  # not measured then: not compared


def test_verify_compares_the_machine_concerns_that_change_a_runs_path_where_both_read_them():
    fixed = rtx_fingerprint()
    fixed.update(iommu={**fixed["iommu"], "mode": "passthrough"}, dev_shm_total_bytes=8 << 30)
    fixed["gpus"] = [{**gpu, "persistence_mode": True} for gpu in fixed["gpus"]]
    found = {d["field"]: d for d in differences(rtx_fingerprint(), fixed)}
    assert set(found) == {"iommu_translated"}  # /dev/shm stops runs and persistence costs a start: not compared
    assert found["iommu_translated"]["original"][0].startswith("IOMMU in translated mode") and found["iommu_translated"]["new"] == []
    # A fingerprint from before these readings: only what both read is compared.
    older = {k: v for k, v in rtx_fingerprint().items() if k not in ("iommu", "pcie_path", "numa")}
    assert not {"iommu_translated", "acs_on_gpu_path"} & {d["field"] for d in differences(older, fixed)}


def nvlinked_h200x2(nvlink_loaded: "dict | None") -> dict:
    """Two H200s joined by NV18 (NVML's documented answers: 18 links enabled at 26.562 GB/s each
    way), with the NVLinks read while each GPU copied to its peer as `nvlink_loaded` says."""
    fp = h200_fingerprint()
    gpu = fp["gpus"][0]
    fp["gpus"] = [{**gpu, "index": i, "nvlink": {"active_links": 18, "link_speed_gbps": 26.562}} for i in (0, 1)]
    fp["gpu_count"] = 2
    fp["topology"]["matrix"] = {"GPU0": {"GPU0": "X", "GPU1": "NV18"}, "GPU1": {"GPU0": "NV18", "GPU1": "X"}}
    fp["link_load"] = {"pcie_loaded": {"0": {"gen_loaded": 5, "width_loaded": 16}, "1": {"gen_loaded": 5, "width_loaded": 16}},
                       "p2p_access": {"GPU0": {"GPU1": True}, "GPU1": {"GPU0": True}}, "nvlink_loaded": nvlink_loaded}
    return fp


def test_nvlinks_read_under_load_set_the_peak_and_the_ones_idle_are_named():
    all_up = nvlinked_h200x2({"0": {"active_links_loaded": 18, "link_speed_gbps_loaded": 26.562},
                              "1": {"active_links_loaded": 18, "link_speed_gbps_loaded": 26.562}})
    six_down = nvlinked_h200x2({"0": {"active_links_loaded": 18, "link_speed_gbps_loaded": 26.562},
                                "1": {"active_links_loaded": 12, "link_speed_gbps_loaded": 26.562}})
    for fp in (all_up, six_down, nvlinked_h200x2(None)):
        assert schemas.first_problem(fp, "fingerprint") is None
    assert (link_summary(all_up)["link_label"], link_summary(all_up)["link_peak_gbps"]) == ("2x NVIDIA H200, NVLink NV18", pytest.approx(478.116))
    assert health_warnings(all_up) == []
    assert link_summary(six_down)["link_peak_gbps"] == pytest.approx(12 * 26.562)
    assert health_warnings(six_down) == ["GPU1: 12 of its 18 NVLinks active under load"]
    assert link_summary(nvlinked_h200x2(None))["link_peak_gbps"] == pytest.approx(478.116)  # not measured: as read at rest
    # As a real 2x H200 reads: NVML counts the links under load, its speed field is NOT_SUPPORTED
    # (nvidia-smi gave the speed at rest): the links under load at the speed at rest.
    as_read = nvlinked_h200x2({"0": {"active_links_loaded": 18, "link_speed_gbps_loaded": None},
                               "1": {"active_links_loaded": 12, "link_speed_gbps_loaded": None}})
    assert schemas.first_problem(as_read, "fingerprint") is None
    assert link_summary(as_read)["link_peak_gbps"] == pytest.approx(12 * 26.562)
    assert health_warnings(as_read) == ["GPU1: 12 of its 18 NVLinks active under load"]


class CopyingTorch:
    """The parts of torch the NVLink probe drives: each burst's copies are 'running' for one poll."""

    class cuda:
        device = staticmethod(lambda index: contextlib.nullcontext())
        synchronize = staticmethod(lambda device: None)

        class Event:
            def __init__(self):
                self.polls = 0

            def record(self):
                pass

            def query(self):
                self.polls += 1
                return self.polls > 1

    uint8 = "uint8"
    empty = staticmethod(lambda size, dtype, device: SimpleNamespace(copy_=lambda other, non_blocking: None))


def nvml_with_links(active_per_poll: list, fail_with: "int | None" = None, speed_fails_from_poll: "int | None" = None) -> SimpleNamespace:
    """NVML answering each poll (18 link-state calls) with the next count of enabled links, and
    the links' speed until the poll `speed_fails_from_poll` (then NVML_ERROR_UNKNOWN for the field)."""
    class NVMLError(Exception):
        def __init__(self, value):
            self.value = value

    calls = itertools.count()

    def state(handle, link):
        if fail_with is not None:
            raise NVMLError(fail_with)
        active = active_per_poll[min(next(calls) // 18, len(active_per_poll) - 1)]
        return 1 if link < active else 0

    speed, no_speed = (SimpleNamespace(nvmlReturn=code, value=SimpleNamespace(uiVal=26562)) for code in (0, 999))
    speed_polls = itertools.count()

    def fields(handle, ids):
        failing = speed_fails_from_poll is not None and next(speed_polls) >= speed_fails_from_poll
        return [no_speed if failing else speed]
    return SimpleNamespace(NVMLError=NVMLError, NVML_SUCCESS=0, NVML_FEATURE_ENABLED=1, NVML_NVLINK_MAX_LINKS=18,
                           NVML_ERROR_NOT_SUPPORTED=3, NVML_ERROR_INVALID_ARGUMENT=2, NVML_ERROR_UNKNOWN=999,
                           NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON=90, nvmlDeviceGetNvLinkState=state,
                           nvmlDeviceGetFieldValues=fields)


def test_nvlink_probe_keeps_the_most_links_seen_while_copying_and_an_nvml_that_cannot_tell_is_not_measured():
    assert link_load._loaded_nvlink(CopyingTorch, nvml_with_links([12, 18, 16]), 0, 1, handle=0) == {
        "active_links_loaded": 18, "link_speed_gbps_loaded": 26.562}
    assert link_load._loaded_nvlink(CopyingTorch, nvml_with_links([], fail_with=999), 0, 1, handle=0) == {
        "active_links_loaded": None, "link_speed_gbps_loaded": None}
    # A speed read that fails in a later poll keeps the earlier poll's speed.
    assert link_load._loaded_nvlink(CopyingTorch, nvml_with_links([18, 18, 18], speed_fails_from_poll=1), 0, 1, handle=0) == {
        "active_links_loaded": 18, "link_speed_gbps_loaded": 26.562}
