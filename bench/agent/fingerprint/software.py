"""Python, torch, CUDA, NCCL and cuDNN versions, and the container image in use."""
from __future__ import annotations

import ctypes
import json
import platform
from pathlib import Path
from typing import Mapping

from bench.common.nccl_log import version_text

try:
    import torch
except ImportError:
    torch = None

DEFAULT_PIN_PATH = "/etc/ddpbench/pin.json"
PIN_KEYS = ("image", "digest", "base_image", "torch", "nccl", "git_commit")


def versions() -> dict:
    return {
        "python": platform.python_version(),
        "torch": None if torch is None else str(torch.__version__),
        "torch_cuda": None if torch is None else torch.version.cuda,
    }


# A CUDA build of torch is enough for the next two: torch.cuda.is_available() would initialise
# the CUDA driver in this process, which breaks CUDA in any child forked afterwards.
def nccl_headers_version() -> str | None:
    """'2.28.9': the NCCL headers torch was built with (torch.cuda.nccl.version())."""
    if torch is None or not torch.version.cuda:
        return None
    return ".".join(str(part) for part in torch.cuda.nccl.version()[:3])


def nccl_version(maps: Path = Path("/proc/self/maps")) -> str | None:
    """'2.28.9': the NCCL library this process loaded with torch, by its ncclGetVersion, which needs no
    GPU and initialises nothing; the headers' version where torch holds NCCL in itself (no libnccl
    mapped). A wheel of nvidia-nccl installed over torch's gives a library unlike the headers."""
    if torch is None or not torch.version.cuda:
        return None
    mapped = next((line.split()[-1] for line in maps.read_text().splitlines() if "/libnccl.so" in line), None)
    if mapped is None:
        return nccl_headers_version()
    code = ctypes.c_int()
    if ctypes.CDLL(mapped).ncclGetVersion(ctypes.byref(code)) != 0:
        raise RuntimeError(f"ncclGetVersion of {mapped} failed")
    return version_text(code.value)


def cudnn_version() -> int | None:
    """91900 for cuDNN 9.19.0, as torch reports it."""
    if torch is None or not torch.version.cuda:
        return None
    return torch.backends.cudnn.version()


def container(env: Mapping[str, str]) -> dict:
    """Image reference and digest from the pin file baked into the image (path in
    DDPBENCH_IMAGE_PIN), else the image named by DDPBENCH_IMAGE, else nothing. The digest the
    runtime passes in DDPBENCH_IMAGE_DIGEST (the id of the image it started) wins: an image
    cannot hold its own digest. An unreadable pin file raises, so that the caller records it."""
    pin_path = Path(env.get("DDPBENCH_IMAGE_PIN") or DEFAULT_PIN_PATH)
    digest = env.get("DDPBENCH_IMAGE_DIGEST") or None
    if pin_path.is_file():
        loaded = json.loads(pin_path.read_text())
        if not isinstance(loaded, dict):
            raise ValueError(f"{pin_path}: not a JSON object")
        pin = {key: str(loaded[key]) for key in PIN_KEYS if loaded.get(key) is not None}
        return {"image": pin.get("image") or env.get("DDPBENCH_IMAGE") or None, "digest": digest or pin.get("digest"), "pin": pin}
    return {"image": env.get("DDPBENCH_IMAGE") or None, "digest": digest, "pin": None}
