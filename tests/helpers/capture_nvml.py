"""Print, as JSON, every NVML value ddpbench reads (fingerprint, health, link, counters), raw, per
GPU: the fixture that tests/e2e/test_link_truth.py's NVML stand-in answers with. Errors are kept as
their NVML error names, so a fixture also records what a GPU does not support.
Run on a GPU host: python tests/helpers/capture_nvml.py > nvml.json"""
import json
import sys

import pynvml as nvml

FIELDS = {"pcie_tx_bytes": (197, 0), "pcie_rx_bytes": (198, 0),
          "nvlink_tx_kib": (138, 0xFFFFFFFF), "nvlink_rx_kib": (139, 0xFFFFFFFF)}


def value(call, *args):
    try:
        got = call(*args)
    except Exception as error:  # noqa: BLE001 - recorded as what NVML answered
        return {"error": type(error).__name__ + ":" + str(error)}
    if isinstance(got, bytes):
        return got.decode()
    if isinstance(got, (list, tuple)) and got and hasattr(got[0], "pid"):
        return [{"pid": p.pid, "usedGpuMemory": p.usedGpuMemory} for p in got]
    if hasattr(got, "total"):
        return {"total": got.total, "used": got.used, "free": got.free}
    if hasattr(got, "busId"):
        return got.busId.decode() if isinstance(got.busId, bytes) else got.busId
    return list(got) if isinstance(got, tuple) else got


def fields(handle):
    try:
        got = nvml.nvmlDeviceGetFieldValues(handle, list(FIELDS.values()))
    except Exception as error:  # noqa: BLE001
        return {"error": str(error)}
    return {name: (v.value.ullVal if v.nvmlReturn == 0 else {"error": v.nvmlReturn}) for name, v in zip(FIELDS, got)}


nvml.nvmlInit()
out = {"driver": value(nvml.nvmlSystemGetDriverVersion), "cuda_driver": value(nvml.nvmlSystemGetCudaDriverVersion), "gpus": []}
for i in range(nvml.nvmlDeviceGetCount()):
    h = nvml.nvmlDeviceGetHandleByIndex(i)
    out["gpus"].append({
        "name": value(nvml.nvmlDeviceGetName, h), "pci_bus_id": value(nvml.nvmlDeviceGetPciInfo, h),
        "memory": value(nvml.nvmlDeviceGetMemoryInfo, h),
        "pcie_gen_cur": value(nvml.nvmlDeviceGetCurrPcieLinkGeneration, h), "pcie_gen_max": value(nvml.nvmlDeviceGetMaxPcieLinkGeneration, h),
        "pcie_width_cur": value(nvml.nvmlDeviceGetCurrPcieLinkWidth, h), "pcie_width_max": value(nvml.nvmlDeviceGetMaxPcieLinkWidth, h),
        "power_limit_mw": value(nvml.nvmlDeviceGetEnforcedPowerLimit, h),
        "power_default_mw": value(nvml.nvmlDeviceGetPowerManagementDefaultLimit, h),
        "power_usage_mw": value(nvml.nvmlDeviceGetPowerUsage, h),
        "sm_clock_mhz": value(nvml.nvmlDeviceGetClockInfo, h, nvml.NVML_CLOCK_SM),
        "mem_clock_mhz": value(nvml.nvmlDeviceGetClockInfo, h, nvml.NVML_CLOCK_MEM),
        "max_sm_clock_mhz": value(nvml.nvmlDeviceGetMaxClockInfo, h, nvml.NVML_CLOCK_SM),
        "max_mem_clock_mhz": value(nvml.nvmlDeviceGetMaxClockInfo, h, nvml.NVML_CLOCK_MEM),
        "temperature_c": value(nvml.nvmlDeviceGetTemperature, h, nvml.NVML_TEMPERATURE_GPU),
        "persistence_mode": value(nvml.nvmlDeviceGetPersistenceMode, h),
        "bar1_total": value(lambda handle: nvml.nvmlDeviceGetBAR1MemoryInfo(handle).bar1Total, h),
        "clock_reasons": value(nvml.nvmlDeviceGetCurrentClocksEventReasons, h),
        "compute_processes": value(nvml.nvmlDeviceGetComputeRunningProcesses, h),
        "graphics_processes": value(nvml.nvmlDeviceGetGraphicsRunningProcesses, h),
        "ecc_uncorrected_volatile": value(nvml.nvmlDeviceGetTotalEccErrors, h, nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_VOLATILE_ECC),
        "ecc_corrected_volatile": value(nvml.nvmlDeviceGetTotalEccErrors, h, nvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, nvml.NVML_VOLATILE_ECC),
        "retired_pages_pending": value(nvml.nvmlDeviceGetRetiredPagesPendingStatus, h),
        "remapped_rows": value(nvml.nvmlDeviceGetRemappedRows, h),
        "pcie_throughput_tx_kbps": value(nvml.nvmlDeviceGetPcieThroughput, h, nvml.NVML_PCIE_UTIL_TX_BYTES),
        "fields": fields(h),
    })
nvml.nvmlShutdown()
json.dump(out, sys.stdout, indent=1)
