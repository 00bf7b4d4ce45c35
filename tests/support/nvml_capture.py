"""A pynvml stand-in that answers with a capture of tests/helpers/capture_nvml.py: every value as
the GPU gave it, and every recorded error raised as the NVMLError it was; and a clock for the counter
sampler whose samples' times do not hang on when the scheduler lets its thread run."""
from __future__ import annotations

import json
import threading
import time
from types import SimpleNamespace

from tests.support import FIXTURES
FIELD_NAMES = {197: "pcie_tx_bytes", 198: "pcie_rx_bytes", 138: "nvlink_tx_kib", 139: "nvlink_rx_kib"}
ERROR_CODES = {"NVMLError_NotSupported": 3}


def load(machine: str) -> dict:
    return json.loads((FIXTURES / machine / "nvml.json").read_text())


def fake_pynvml(capture: dict) -> SimpleNamespace:
    class NVMLError(Exception):
        def __init__(self, value):
            super().__init__(f"NVML error {value}")
            self.value = value

    def answer(handle, key):
        if key not in capture["gpus"][handle]:  # a capture made before ddpbench read it: not measured
            raise NVMLError(ERROR_CODES["NVMLError_NotSupported"])
        value = capture["gpus"][handle][key]
        if isinstance(value, dict) and "error" in value:
            raise NVMLError(ERROR_CODES.get(value["error"].split(":")[0], 999))
        return value

    def processes(key):
        return lambda h: [SimpleNamespace(pid=p["pid"], usedGpuMemory=p["usedGpuMemory"]) for p in answer(h, key)]

    def fields(handle, ids):
        out = []
        for field_id, _scope in ids:
            value = capture["gpus"][handle]["fields"][FIELD_NAMES[field_id]]
            failed = isinstance(value, dict)
            out.append(SimpleNamespace(nvmlReturn=value["error"] if failed else 0, value=SimpleNamespace(ullVal=0 if failed else value)))
        return out

    return SimpleNamespace(
        NVMLError=NVMLError, NVML_SUCCESS=0, NVML_ERROR_NOT_SUPPORTED=3, NVML_ERROR_LIBRARY_NOT_FOUND=12,
        NVML_ERROR_DRIVER_NOT_LOADED=9, NVML_ERROR_INVALID_ARGUMENT=2, NVML_FEATURE_ENABLED=1,
        NVML_CLOCK_SM=1, NVML_CLOCK_MEM=2, NVML_TEMPERATURE_GPU=0, NVML_NVLINK_MAX_LINKS=18,
        NVML_MEMORY_ERROR_TYPE_UNCORRECTED=1, NVML_MEMORY_ERROR_TYPE_CORRECTED=0, NVML_VOLATILE_ECC=0,
        NVML_PCIE_UTIL_TX_BYTES=0, NVML_PCIE_UTIL_RX_BYTES=1,
        NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX=138, NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX=139,
        nvmlInit=lambda: None, nvmlShutdown=lambda: None,
        nvmlSystemGetDriverVersion=lambda: capture["driver"],
        nvmlSystemGetCudaDriverVersion=lambda: capture["cuda_driver"],
        nvmlDeviceGetCount=lambda: len(capture["gpus"]),
        nvmlDeviceGetHandleByIndex=lambda index: index,
        nvmlDeviceGetName=lambda h: answer(h, "name"),
        nvmlDeviceGetUUID=lambda h: f"GPU-fixture-{h}",
        nvmlDeviceGetPciInfo=lambda h: SimpleNamespace(busId=answer(h, "pci_bus_id")),
        nvmlDeviceGetMemoryInfo=lambda h: SimpleNamespace(**answer(h, "memory")),
        nvmlDeviceGetCurrPcieLinkGeneration=lambda h: answer(h, "pcie_gen_cur"),
        nvmlDeviceGetMaxPcieLinkGeneration=lambda h: answer(h, "pcie_gen_max"),
        nvmlDeviceGetCurrPcieLinkWidth=lambda h: answer(h, "pcie_width_cur"),
        nvmlDeviceGetMaxPcieLinkWidth=lambda h: answer(h, "pcie_width_max"),
        nvmlDeviceGetEnforcedPowerLimit=lambda h: answer(h, "power_limit_mw"),
        nvmlDeviceGetPowerManagementDefaultLimit=lambda h: answer(h, "power_default_mw"),
        nvmlDeviceGetPowerUsage=lambda h: answer(h, "power_usage_mw"),
        nvmlDeviceGetClockInfo=lambda h, clock: answer(h, "sm_clock_mhz" if clock == 1 else "mem_clock_mhz"),
        nvmlDeviceGetMaxClockInfo=lambda h, clock: answer(h, "max_sm_clock_mhz" if clock == 1 else "max_mem_clock_mhz"),
        nvmlDeviceGetBAR1MemoryInfo=lambda h: SimpleNamespace(bar1Total=answer(h, "bar1_total")),
        nvmlDeviceGetPersistenceMode=lambda h: answer(h, "persistence_mode"),
        nvmlDeviceGetTemperature=lambda h, sensor: answer(h, "temperature_c"),
        nvmlDeviceGetCurrentClocksEventReasons=lambda h: answer(h, "clock_reasons"),
        nvmlDeviceGetComputeRunningProcesses=processes("compute_processes"),
        nvmlDeviceGetGraphicsRunningProcesses=processes("graphics_processes"),
        nvmlDeviceGetTotalEccErrors=lambda h, kind, counter: answer(h, "ecc_uncorrected_volatile" if kind == 1 else "ecc_corrected_volatile"),
        nvmlDeviceGetRetiredPagesPendingStatus=lambda h: answer(h, "retired_pages_pending"),
        nvmlDeviceGetRemappedRows=lambda h: answer(h, "remapped_rows"),
        nvmlDeviceGetPcieThroughput=lambda h, counter: answer(h, "pcie_throughput_tx_kbps"),
        nvmlDeviceGetFieldValues=fields,
        nvmlDeviceGetCudaComputeCapability=lambda h: (8, 9),
        nvmlDeviceGetNvLinkState=lambda h, link: (_ for _ in ()).throw(NVMLError(3)),
    )


class SteppingClock:
    """The counter sampler's `time` (bench.agent.counters reads time.monotonic): each read 10 ms after the
    one before, so a sample's time is its place in the order of reads, whatever the machine's load."""

    thread_time = staticmethod(time.thread_time)

    def __init__(self, step_s: float = 0.01):
        self.now, self.step_s, self._lock = 0.0, step_s, threading.Lock()

    def monotonic(self) -> float:
        with self._lock:
            self.now = round(self.now + self.step_s, 6)
            return self.now


def sample_until(sampler, sweeps: int, timeout_s: float = 120) -> None:
    """Wait until the sampler has read its GPUs `sweeps` times: a count of samples, which a busy machine
    delays but cannot cut short, as it can a sleep's."""
    deadline = time.monotonic() + timeout_s
    while sampler.sweeps_count < sweeps:
        assert time.monotonic() < deadline, f"the sampler read its GPUs {sampler.sweeps_count} times in {timeout_s} s"
        time.sleep(0.005)
