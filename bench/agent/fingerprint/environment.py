"""The environment in force, by allow-list: only variables that steer NCCL, CUDA, torch and the
math libraries, never the whole environment (it holds paths, hostnames and credentials)."""
from __future__ import annotations

from typing import Mapping

ALLOWED_PREFIXES = ("NCCL_", "CUDA_", "TORCH_", "OMP_", "MKL_", "GLOO_", "NVIDIA_", "CUBLAS_", "PYTORCH_")
# Some allowed families carry credentials (e.g. a plugin token); those names are dropped anyway.
DENIED_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD")


def allowed(env: Mapping[str, str]) -> dict[str, str]:
    return {
        name: env[name] for name in sorted(env)
        if name.startswith(ALLOWED_PREFIXES) and not any(word in name.upper() for word in DENIED_WORDS)
    }
