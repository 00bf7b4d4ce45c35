"""Host, CPU, memory and network facts: psutil when present, /proc and /sys otherwise."""
from __future__ import annotations

import hashlib
import os
import platform
import re
import socket
from pathlib import Path

try:
    import psutil
except ImportError:
    psutil = None

SYS = Path("/sys")


def read_text(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def host() -> dict:
    """Hostname as sha256 (first 16 hex chars): tells machines apart without naming them."""
    os_name = None
    for line in (read_text(Path("/etc/os-release")) or "").splitlines():
        if line.startswith("PRETTY_NAME="):
            os_name = line.split("=", 1)[1].strip().strip('"')
    return {
        "hostname_sha256": hashlib.sha256(socket.gethostname().encode()).hexdigest()[:16],
        "kernel": platform.release(),
        "os": os_name,
        "arch": platform.machine(),
    }


def cpu() -> dict:
    model = None
    for line in (read_text(Path("/proc/cpuinfo")) or "").splitlines():
        if line.lower().startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    # (package, core) pairs from sysfs count sockets and physical cores on x86 and arm alike.
    packages, cores = set(), set()
    for topology in SYS.glob("devices/system/cpu/cpu[0-9]*/topology"):
        package, core = read_text(topology / "physical_package_id"), read_text(topology / "core_id")
        if package is not None and core is not None:
            packages.add(package)
            cores.add((package, core))
    cores_physical = psutil.cpu_count(logical=False) if psutil else None
    return {
        "model": model or platform.processor() or None,
        "sockets": len(packages) or None,
        "cores_physical": cores_physical or len(cores) or None,
        "logical_cpus": os.cpu_count() or 1,
        "numa_nodes": len(list(SYS.glob("devices/system/node/node[0-9]*"))) or None,
    }


def memory_total_bytes() -> int | None:
    if psutil:
        return int(psutil.virtual_memory().total)
    match = re.search(r"^MemTotal:\s+(\d+) kB", read_text(Path("/proc/meminfo")) or "", re.M)
    return int(match.group(1)) * 1024 if match else None


def memory_limit_bytes(cgroup: Path = Path("/sys/fs/cgroup")) -> int | None:
    """The memory this process's cgroup may use (a container's --memory, a batch job's allocation),
    where one is set below the machine's: cgroup v2's memory.max, else v1's memory.limit_in_bytes."""
    for path in (cgroup / "memory.max", cgroup / "memory" / "memory.limit_in_bytes"):
        text = read_text(path)
        if text and text.isdigit() and int(text) < 2 ** 60:  # v1 says "no limit" with a page-rounded 2**63
            return int(text)
    return None


def network() -> dict:
    """NICs backed by a device (physical ports and virtual functions; veth, bridges and lo say
    nothing about the machine) with their link speed, and InfiniBand ports with rate and state."""
    nics = []
    for net in sorted((SYS / "class/net").glob("*")):
        if (net / "device").exists():
            speed = read_text(net / "speed")  # unreadable when the link is down; -1 when unknown
            speed_mbps = int(speed) if speed and speed.lstrip("-").isdigit() else None
            nics.append({"name": net.name, "speed_mbps": speed_mbps if speed_mbps and speed_mbps > 0 else None})
    infiniband = []
    for port in sorted(SYS.glob("class/infiniband/*/ports/*")):
        rate = re.match(r"([\d.]+) Gb/sec", read_text(port / "rate") or "")  # '400 Gb/sec (4X NDR)'
        state = read_text(port / "state")  # '4: ACTIVE'
        infiniband.append({
            "device": port.parent.parent.name,
            "port": int(port.name),
            "rate_gbit_s": float(rate.group(1)) if rate else None,
            "state": state.split(":", 1)[-1].strip() if state else None,
        })
    return {"nics": nics, "infiniband": infiniband}


def dev_shm_total_bytes(path: Path = Path("/dev/shm")) -> int | None:
    """The size of the shared-memory filesystem NCCL's SHM transport allocates in (Docker gives a
    container 64 MiB unless told otherwise); None where there is none."""
    try:
        stat = os.statvfs(path)
    except OSError:
        return None
    return stat.f_blocks * stat.f_frsize
