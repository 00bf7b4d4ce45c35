"""nvidia-smi: pure parsers (text in, dicts out) and the runner that produces the text.

Parsers never return a GPU UUID or serial in clear; UUIDs are hashed with `uuid_sha256`.
"""
from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET

TIMEOUT_S = 10
QUERY_XML = ("-q", "-x")
TOPO_MATRIX = ("topo", "-m")
P2P_READ = ("topo", "-p2p", "r")
P2P_WRITE = ("topo", "-p2p", "w")
NVLINK_STATUS = ("nvlink", "-s")

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")
_UNIT_BYTES = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def run(args: tuple) -> str | None:
    """Run `nvidia-smi *args`; None when the binary is absent. A failing run raises."""
    binary = shutil.which("nvidia-smi")
    if binary is None:
        return None
    done = subprocess.run([binary, *args], capture_output=True, text=True, timeout=TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"nvidia-smi {' '.join(args)} exited {done.returncode}: "
                           f"{(done.stdout + done.stderr).strip()[:120]}")
    return done.stdout


def uuid_sha256(uuid: str | None) -> str | None:
    """First 16 hex chars of sha256(UUID): identifies a GPU across runs without storing it."""
    return hashlib.sha256(uuid.encode()).hexdigest()[:16] if uuid else None


def _number(text: str | None) -> float | None:
    """Leading number of '700.00 W', '16x', '1980 MHz'; None for 'N/A' and empty."""
    match = _NUMBER.search(text or "")
    return float(match.group()) if match else None


def _int(text: str | None) -> int | None:
    value = _number(text)
    return None if value is None else int(value)


def _bytes(text: str | None) -> int | None:
    """'143771 MiB' -> bytes."""
    value, unit = _number(text), (text or "").split()[-1:]
    if value is None or not unit or unit[0] not in _UNIT_BYTES:
        return None
    return int(value * _UNIT_BYTES[unit[0]])


def _enabled(text: str | None) -> bool | None:
    """'Enabled' -> True, 'Disabled' -> False, anything else (N/A) -> None."""
    return {"Enabled": True, "Disabled": False}.get(text or "")


def _first(gpu: ET.Element, *paths: str) -> str | None:
    """Text of the first path present and not 'N/A' (tag names moved between driver releases)."""
    for path in paths:
        text = gpu.findtext(path)
        if text is not None and text.strip() not in ("", "N/A"):
            return text.strip()
    return None


def parse_query_xml(text: str) -> dict:
    """`nvidia-smi -q -x` -> {"driver_version", "cuda_driver_version", "gpus": [gpu, ...]}.

    Each gpu has the shape of the fingerprint schema's gpu; compute capability is not in the
    XML and nvlink is filled from `nvidia-smi nvlink -s`, so both are null here.
    """
    root = ET.fromstring(text)
    gpus = []
    for index, gpu in enumerate(root.findall("gpu")):  # listed in nvidia-smi index order
        gpus.append({
            "index": index,
            "name": _first(gpu, "product_name") or "unknown",
            "uuid_sha256": uuid_sha256(_first(gpu, "uuid")),
            "pci_bus_id": _first(gpu, "pci/pci_bus_id") or gpu.get("id"),
            "memory_total_bytes": _bytes(_first(gpu, "fb_memory_usage/total")),
            "pcie": {
                "gen_current": _int(_first(gpu, "pci/pci_gpu_link_info/pcie_gen/current_link_gen")),
                "gen_max": _int(_first(gpu, "pci/pci_gpu_link_info/pcie_gen/max_link_gen")),
                "width_current": _int(_first(gpu, "pci/pci_gpu_link_info/link_widths/current_link_width")),
                "width_max": _int(_first(gpu, "pci/pci_gpu_link_info/link_widths/max_link_width")),
            },
            "power_limit_w": _number(_first(
                gpu, "gpu_power_readings/current_power_limit", "gpu_power_readings/enforced_power_limit",
                "power_readings/enforced_power_limit", "power_readings/power_limit")),
            "max_sm_clock_mhz": _int(_first(gpu, "max_clocks/sm_clock")),
            "max_mem_clock_mhz": _int(_first(gpu, "max_clocks/mem_clock")),
            "compute_capability": None,
            "nvlink": {"active_links": None, "link_speed_gbps": None},
            "bar1_total_bytes": _bytes(_first(gpu, "bar1_memory_usage/total")),
            "persistence_mode": _enabled(_first(gpu, "persistence_mode")),
        })
    return {
        "driver_version": _first(root, "driver_version"),
        "cuda_driver_version": _first(root, "cuda_version"),
        "gpus": gpus,
    }


