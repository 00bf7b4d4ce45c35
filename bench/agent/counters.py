"""Hardware counters during a launch: a thread reads each GPU through NVML, then waits
INTERVAL_S, over and over (clocks, power against the enforced limit, temperature, clock event
reasons, PCIe throughput and the link's generation and width, the cumulative NVLink byte counters)
and the NVLink counters once more at the start and the end, and summarises per GPU: over the
launch, and over each run's measured window (the timed calls, which the ranks record on the same
CLOCK_MONOTONIC as the samples' `t`).

Clocks count as held back only in the samples whose SM clock lies below the GPU's maximum (NVML's
max clock, read once) by more than concerns.HELD_BACK_BELOW_MAX_FRACTION while NVML names a reason
other than idle: NVML raises sw_power_cap at the maximum clock too. The launch's summary states
what the sampler itself cost: its thread's CPU time, its duration and its sweeps over the GPUs.

PCIe bytes are NVML's throughput (KB/s over a 20 ms window, each read blocks that long, so one
H200 got about 6.6 sweeps a second) integrated over the samples: an estimate (on the H200's copy
run it read 1.3x the bytes copied host-to-device and 1.6x device-to-host), and of all the traffic,
not only data: the GPU fetching its work counts too (on an H200 each eager kernel launch cost about
1.8 KB of PCIe rx, a kernel replayed from a CUDA graph about 2 bytes). NVML's cumulative PCIe byte fields are not used:
on an H200 they wrapped at 2^32 (4 GiB, a tenth of a second at Gen5 speed) and a copy of many
GiB read back as zero.

Where NVML is missing, or a GPU or an old binding cannot tell a field, the field is null
("not measured"); nothing here may stop a launch. The sampler is a context manager: it
stops and joins its thread when the launch ends, however the launch ends.
"""
from __future__ import annotations

import os
import statistics
import threading
import time

from bench.agent import switches
from bench.agent.fingerprint.health import clock_reasons, reason_names
from bench.judging.counters import BENIGN_REASONS, clock_held_back

try:
    import pynvml
except ImportError:
    pynvml = None

INTERVAL_S = 0.1
ALL_LINKS = 0xFFFFFFFF  # NVML's scope id for "summed over every NVLink"
# Cumulative byte counters: (field name, scope, bytes per unit); NVLink counts KiB.
BYTE_COUNTERS = {
    "nvlink_tx_bytes": ("NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX", ALL_LINKS, 1024),
    "nvlink_rx_bytes": ("NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX", ALL_LINKS, 1024),
}


def _call(nvml, name: str, *args):
    try:
        return getattr(nvml, name)(*args)
    except Exception:  # noqa: BLE001 - not measured
        return None


def read_byte_counters(nvml, handle) -> dict:
    """{name: cumulative bytes or None} for BYTE_COUNTERS, in one NVML call."""
    fields = [(getattr(nvml, field, None), scope) for field, scope, _ in BYTE_COUNTERS.values()]
    known = [(name, field) for name, field in zip(BYTE_COUNTERS, fields) if field[0] is not None]
    values = _call(nvml, "nvmlDeviceGetFieldValues", handle, [field for _, field in known]) or []
    read = dict.fromkeys(BYTE_COUNTERS)
    for (name, _), value in zip(known, values):
        if value.nvmlReturn == getattr(nvml, "NVML_SUCCESS", 0):
            read[name] = int(value.value.ullVal) * BYTE_COUNTERS[name][2]
    return read


def read_sample(nvml, handle) -> dict:
    power_mw = _call(nvml, "nvmlDeviceGetPowerUsage", handle)
    return {
        "t": time.monotonic(),
        "sm_clock_mhz": _call(nvml, "nvmlDeviceGetClockInfo", handle, getattr(nvml, "NVML_CLOCK_SM", 1)),
        "mem_clock_mhz": _call(nvml, "nvmlDeviceGetClockInfo", handle, getattr(nvml, "NVML_CLOCK_MEM", 2)),
        "power_w": None if power_mw is None else power_mw / 1000,
        "temperature_c": _call(nvml, "nvmlDeviceGetTemperature", handle, getattr(nvml, "NVML_TEMPERATURE_GPU", 0)),
        "reasons": clock_reasons(nvml, handle),
        "pcie_tx_kbps": _call(nvml, "nvmlDeviceGetPcieThroughput", handle, getattr(nvml, "NVML_PCIE_UTIL_TX_BYTES", 0)),
        "pcie_rx_kbps": _call(nvml, "nvmlDeviceGetPcieThroughput", handle, getattr(nvml, "NVML_PCIE_UTIL_RX_BYTES", 1)),
        "pcie_gen": _call(nvml, "nvmlDeviceGetCurrPcieLinkGeneration", handle),
        "pcie_width": _call(nvml, "nvmlDeviceGetCurrPcieLinkWidth", handle),
        **read_byte_counters(nvml, handle),
    }


