"""Which NVIDIA kernel module is loaded: the open one (GPL/MIT, required by Blackwell, the base of
the P2P-patched drivers for GeForce cards) or the proprietary one. The first line of
/proc/driver/nvidia/version says which ('NVIDIA UNIX Open Kernel Module for x86_64  570.133.07'
against 'NVIDIA UNIX x86_64 Kernel Module  570.133.07'); a container sees the host's. Where that
file is missing, `modinfo` tells by the module's license."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from .system import read_text

TIMEOUT_S = 10
_VERSION = re.compile(r"\s(\d+\.\d+(?:\.\d+)?)(?:\s|$)")


def parse_version_file(text: str) -> "dict | None":
    """{"flavor": "open" or "proprietary", "version"} from /proc/driver/nvidia/version's text."""
    first = next((line for line in text.splitlines() if line.startswith("NVRM version:")), None)
    if first is None or "Kernel Module" not in first:
        return None
    version = _VERSION.search(first)
    return {"flavor": "open" if "Open Kernel Module" in first else "proprietary",
            "version": version.group(1) if version else None}


def parse_modinfo(text: str) -> "dict | None":
    """The same from `modinfo nvidia`'s 'license:' line (the open module's is 'Dual MIT/GPL') and
    'version:' line."""
    fields = {}
    for line in text.splitlines():
        name, _, value = line.partition(":")
        fields.setdefault(name.strip(), value.strip())
    if not fields.get("license"):
        return None
    return {"flavor": "open" if "GPL" in fields["license"] else "proprietary", "version": fields.get("version") or None}


def _modinfo() -> "str | None":
    binary = shutil.which("modinfo")
    if binary is None:
        return None
    done = subprocess.run([binary, "nvidia"], capture_output=True, text=True, timeout=TIMEOUT_S)
    return done.stdout if done.returncode == 0 else None


def read(root: Path = Path("/"), modinfo=_modinfo) -> dict:
    """{"flavor": "open" | "proprietary" | None, "version": str | None}: both null where no NVIDIA
    module is loaded or nothing tells."""
    text = read_text(root / "proc/driver/nvidia/version")
    found = parse_version_file(text) if text else None
    if found is None:
        printed = modinfo()
        found = parse_modinfo(printed) if printed else None
    return found or {"flavor": None, "version": None}
