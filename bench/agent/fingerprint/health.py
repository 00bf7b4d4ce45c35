"""The GPUs' health before anything is measured, through NVML: who else holds them, memory
errors, power limits and clocks held back at idle. Every field is null where NVML (or its
bindings) cannot tell: "not measured", never a failed fingerprint."""
from __future__ import annotations


# NVML's clock event (throttle) reason bits, named as nvidia-smi -q names them.
CLOCK_REASONS = {
    0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
    0x10: "sync_boost", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


def reason_names(mask: "int | None") -> "list[str] | None":
    return None if mask is None else [name for bit, name in CLOCK_REASONS.items() if mask & bit]


def clock_reasons(nvml, handle) -> "int | None":
    """The current reason bitmask (the call was renamed from Throttle to Event in NVML 12.2), or None."""
    name = "nvmlDeviceGetCurrentClocksEventReasons" if hasattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons") \
        else "nvmlDeviceGetCurrentClocksThrottleReasons"
    return _call(nvml, name, handle)


def _call(nvml, name: str, *args):
    """nvml.<name>(*args), or None where the binding lacks it or the GPU or driver cannot tell."""
    try:
        return getattr(nvml, name)(*args)
    except Exception:  # noqa: BLE001 - unsupported, too old a binding or driver: not measured
        return None


def _processes(nvml, handle) -> "list[dict] | None":
    found = {}
    for name in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
        listed = _call(nvml, name, handle)
        if listed is None:
            return None
        for process in listed:
            used = getattr(process, "usedGpuMemory", None)
            found[process.pid] = {"pid": int(process.pid), "used_memory_bytes": int(used) if isinstance(used, int) else None}
    return sorted(found.values(), key=lambda p: p["pid"])


def _ecc(nvml, handle, error_type_name: str) -> "int | None":
    error_type = getattr(nvml, error_type_name, None)
    counter = getattr(nvml, "NVML_VOLATILE_ECC", None)
    if error_type is None or counter is None:
        return None
    value = _call(nvml, "nvmlDeviceGetTotalEccErrors", handle, error_type, counter)
    return None if value is None else int(value)


def _watts(milliwatts) -> "float | None":
    return None if milliwatts is None else milliwatts / 1000


def read_gpu(nvml, index: int, handle) -> dict:
    """One GPU's health record (schema: fingerprint's $defs/gpu_health)."""
    remapped = _call(nvml, "nvmlDeviceGetRemappedRows", handle)
    memory = _call(nvml, "nvmlDeviceGetMemoryInfo", handle)
    pending_pages = _call(nvml, "nvmlDeviceGetRetiredPagesPendingStatus", handle)
    return {
        "index": index,
        "memory_used_bytes": None if getattr(memory, "used", None) is None else int(memory.used),
        "processes": _processes(nvml, handle),
        "ecc_uncorrected_volatile": _ecc(nvml, handle, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED"),
        "ecc_corrected_volatile": _ecc(nvml, handle, "NVML_MEMORY_ERROR_TYPE_CORRECTED"),
        "retired_pages_pending": None if pending_pages is None else bool(pending_pages),
        "row_remap_pending": None if remapped is None else bool(remapped[2]),
        "row_remap_failed": None if remapped is None else bool(remapped[3]),
        "power_limit_w": _watts(_call(nvml, "nvmlDeviceGetEnforcedPowerLimit", handle)),
        "power_limit_default_w": _watts(_call(nvml, "nvmlDeviceGetPowerManagementDefaultLimit", handle)),
        "sm_clock_idle_mhz": _call(nvml, "nvmlDeviceGetClockInfo", handle, getattr(nvml, "NVML_CLOCK_SM", 1)),
        "clock_reasons_idle": reason_names(clock_reasons(nvml, handle)),
    }


def read(nvml) -> dict:
    """{"source": "nvml", "gpus": [...]}; NVML must already be initialised."""
    gpus = []
    for index in range(nvml.nvmlDeviceGetCount()):
        gpus.append(read_gpu(nvml, index, nvml.nvmlDeviceGetHandleByIndex(index)))
    return {"source": "nvml", "gpus": gpus}