def integrate_kbps(samples: list[dict], key: str) -> "int | None":
    """Bytes moved by a KB/s rate sampled at the samples' times (trapezoids; None if never read)."""
    points = [(s["t"], s[key]) for s in samples if s[key] is not None]
    if not points:
        return None
    total = sum((t1 - t0) * (r0 + r1) / 2 for (t0, r0), (t1, r1) in zip(points, points[1:]))
    return int(total * 1000)


def _median(values: list) -> "float | None":
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _held_back(samples: list[dict], max_sm_clock_mhz: "float | None") -> dict:
    """The share of samples with clocks held back below the maximum, their median SM clock, and the
    reasons NVML gave in them (each as a share of all samples); null where not measured."""
    judged = [s for s in samples if s["reasons"] is not None and s["sm_clock_mhz"] is not None]
    if not judged or not max_sm_clock_mhz:
        return {"held_back_fraction": None, "held_back_sm_clock_mhz_median": None, "held_back_reasons_fraction": None}
    held = []  # (SM clock, the reasons NVML gave) of each sample held back
    for sample in judged:
        names = reason_names(sample["reasons"])
        if clock_held_back(sample["sm_clock_mhz"], max_sm_clock_mhz, names):
            held.append((sample["sm_clock_mhz"], set(names) - BENIGN_REASONS))
    reasons = sorted({name for _, names in held for name in names})
    return {
        "held_back_fraction": len(held) / len(judged),
        "held_back_sm_clock_mhz_median": _median([clock for clock, _ in held]),
        "held_back_reasons_fraction": {name: sum(1 for _, names in held if name in names) / len(judged) for name in reasons},
    }


def _link_state(samples: list[dict]) -> dict:
    """The PCIe generation and width the link ran at, lowest and highest over the samples (a link
    asleep for the whole window never reached its slot's; one that dips between bursts did)."""
    state = {}
    for name in ("gen", "width"):
        read = [s[f"pcie_{name}"] for s in samples if s.get(f"pcie_{name}")]
        state[f"pcie_{name}_min"], state[f"pcie_{name}_max"] = (min(read), max(read)) if read else (None, None)
    return state


def summarize(index: int, samples: list[dict], start: dict, end: dict, power_limit_w: "float | None",
              max_sm_clock_mhz: "float | None" = None) -> dict:
    """One GPU's summary of a launch (schema: bundle's $defs/gpu_counters)."""
    masks = [s["reasons"] for s in samples if s["reasons"] is not None]
    held_back = [set(reason_names(m)) - BENIGN_REASONS for m in masks]
    reasons = sorted({name for names in held_back for name in names})
    duration = samples[-1]["t"] - samples[0]["t"] if len(samples) > 1 else 0.0
    moved = {name: None if start[name] is None or end[name] is None else max(0, end[name] - start[name]) for name in BYTE_COUNTERS}
    return {
        "index": index,
        "samples_count": len(samples),
        "duration_s": round(duration, 3),
        "sm_clock_mhz_median": _median([s["sm_clock_mhz"] for s in samples]),
        "sm_clock_max_mhz": max_sm_clock_mhz,
        "mem_clock_mhz_median": _median([s["mem_clock_mhz"] for s in samples]),
        "power_w_median": _median([s["power_w"] for s in samples]),
        "power_w_max": max((s["power_w"] for s in samples if s["power_w"] is not None), default=None),
        "power_limit_w": power_limit_w,
        "temperature_c_max": max((s["temperature_c"] for s in samples if s["temperature_c"] is not None), default=None),
        "throttled_fraction": None if not masks else sum(1 for names in held_back if names) / len(masks),
        "throttle_reasons_fraction": {
            name: sum(1 for names in held_back if name in names) / len(masks) for name in reasons
        } if masks else None,
        **_held_back(samples, max_sm_clock_mhz),
        **_link_state(samples),
        "pcie_tx_bytes": integrate_kbps(samples, "pcie_tx_kbps"),
        "pcie_rx_bytes": integrate_kbps(samples, "pcie_rx_kbps"),
        **moved,
    }


def summarize_window(index: int, samples: list[dict], power_limit_w: "float | None", window: dict,
                     max_sm_clock_mhz: "float | None" = None) -> dict:
    """One GPU's summary of a run: the samples inside its measured window (fewer than two: not
    measured), plus bytes per timed call, scaled from the samples' span to the whole window."""
    inside = [s for s in samples if window["start_s"] <= s["t"] <= window["end_s"]]
    if len(inside) < 2:
        inside = []
    edges = (inside[0], inside[-1]) if inside else (dict.fromkeys(BYTE_COUNTERS),) * 2
    summary = summarize(index, inside, *edges, power_limit_w, max_sm_clock_mhz)
    sampled_s = inside[-1]["t"] - inside[0]["t"] if inside else 0.0
    scale = None
    if sampled_s > 0 and window["steps_count"] > 0:
        scale = (window["end_s"] - window["start_s"]) / sampled_s / window["steps_count"]
    for name in ("pcie_tx_bytes", "pcie_rx_bytes", *BYTE_COUNTERS):
        summary[f"{name}_per_step"] = None if scale is None or summary[name] is None else summary[name] * scale
    return summary


