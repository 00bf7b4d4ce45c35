"""The probes that import torch, run in one child process: torch's versions (with its CUDA, NCCL and
cuDNN) and, on a host with GPUs and NVML, the link under load (link_load.py). The agent itself never
imports torch: that cost 3-5 s before a launch, spent again by every rank. The child's CUDA context
is gone before anything is measured, and it runs while the agent reads the rest of the fingerprint.

`python -m bench.agent.fingerprint.torch_child [--link]` prints {"software": {...}, "link_load":
{...} or null, "errors": [...]} on stdout; a part that fails leaves its figures null and a line in errors.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

from bench.common.paths import SOURCE_ROOT

TIMEOUT_S = 60
NO_TORCH = {"torch": None, "torch_cuda": None, "nccl": None, "cudnn": None}


def start(link: bool) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(SOURCE_ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen([sys.executable, "-m", __name__, *(["--link"] if link else [])],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def result(child: subprocess.Popen) -> dict:
    """The child's findings; raises with its last line where it failed or took past TIMEOUT_S."""
    try:
        out, err = child.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        raise RuntimeError(f"torch's probes took past {TIMEOUT_S} s") from None
    if child.returncode != 0:
        raise RuntimeError((err.strip().splitlines() or [f"exit status {child.returncode}"])[-1])
    return json.loads(out)


def _part(name: str, read, errors: list, default=None):
    try:
        return read()
    except Exception as error:  # noqa: BLE001 - one part failing leaves the others
        errors.append(f"{name}: {type(error).__name__}: {error}"[:200])
        return default


def main(argv: "list[str]") -> dict:
    errors: list = []
    try:
        import torch
    except ImportError:
        return {"software": NO_TORCH, "link_load": None, "errors": []}
    from bench.agent.fingerprint import link_load, software

    found = {"software": _part("software", lambda: software.torch_versions(torch), errors, NO_TORCH),
             "link_load": _part("link under load", link_load.probe, errors) if "--link" in argv else None}
    return {**found, "errors": errors}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
