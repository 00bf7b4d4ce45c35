"""Wake the PCIe links of a launch's GPUs before anything is measured. An idle GPU trains its link
down (GeForce cards rest at Gen 1), and a copy into a sleeping link runs slow: a 2x RTX 3090 peer
copy read 3.2 GB/s cold and 13.1 GB/s with both GPUs awake (club-3090 #1507). So every GPU gets a
burst of pinned host-to-device copies at the same time, as the fingerprint's link probe makes them
and for as long; the counter sampler then records the link each run's window had."""
from __future__ import annotations

import time

import torch

from bench.agent.fingerprint.link_load import BURST_BYTES, BURST_S


def wake(devices: list) -> None:
    """Copies into every one of `devices` at once for BURST_S; the buffers are freed afterwards."""
    pairs = []
    for device in devices:
        with torch.cuda.device(device):
            host = torch.empty(BURST_BYTES, dtype=torch.uint8).pin_memory()
        pairs.append((host, torch.empty(BURST_BYTES, dtype=torch.uint8, device=device)))
    deadline = time.monotonic() + BURST_S
    while time.monotonic() < deadline:
        for host, target in pairs:
            target.copy_(host, non_blocking=True)
        for _, target in pairs:
            torch.cuda.synchronize(target.device)
    del pairs
    for device in devices:
        with torch.cuda.device(device):
            torch.cuda.empty_cache()
