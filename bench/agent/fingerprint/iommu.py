"""The IOMMU's mode for the GPUs: off, passthrough (identity domains: DMA goes straight to memory)
or translated (DMA domains: every GPU transfer goes through the IOMMU's page tables, which slows
peer-to-peer copies or blocks them). Read from sysfs, which a container shares with its host."""
from __future__ import annotations

from pathlib import Path

from .pcie_path import device_dir
from .system import read_text

# Kernel parameters that choose the IOMMU's mode (Documentation/admin-guide/kernel-parameters.txt).
CMDLINE_PREFIXES = ("iommu=", "iommu.passthrough=", "iommu.strict=", "intel_iommu=", "amd_iommu=")
PASSTHROUGH = {"identity"}
TRANSLATED = {"DMA", "DMA-FQ"}


def mode(domain_types: dict[str, "str | None"], units: "list[str] | None") -> "str | None":
    """"translated" where a GPU sits in a DMA domain, "passthrough" where every GPU read sits in an
    identity one, "off" where the kernel registered no IOMMU and no GPU is in a group, else None."""
    known = {kind for kind in domain_types.values() if kind}
    if known & TRANSLATED:
        return "translated"
    if known and known <= PASSTHROUGH:
        return "passthrough"
    if units == [] and not known:
        return "off"
    return None


def read(gpus: list[dict], root: Path = Path("/")) -> dict:
    """{"mode", "units" (the IOMMUs the kernel registered, e.g. dmar0), "gpu_domain_types"
    ({"GPU0": "DMA-FQ"}; null where the GPU is in no group), "cmdline" (the IOMMU parameters
    the kernel booted with)}."""
    class_dir = root / "sys/class/iommu"
    units = sorted(p.name for p in class_dir.iterdir()) if class_dir.is_dir() else None
    domain_types = {}
    for gpu in gpus:
        device = device_dir(root, gpu.get("pci_bus_id"))
        if device is not None:
            domain_types[f"GPU{gpu['index']}"] = read_text(device / "iommu_group" / "type")
    cmdline = (read_text(root / "proc/cmdline") or "").split()
    return {
        "mode": mode(domain_types, units),
        "units": units,
        "gpu_domain_types": domain_types,
        "cmdline": [word for word in cmdline if word.startswith(CMDLINE_PREFIXES)],
    }