def _watts(limit_mw: "int | None") -> "float | None":
    return None if limit_mw is None else limit_mw / 1000


class Sampler:
    """`with Sampler() as sampler: ...` then `sampler.summary()` and `sampler.window_summary(window)`
    per run: None without NVML or when switched off."""

    def __init__(self, nvml=pynvml, interval_s: float = INTERVAL_S, env=os.environ):
        self.nvml = nvml if switches.on(switches.GPU_COUNTERS, env) else None
        self.interval_s = interval_s
        self.handles: list = []
        self.samples: list[list[dict]] = []
        self.start: list[dict] = []
        self.end: list[dict] = []
        self.limits: list = []
        self.max_sm_clocks: list = []
        self.cpu_s: "float | None" = None  # the sampling thread's own CPU time
        self.sweeps_count = 0
        self.began = self.ended = 0.0
        self._stop = threading.Event()
        self._thread: "threading.Thread | None" = None

    def __enter__(self) -> "Sampler":
        if self.nvml is None:
            return self
        try:
            self.nvml.nvmlInit()
            self.handles = [self.nvml.nvmlDeviceGetHandleByIndex(i) for i in range(self.nvml.nvmlDeviceGetCount())]
        except Exception:  # noqa: BLE001 - no NVML here: not measured
            self.nvml, self.handles = None, []
            return self
        self.limits = [_call(self.nvml, "nvmlDeviceGetEnforcedPowerLimit", h) for h in self.handles]
        self.max_sm_clocks = [_call(self.nvml, "nvmlDeviceGetMaxClockInfo", h, getattr(self.nvml, "NVML_CLOCK_SM", 1))
                              for h in self.handles]
        self.began = time.monotonic()
        self.start = [read_byte_counters(self.nvml, h) for h in self.handles]
        self.samples = [[] for _ in self.handles]
        self._thread = threading.Thread(target=self._run, daemon=True, name="gpu-counters")
        self._thread.start()
        return self

    def _run(self) -> None:
        cpu_began = time.thread_time()
        while True:
            for handle, samples in zip(self.handles, self.samples):
                samples.append(read_sample(self.nvml, handle))
            self.sweeps_count += 1
            self.cpu_s = time.thread_time() - cpu_began  # so far: a job's launches are summarised while it samples
            if self._stop.wait(self.interval_s):
                return

    def __exit__(self, *exc) -> None:
        if self.nvml is None:
            return
        self._stop.set()
        self._thread.join()
        self.ended = time.monotonic()
        self.end = [read_byte_counters(self.nvml, h) for h in self.handles]
        _call(self.nvml, "nvmlShutdown")

    def summary(self) -> "dict | None":
        if self.nvml is None or not self.handles:
            return None
        return {
            "interval_s": self.interval_s,
            "sampler_cpu_s": None if self.cpu_s is None else round(self.cpu_s, 4),
            "sampler_duration_s": round(self.ended - self.began, 3),
            "sweeps_count": self.sweeps_count,
            "gpus": [
                summarize(i, samples, start, end, _watts(limit), max_sm)
                for i, (samples, start, end, limit, max_sm)
                in enumerate(zip(self.samples, self.start, self.end, self.limits, self.max_sm_clocks))
            ],
        }

    def span_summary(self, start_s: float, end_s: float) -> "dict | None":
        """One launch's summary (schema: bundle's $defs/gpu_counters) where the launches of a job share the
        sampler, over the samples from start_s to end_s (CLOCK_MONOTONIC), its NVLink bytes between the
        first and the last of them, and the sampler's cost in proportion to its sweeps in the span."""
        if self.nvml is None or not self.handles:
            return None
        inside = [[s for s in list(samples) if start_s <= s["t"] <= end_s] for samples in self.samples]
        sweeps = len(inside[0])
        return {
            "interval_s": self.interval_s,
            "sampler_cpu_s": None if self.cpu_s is None or not self.sweeps_count else round(self.cpu_s * sweeps / self.sweeps_count, 4),
            "sampler_duration_s": round(max(0.0, end_s - start_s), 3),
            "sweeps_count": sweeps,
            "gpus": [
                summarize(i, samples, *((samples[0], samples[-1]) if samples else (dict.fromkeys(BYTE_COUNTERS),) * 2),
                          _watts(limit), max_sm)
                for i, (samples, limit, max_sm) in enumerate(zip(inside, self.limits, self.max_sm_clocks))
            ],
        }

    def window_summary(self, window: "dict | None") -> "dict | None":
        """A run's summary (schema: bundle's $defs/gpu_counters) over its measured_window; None where
        the launch was not sampled or the run timed nothing."""
        if self.nvml is None or not self.handles or window is None:
            return None
        return {
            "interval_s": self.interval_s,
            "gpus": [summarize_window(i, samples, _watts(limit), window, max_sm)
                     for i, (samples, limit, max_sm) in enumerate(zip(self.samples, self.limits, self.max_sm_clocks))],
        }
