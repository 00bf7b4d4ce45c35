"""Host, CPU, memory and network facts: psutil when present, /proc and /sys otherwise."""
from __future__ import annotations

import hashlib
import os
import platform
import posixpath
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


def cpu_identity(cpuinfo: str) -> "str | None":
    """The first processor's vendor, family, model and stepping numbers from /proc/cpuinfo ("GenuineIntel
    family 6 model 143 stepping 8"): the generation behind a model name a VM masks ("Intel(R) Xeon(R)
    Processor"). It does not settle how fast the host launches kernels: on one such VM that moved 2x
    within minutes (launch cpu_pace). None where the CPU does not say (arm)."""
    fields = {}
    for line in cpuinfo.split("\n\n", 1)[0].splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    numbers = [fields.get(key) for key in ("cpu family", "model", "stepping")]
    if not fields.get("vendor_id") or not all(n and n.isdigit() for n in numbers):
        return None
    return "{} family {} model {} stepping {}".format(fields["vendor_id"], *numbers)


def cpu() -> dict:
    model = None
    cpuinfo = read_text(Path("/proc/cpuinfo")) or ""
    for line in cpuinfo.splitlines():
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
        "identity": cpu_identity(cpuinfo),
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


# Where the cgroup hierarchies are mounted when /proc/self/mountinfo does not say: v2's, v1's memory controller's.
DEFAULT_MOUNTS = (("v2", "/", "sys/fs/cgroup"), ("v1", "/", "sys/fs/cgroup/memory"))
LIMIT_FILE = {"v2": "memory.max", "v1": "memory.limit_in_bytes"}


def memory_limit(root: Path = Path("/")) -> "tuple[int, str] | None":
    """(bytes, cgroup) of the tightest memory limit on the cgroup this process runs in (a container's
    --memory, a Slurm job's allocation, a systemd scope) and on every cgroup above it, or None where
    none is set. The cgroup is read from /proc/self/cgroup (v2's, and v1's memory controller's), its
    folder from where /proc/self/mountinfo says the hierarchy is mounted; `root` is where /proc and
    /sys are read (tests give a fake tree)."""
    own = _own_cgroups(read_text(root / "proc/self/cgroup"))
    found = []
    for kind, mount_root, mount_point in _cgroup_mounts(read_text(root / "proc/self/mountinfo")):
        path = own.get(kind)
        if path is None:
            continue
        inside = posixpath.relpath(path, mount_root) if (path + "/").startswith(mount_root.rstrip("/") + "/") else "."
        top = root / mount_point.lstrip("/")
        folder = Path(posixpath.normpath(top / inside))
        if top not in (folder, *folder.parents):  # "..": a path that leaves its mount is none we read
            folder = top
        while True:
            text = read_text(folder / LIMIT_FILE[kind])
            if text and text.isdigit() and int(text) < 2 ** 60:  # v1 says "no limit" with a page-rounded 2**63, v2 "max"
                found.append((int(text), posixpath.normpath(posixpath.join(mount_root, str(folder.relative_to(top))))))
            if folder == top:
                break
            folder = folder.parent
    return min(found, default=None)


def _own_cgroups(text: "str | None") -> dict:
    """{"v2": path, "v1": path of the memory controller} from /proc/self/cgroup; where that file is
    unreadable, the root of each (a process outside any limit reads the same)."""
    if text is None:
        return {"v2": "/", "v1": "/"}
    found = {}
    for line in text.splitlines():
        number, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if number == "0" and controllers == "":
            found["v2"] = path
        elif "memory" in controllers.split(","):
            found["v1"] = path
    return found


def _cgroup_mounts(text: "str | None") -> list:
    """(kind, the hierarchy's path mounted there, mount point) of each cgroup mount in mountinfo."""
    if text is None:
        return list(DEFAULT_MOUNTS)
    found = []
    for line in text.splitlines():
        mount, _, fs = line.partition(" - ")
        fields, fs_fields = mount.split(), fs.split()
        if len(fields) < 5 or len(fs_fields) < 3:
            continue
        if fs_fields[0] == "cgroup2":
            found.append(("v2", fields[3], fields[4]))
        elif fs_fields[0] == "cgroup" and "memory" in fs_fields[2].split(","):
            found.append(("v1", fields[3], fields[4]))
    return found


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
