"""torch's versions (with its CUDA, NCCL and cuDNN), read in torch_child.py, and the container image in use."""
from __future__ import annotations

import ctypes
import json
from pathlib import Path
from typing import Mapping

from bench.common.nccl_log import version_text

DEFAULT_PIN_PATH = "/etc/ddpbench/pin.json"
PIN_KEYS = ("image", "digest", "base_image", "torch", "nccl", "git_commit")


def torch_versions(torch) -> dict:
    """torch's version and those of the CUDA, NCCL ('2.28.9') and cuDNN (91900 for 9.19.0) it was built
    with; NCCL's and cuDNN's need no GPU, and only a CUDA build has them. NCCL's is the library's it
    loaded, and the headers' (torch.cuda.nccl.version()) beside it where they differ: a wheel of
    nvidia-nccl installed over torch's gives another library."""
    cuda = torch.version.cuda
    headers = ".".join(str(part) for part in torch.cuda.nccl.version()[:3]) if cuda else None
    library = nccl_library_version() if cuda else None
    return {
        "torch": str(torch.__version__),
        "torch_cuda": cuda,
        "nccl": library or headers,
        **({"nccl_headers": headers} if library and library != headers else {}),
        "cudnn": torch.backends.cudnn.version() if cuda else None,
    }


def nccl_library_version(maps: Path = Path("/proc/self/maps")) -> "str | None":
    """'2.28.9': the NCCL library this process mapped with torch, by its ncclGetVersion (it needs no
    GPU and starts nothing); None where torch holds NCCL in itself (no libnccl mapped)."""
    mapped = next((line.split()[-1] for line in maps.read_text().splitlines() if "/libnccl.so" in line), None)
    if mapped is None:
        return None
    code = ctypes.c_int()
    if ctypes.CDLL(mapped).ncclGetVersion(ctypes.byref(code)) != 0:
        raise RuntimeError(f"ncclGetVersion of {mapped} failed")
    return version_text(code.value)


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
