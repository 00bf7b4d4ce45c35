"""A machine's /proc and /sys, as far as the fingerprint reads them, built under a folder from a
fixture's host.json: files with their text, symbolic links as sysfs has them, and PCI
configuration spaces (4096 bytes, as root reads them, zero but for the dwords the fixture gives)."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

from bench.agent.fingerprint import driver_module, iommu, numa, pcie_path
from bench.common.cpulist import parse_cpulist
from tests.support import FIXTURES

CONFIG_SPACE_BYTES = 4096


def spec(machine: str) -> dict:
    return json.loads((FIXTURES / machine / "host.json").read_text())


def build(machine: str, root: Path) -> Path:
    """root, holding the machine's files; returns it."""
    described = spec(machine)
    for path, text in described["files"].items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    for path, dwords in described["config_space"].items():
        space = bytearray(CONFIG_SPACE_BYTES)
        for offset, data in dwords.items():
            start = int(offset, 16)
            space[start:start + len(bytes.fromhex(data))] = bytes.fromhex(data)
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(bytes(space))
    for path, target in described["links"].items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).symlink_to(target)
    return root


def readings(machine: str, gpus: list[dict]) -> dict:
    """The fingerprint's fields about the host around the GPUs (driver module, PCIe path, IOMMU,
    NUMA, /dev/shm) as the agent's readers read them from the machine's files."""
    described = spec(machine)
    with tempfile.TemporaryDirectory() as folder:
        root = build(machine, Path(folder))
        return {
            "kernel_module": driver_module.read(root, modinfo=lambda: None),
            "pcie_path": pcie_path.read(gpus, root),
            "iommu": iommu.read(gpus, root),
            "numa": numa.read(gpus, root, allowed=parse_cpulist(described["allowed_cpus"])),
            "dev_shm_total_bytes": described["dev_shm_total_bytes"],  # a filesystem's size: not a file to build
        }
