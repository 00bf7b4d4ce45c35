"""Dense bf16 tensor-core peaks (TFLOP/s, FP32 accumulate, no sparsity), for MFU.

Figures are the vendor's datasheet or architecture whitepaper numbers. A GPU not listed
gets no MFU: a guessed peak would make a wrong number look precise.
"""

from __future__ import annotations

import re

# Ordered: the first pattern that matches the CUDA device name wins.
DENSE_BF16_PEAK_TFLOPS = [
    (r"H200 NVL", None),  # not pinned down yet: leave unknown rather than guess
    (r"H200", 989.4),
    (r"H100.*PCIe", 756.5),
    (r"H100 NVL", None),
    (r"H100", 989.4),  # SXM5 ("NVIDIA H100 80GB HBM3")
    (r"A100", 312.0),
    (r"L40S", 362.05),
    (r"L40\b", 181.05),
    (r"A10\b", 125.0),
    (r"RTX A6000", 154.8),
    (r"RTX 4090", 165.2),
    (r"RTX 3090 Ti", 80.0),
    (r"RTX 3090", 71.0),
]


def dense_bf16_peak_tflops(device_name: str) -> "float | None":
    for pattern, peak in DENSE_BF16_PEAK_TFLOPS:
        if re.search(pattern, device_name):
            return peak
    return None
