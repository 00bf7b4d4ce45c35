"""The per-GPU facts read through NVML (package nvidia-ml-py), when it can be imported and
initialised; same output shape as nvidia_smi.parse_query_xml."""
from __future__ import annotations

from . import health
from .nvidia_smi import uuid_sha256

try:
    import pynvml
except ImportError:
    pynvml = None

# NVML failing to load where no NVIDIA driver is installed means "not available", not an error.
_NOT_AVAILABLE = {"NVML_ERROR_LIBRARY_NOT_FOUND", "NVML_ERROR_DRIVER_NOT_LOADED"}
# A GPU without NVLink (or a link index past its count) answers these.
_NO_LINK = {"NVML_ERROR_NOT_SUPPORTED", "NVML_ERROR_INVALID_ARGUMENT"}


def _is(nvml, error: Exception, names: set) -> bool:
    return isinstance(error, nvml.NVMLError) and error.value in {getattr(nvml, n, None) for n in names}


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _optional(call):
    """call()'s answer, or None where the GPU, the driver or an older binding cannot tell."""
    try:
        return call()
    except Exception:  # noqa: BLE001 - not measured, not an error of the fingerprint
        return None


def read(errors: list[str], nvml=pynvml) -> dict | None:
    """{"driver_version", "cuda_driver_version", "gpus": [...]} from NVML, or None when NVML is
    not available. Calls that fail record null; unexpected failures also append to `errors`.
    `nvml` is the pynvml module (replaceable in tests)."""
    if nvml is None:
        return None
    try:
        nvml.nvmlInit()
    except Exception as error:  # noqa: BLE001 - any failure here means: fall back to nvidia-smi
        if not _is(nvml, error, _NOT_AVAILABLE):
            errors.append(f"nvml: init: {type(error).__name__}: {error}"[:200])
        return None
    try:
        return _read(nvml, errors)
    finally:
        nvml.nvmlShutdown()


def _read(nvml, errors: list[str]) -> dict:
    def get(what: str, call, *args):
        try:
            return call(*args)
        except Exception as error:  # noqa: BLE001 - one missing fact must not lose the others
            if not _is(nvml, error, {"NVML_ERROR_NOT_SUPPORTED"}):
                errors.append(f"nvml: {what}: {type(error).__name__}: {error}"[:200])
            return None

    cuda = get("cuda driver version", lambda: nvml.nvmlSystemGetCudaDriverVersion())
    driver = get("driver version", lambda: nvml.nvmlSystemGetDriverVersion())
    gpus = []
    for index in range(nvml.nvmlDeviceGetCount()):
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        uuid = get("uuid", lambda: _text(nvml.nvmlDeviceGetUUID(handle)))
        power_mw = get("power limit", lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(handle))
        capability = get("compute capability", lambda: nvml.nvmlDeviceGetCudaComputeCapability(handle))
        gpus.append({
            "index": index,
            "name": get("name", lambda: _text(nvml.nvmlDeviceGetName(handle))) or "unknown",
            "uuid_sha256": uuid_sha256(uuid),
            "pci_bus_id": get("pci", lambda: _text(nvml.nvmlDeviceGetPciInfo(handle).busId)),
            "memory_total_bytes": get("memory", lambda: int(nvml.nvmlDeviceGetMemoryInfo(handle).total)),
            "pcie": {
                "gen_current": get("pcie gen", lambda: nvml.nvmlDeviceGetCurrPcieLinkGeneration(handle)),
                "gen_max": get("pcie gen max", lambda: nvml.nvmlDeviceGetMaxPcieLinkGeneration(handle)),
                "width_current": get("pcie width", lambda: nvml.nvmlDeviceGetCurrPcieLinkWidth(handle)),
                "width_max": get("pcie width max", lambda: nvml.nvmlDeviceGetMaxPcieLinkWidth(handle)),
            },
            "power_limit_w": None if power_mw is None else power_mw / 1000,
            "max_sm_clock_mhz": get("max sm clock", lambda: nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM)),
            "max_mem_clock_mhz": get("max mem clock", lambda: nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_MEM)),
            "compute_capability": None if capability is None else "%d.%d" % tuple(capability),
            "nvlink": get("nvlink", lambda: nvlink_state(nvml, handle)) or {"active_links": None, "link_speed_gbps": None},
            "bar1_total_bytes": _optional(lambda: int(nvml.nvmlDeviceGetBAR1MemoryInfo(handle).bar1Total)),
            "persistence_mode": _optional(lambda: nvml.nvmlDeviceGetPersistenceMode(handle) == nvml.NVML_FEATURE_ENABLED),
        })
    return {
        "health": get("health", lambda: health.read(nvml)),
        "driver_version": None if driver is None else _text(driver),
        "cuda_driver_version": None if cuda is None else f"{cuda // 1000}.{cuda % 1000 // 10}",  # 13000 -> 13.0
        "gpus": gpus,
    }


def nvlink_state(nvml, handle) -> dict:
    """Active NVLink count and the common link speed in GB/s (NVML reports MB/s)."""
    active = 0
    for link in range(nvml.NVML_NVLINK_MAX_LINKS):
        try:
            active += nvml.nvmlDeviceGetNvLinkState(handle, link) == nvml.NVML_FEATURE_ENABLED
        except nvml.NVMLError as error:
            if not _is(nvml, error, _NO_LINK):
                raise
    speed = None
    if active:
        field = nvml.nvmlDeviceGetFieldValues(handle, [nvml.NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON])[0]
        if field.nvmlReturn == nvml.NVML_SUCCESS and field.value.uiVal:
            speed = field.value.uiVal / 1000
    return {"active_links": active, "link_speed_gbps": speed}
