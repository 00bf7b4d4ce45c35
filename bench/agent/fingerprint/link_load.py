"""What only a running GPU tells: its PCIe link and its NVLinks while a copy crosses them, and
peer access per pair.

Many GPUs train their link down when idle (GeForce cards at rest report Gen 1), so the
generation and width read at rest say little about the link a run gets. This probe copies
pinned host memory to each GPU in turn for a moment and reads the link through NVML while
the copies run; then, for each GPU with a peer it may access, it copies to that peer and reads
its NVLinks (how many are active, at what speed). It runs in the fingerprint's child process
(torch_child.py), so that its CUDA context is gone before anything is measured.
"""
from __future__ import annotations

import time

from bench.agent.fingerprint.nvml import nvlink_state

BURST_BYTES = 64 << 20
BURST_S = 0.3  # long enough for the link to train up; GeForce cards take a few ms


def _nvml_handle(nvml, props) -> tuple[int, object]:
    """NVML's index and handle of the torch device with these properties (matched by PCI address)."""
    handle = nvml.nvmlDeviceGetHandleByPciBusId(f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0")
    return nvml.nvmlDeviceGetIndex(handle), handle


def _poll_while_copying(torch, device: int, copy, poll) -> None:
    """Bursts of `copy` on `device` for BURST_S, `poll` called again and again while each runs."""
    deadline = time.monotonic() + BURST_S
    with torch.cuda.device(device):
        while time.monotonic() < deadline:
            done = torch.cuda.Event()
            for _ in range(8):
                copy()
            done.record()
            while not done.query():
                poll()
        torch.cuda.synchronize(device)


def _loaded_link(torch, nvml, device: int, handle) -> dict:
    """The highest generation and width NVML reports while host-to-device copies run on `device`."""
    host = torch.empty(BURST_BYTES, dtype=torch.uint8).pin_memory()
    target = torch.empty(BURST_BYTES, dtype=torch.uint8, device=device)
    most = {"gen": 0, "width": 0}

    def poll() -> None:
        most["gen"] = max(most["gen"], nvml.nvmlDeviceGetCurrPcieLinkGeneration(handle))
        most["width"] = max(most["width"], nvml.nvmlDeviceGetCurrPcieLinkWidth(handle))

    _poll_while_copying(torch, device, lambda: target.copy_(host, non_blocking=True), poll)
    return {"gen_loaded": most["gen"] or None, "width_loaded": most["width"] or None}


def _loaded_nvlink(torch, nvml, device: int, peer: int, handle) -> dict:
    """The most active NVLinks, and their speed, NVML reports while `device` copies to `peer`."""
    source = torch.empty(BURST_BYTES, dtype=torch.uint8, device=device)
    target = torch.empty(BURST_BYTES, dtype=torch.uint8, device=peer)
    most = {"active_links": None, "link_speed_gbps": None}

    def poll() -> None:
        try:
            state = nvlink_state(nvml, handle)
        except nvml.NVMLError:  # an NVML that cannot tell: not measured, the PCIe reading stays
            return
        # Each the most seen: a poll whose speed field fails
        # must not undo an earlier poll's reading.
        for key, value in state.items():
            if value is not None and value >= (most[key] or 0):
                most[key] = value

    _poll_while_copying(torch, device, lambda: target.copy_(source, non_blocking=True), poll)
    return {"active_links_loaded": most["active_links"], "link_speed_gbps_loaded": most["link_speed_gbps"]}


def probe() -> dict:
    """{"pcie_loaded": {nvml index: {"gen_loaded", "width_loaded"}}, "p2p_access": {"GPU0": {"GPU1": bool}},
    "nvlink_loaded": {nvml index: {"active_links_loaded", "link_speed_gbps_loaded"}} or None where no
    GPU may access a peer}."""
    import pynvml as nvml
    import torch

    nvml.nvmlInit()
    try:
        count = torch.cuda.device_count()
        handles, indices, loaded = {}, {}, {}
        for device in range(count):
            indices[device], handles[device] = _nvml_handle(nvml, torch.cuda.get_device_properties(device))
            loaded[str(indices[device])] = _loaded_link(torch, nvml, device, handles[device])
        access = {a: [b for b in range(count) if b != a and torch.cuda.can_device_access_peer(a, b)] for a in range(count)}
        nvlink = {str(indices[a]): _loaded_nvlink(torch, nvml, a, peers[0], handles[a]) for a, peers in access.items() if peers}
    finally:
        nvml.nvmlShutdown()
    p2p = {f"GPU{indices[a]}": {f"GPU{indices[b]}": b in access[a] for b in range(count) if b != a} for a in range(count)}
    return {"pcie_loaded": loaded, "p2p_access": p2p, "nvlink_loaded": nvlink or None}
