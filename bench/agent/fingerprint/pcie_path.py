"""The PCIe bridges between each GPU and the root complex, and their Access Control Services
(ACS) setting, read from sysfs (bench.judging.health judges them).

A bridge whose ACS control redirects peer requests or completions (ReqRedir, CmpltRedir) or
controls egress (EgressCtrl) sends GPU-to-GPU traffic up through the root complex, where it is
slower or blocked (NCCL's troubleshooting guide: "PCI Access Control Services"). The ACS control
register lies in the extended configuration space (past byte 0x100), which the kernel shows only to
a process with CAP_SYS_ADMIN: elsewhere the sysfs `config` file reads back 64 bytes and the
setting is unknown (null). lspci reads the same file, so it cannot tell more without privilege.
"""
from __future__ import annotations

import re
from pathlib import Path

ADDRESS = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
ACS_CAPABILITY_ID = 0x000D
EXTENDED_START = 0x100
CONFIG_SPACE_BYTES = 4096
# What the kernel lets a process without CAP_SYS_ADMIN read: 64 bytes (128 of a CardBus bridge).
UNPRIVILEGED_BYTES = 128
# The ACS control register's bits, named as lspci names them.
ACS_CONTROL_BITS = ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans")


def sysfs_address(bus_id: "str | None") -> "str | None":
    """'0000:01:00.0' (sysfs) from NVML's or nvidia-smi's '00000000:01:00.0'; None when unparseable."""
    match = re.fullmatch(r"([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])", (bus_id or "").strip())
    if not match:
        return None
    domain, bus, device, function = match.groups()
    return f"{int(domain, 16):04x}:{bus.lower()}:{device.lower()}.{function}"


def device_dir(root: Path, bus_id: "str | None") -> "Path | None":
    """The GPU's device folder under root's /sys/devices (its parents are the bridges above it)."""
    address = sysfs_address(bus_id)
    link = root / "sys/bus/pci/devices" / address if address else None
    if link is None or not link.exists():
        return None
    return link.resolve()


def bridges_above(device: Path) -> list[str]:
    """The PCI addresses of the bridges above a device, nearest first, up to the root complex."""
    bridges = []
    for parent in device.parents:
        if not ADDRESS.match(parent.name):
            break
        bridges.append(parent.name)
    return bridges


def acs_control(config: bytes) -> "list[str] | None":
    """The ACS control bits set in a configuration space (lspci's names); [] where the device has
    no ACS capability (or no extended space: a conventional PCI bridge's is 256 bytes); None where
    the read was cut short for want of privilege."""
    if len(config) <= UNPRIVILEGED_BYTES:
        return None
    offset, seen = EXTENDED_START, set()
    while offset and offset not in seen and offset + 8 <= len(config):
        seen.add(offset)
        header = int.from_bytes(config[offset:offset + 4], "little")
        if header in (0, 0xFFFFFFFF):
            return []
        if header & 0xFFFF == ACS_CAPABILITY_ID:
            control = int.from_bytes(config[offset + 6:offset + 8], "little")
            return [name for bit, name in enumerate(ACS_CONTROL_BITS) if control & (1 << bit)]
        offset = (header >> 20) & 0xFFC
    return []


def _config(device: Path) -> bytes:
    try:
        with open(device / "config", "rb") as file:
            return file.read(CONFIG_SPACE_BYTES)
    except OSError:
        return b""


def read(gpus: list[dict], root: Path = Path("/")) -> "dict | None":
    """{"gpus": {"GPU0": [bridge, ...]}, "bridges": {bridge: {"acs_ctl": [...] or None}}} for the
    GPUs sysfs shows; None where it shows none of them (no sysfs, or a GPU list it does not hold)."""
    paths, bridges = {}, {}
    for gpu in gpus:
        device = device_dir(root, gpu.get("pci_bus_id"))
        if device is None:
            continue
        above = bridges_above(device)
        paths[f"GPU{gpu['index']}"] = above
        for bridge, folder in zip(above, device.parents):
            bridges[bridge] = {"acs_ctl": acs_control(_config(folder))}
    return {"gpus": paths, "bridges": bridges} if paths else None
