"""The PCIe link's generation and width in the counter sampler: every sample reads them, and each
launch's and each run's summary says the lowest and highest the link ran at, so a window whose link
slept throughout (a GeForce card resting at Gen 1) shows as such beside the fingerprint's reading."""
from __future__ import annotations

import time

import pytest

from bench import schemas
from bench.agent import counters
from tests.support.nvml_capture import fake_pynvml, load, sample_until


def test_each_sample_and_summary_holds_the_links_generation_and_width():
    capture = load("rtx4090x2")  # GPU0 reads 1.0 x16 (asleep), GPU1 4.0 x8
    capture["gpus"][1].update(pcie_gen_cur=4, pcie_width_cur=8)
    with counters.Sampler(nvml=fake_pynvml(capture), interval_s=0.001) as sampler:
        sample_until(sampler, 4)
    window = {"start_s": sampler.samples[0][1]["t"], "end_s": time.monotonic(), "steps_count": 4}  # all but the first sample
    assert {(s["pcie_gen"], s["pcie_width"]) for s in sampler.samples[0]} == {(1, 16)}
    launch0, launch1 = sampler.summary()["gpus"]
    assert (launch0["pcie_gen_min"], launch0["pcie_gen_max"], launch0["pcie_width_min"], launch0["pcie_width_max"]) == (1, 1, 16, 16)
    assert (launch1["pcie_gen_max"], launch1["pcie_width_max"]) == (4, 8)
    run0, _ = sampler.window_summary(window)["gpus"]
    assert (run0["pcie_gen_min"], run0["pcie_gen_max"]) == (1, 1)  # asleep for the whole window
    assert schemas.first_problem(sampler.window_summary(window), "bundle", "gpu_counters") is None


def samples(gens: list) -> list[dict]:
    return [{"t": i / 10, "sm_clock_mhz": None, "mem_clock_mhz": None, "power_w": None, "temperature_c": None,
             "reasons": None, "pcie_tx_kbps": None, "pcie_rx_kbps": None, "pcie_gen": gen, "pcie_width": 16 if gen else None,
             "nvlink_tx_bytes": None, "nvlink_rx_bytes": None} for i, gen in enumerate(gens)]


@pytest.mark.parametrize("gens, expected", [
    ([1, 1, 4, 4, 1], (1, 4)),  # trained up while busy, down between bursts
    ([4, 4, 4], (4, 4)),
    ([None, None], (None, None)),  # an NVML that cannot tell: not measured
])
def test_the_window_says_the_lowest_and_highest_generation_it_ran_at(gens, expected):
    gpu = counters.summarize_window(0, samples(gens), None, {"start_s": 0, "end_s": 1, "steps_count": 2})
    assert (gpu["pcie_gen_min"], gpu["pcie_gen_max"]) == expected