def _first_matrix(text: str) -> tuple[list[str], dict[str, list[str]]] | None:
    """Columns and GPU rows of the first device matrix in topo output, ANSI codes removed.

    The header is the first line naming GPU<n>; its device columns are the names before
    'CPU Affinity' (or all of them, in topo -p2p). Rows are split on any whitespace, so both
    tab- and space-separated prints parse. The matrix ends at the first line that is not a row,
    which also keeps a capture of several matrices from mixing them.
    """
    columns: list[str] | None = None
    rows: dict[str, list[str]] = {}
    for line in _ANSI.sub("", text).splitlines():
        tokens = line.split()
        if columns is None:
            if any(re.fullmatch(r"GPU\d+", token) for token in tokens):
                columns = tokens[:tokens.index("CPU")] if "CPU" in tokens else tokens
        elif tokens and tokens[0] in columns and tokens[0].startswith("GPU"):
            rows[tokens[0]] = tokens[1:]
        elif rows:
            break
    return (columns, rows) if columns and rows else None


def _cells(columns: list[str], label: str, cells: list[str]) -> dict[str, str]:
    return {column: cell for column, cell in zip(columns, cells) if column != label}


def parse_topo_matrix(text: str) -> dict | None:
    """`nvidia-smi topo -m` -> {"matrix": {"GPU0": {"GPU1": "NV18", ...}}, "cpu_affinity": {...},
    "numa_affinity": {...}}; affinities hold the printed text ('0-31', '0', 'N/A')."""
    parsed = _first_matrix(text)
    if parsed is None:
        return None
    columns, rows = parsed
    width = len(columns)

    def column_after(offset: int) -> dict[str, str] | None:
        found = {label: cells[width + offset] for label, cells in rows.items() if len(cells) > width + offset}
        return found or None

    return {
        "matrix": {label: _cells(columns, label, cells) for label, cells in rows.items()},
        "cpu_affinity": column_after(0),
        "numa_affinity": column_after(1),
    }


def parse_p2p_matrix(text: str) -> dict | None:
    """`nvidia-smi topo -p2p r` (or w) -> {"GPU0": {"GPU1": "OK"}, ...} (OK, NS, CNS, GNS, TNS, U)."""
    parsed = _first_matrix(text)
    if parsed is None:
        return None
    columns, rows = parsed
    return {label: _cells(columns, label, cells) for label, cells in rows.items()}


def parse_nvlink_status(text: str) -> dict[int, dict]:
    """`nvidia-smi nvlink -s` -> {gpu_index: {"active_links": n, "link_speed_gbps": GB/s}}.

    Inactive links print '<inactive>' and are not counted; the speed is the fastest active
    link's, per direction, as nvidia-smi prints it (26.562 GB/s on H100/H200).
    """
    status: dict[int, dict] = {}
    current: dict | None = None
    for line in text.splitlines():
        gpu = re.match(r"GPU (\d+):", line)
        link = re.match(r"\s*Link \d+:\s*([\d.]+) GB/s", line)
        if gpu:
            current = status[int(gpu.group(1))] = {"active_links": 0, "link_speed_gbps": None}
        elif link and current is not None:
            current["active_links"] += 1
            current["link_speed_gbps"] = max(current["link_speed_gbps"] or 0.0, float(link.group(1)))
    return status
