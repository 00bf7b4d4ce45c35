"""What only a running GPU tells: its PCIe link while a copy crosses it, and peer access per pair.

Many GPUs train their link down when idle (GeForce cards at rest report Gen 1), so the
generation and width read at rest say little about the link a run gets. This probe copies
pinned host memory to each GPU in turn for a moment and reads the link through NVML while
the copies run. It runs as its own process (`python -m bench.agent.fingerprint.link_load`,
JSON on stdout) so that its CUDA context is gone before anything is measured.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from bench.common.paths import SOURCE_ROOT

BURST_BYTES = 64 << 20
BURST_S = 0.3  # long enough for the link to train up; GeForce cards take a few ms
TIMEOUT_S = 60


def _nvml_handle(nvml, props) -> tuple[int, object]:
    """NVML's index and handle of the torch device with these properties (matched by PCI address)."""
    handle = nvml.nvmlDeviceGetHandleByPciBusId(f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0")
    return nvml.nvmlDeviceGetIndex(handle), handle


def _loaded_link(torch, nvml, device: int, handle) -> dict:
    """The highest generation and width NVML reports while host-to-device copies run on `device`."""
    with torch.cuda.device(device):
        host = torch.empty(BURST_BYTES, dtype=torch.uint8).pin_memory()
        target = torch.empty(BURST_BYTES, dtype=torch.uint8, device=device)
        gen = width = 0
        deadline = time.monotonic() + BURST_S
        while time.monotonic() < deadline:
            done = torch.cuda.Event()
            for _ in range(8):
                target.copy_(host, non_blocking=True)
            done.record()
            while not done.query():
                gen = max(gen, nvml.nvmlDeviceGetCurrPcieLinkGeneration(handle))
                width = max(width, nvml.nvmlDeviceGetCurrPcieLinkWidth(handle))
        torch.cuda.synchronize(device)
    return {"gen_loaded": gen or None, "width_loaded": width or None}


def probe() -> dict:
    """{"pcie_loaded": {nvml index: {"gen_loaded", "width_loaded"}}, "p2p_access": {"GPU0": {"GPU1": bool}}}."""
    import pynvml as nvml
    import torch

    nvml.nvmlInit()
    try:
        count = torch.cuda.device_count()
        indices = {}
        loaded = {}
        for device in range(count):
            index, handle = _nvml_handle(nvml, torch.cuda.get_device_properties(device))
            indices[device] = index
            loaded[str(index)] = _loaded_link(torch, nvml, device, handle)
    finally:
        nvml.nvmlShutdown()
    p2p = {
        f"GPU{indices[a]}": {f"GPU{indices[b]}": bool(torch.cuda.can_device_access_peer(a, b)) for b in range(count) if b != a}
        for a in range(count)
    }
    return {"pcie_loaded": loaded, "p2p_access": p2p}


def run() -> dict:
    """The probe's result from a child process; raises with the child's last line when it fails."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(SOURCE_ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", __name__], capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise RuntimeError(f"link probe failed: {last}")
    return json.loads(done.stdout)


if __name__ == "__main__":
    print(json.dumps(probe()))
