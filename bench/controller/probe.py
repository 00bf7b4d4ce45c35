"""What a host has, read in a second or two before anything runs there: its GPUs (`nvidia-smi -L`, their
memory and PCIe generation), whether NVLink joins them (`nvidia-smi topo -m`, the matrix the fingerprint
reads too), its CPU model, its cores (online, as the agent's os.cpu_count() counts them), its memory
(or its cgroup's limit where lower, as the agent's ranks may use it) and its load.
`verify` judges from it what a host can rerun; `run` and `verify` price a plan on it as the host's agent
would (pricing.py). The fingerprint, tens of seconds later, has the last word.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bench.common.host import Capabilities
from bench.controller.errors import HostError
from bench.controller.inventory import Host
from bench.controller.shell import CommandNotFound, LocalShell

PROBE_SCRIPT = (
    "if command -v nvidia-smi >/dev/null 2>&1; then nvidia-smi -L 2>/dev/null; echo '--- topology'; "
    "nvidia-smi topo -m 2>/dev/null; echo '--- gpu memory'; "
    "nvidia-smi --query-gpu=memory.total,memory.used,pcie.link.gen.max --format=csv,noheader,nounits 2>/dev/null; fi; "
    "echo '--- cpu'; grep -m1 '^model name' /proc/cpuinfo; "
    "echo '--- devices'; ls /dev 2>/dev/null | grep -c '^nvidia[0-9]'; echo '--- cores'; getconf _NPROCESSORS_ONLN; "
    "echo '--- load'; cut -d' ' -f1 /proc/loadavg 2>/dev/null; "
    "echo '--- memory'; awk '/^MemTotal:/ {printf \"%.0f\\n\", $2 * 1024}' /proc/meminfo 2>/dev/null; "
    "cat /sys/fs/cgroup/memory.max 2>/dev/null"
)
PROBE_TIMEOUT_S = 60.0
_GPU_LINE = re.compile(r"^GPU \d+: (.+?) \(UUID")
_GPU_MEMORY_LINE = re.compile(r"^\s*(\d+),\s*(\d+),\s*(\d+)\s*$")  # MiB total, MiB used, PCIe generation
MIB = 1 << 20
# What a probe cannot read is not held against a host: cores where unknown, InfiniBand, a GPU's memory.
UNKNOWN_CORES = 1 << 20
UNKNOWN_GPU_MEMORY_BYTES = 1 << 50
# A batch scheduler's runtime runs the agent on the nodes its job gets, not at the host's address:
# those are known once the job runs, and their fingerprints decide.
SCHEDULED_RUNTIMES = frozenset({"slurm"})


@dataclass(frozen=True)
class Probe:
    """What the probe found: GPU names (None: not known), their link class, the CPU model, the cores,
    the 1-minute load average, per GPU its memory (total, used, in bytes) and PCIe generation, and the
    memory its ranks may use, in bytes (None: not known)."""

    gpus: "tuple[str, ...] | None"
    link_class: "str | None"
    cpu_model: "str | None"
    cores: "int | None" = None
    load: "float | None" = None
    gpu_memory: "tuple[tuple[int, int, int], ...] | None" = None
    host_memory_bytes: "int | None" = None

    def capabilities(self) -> "Capabilities | None":
        """What the host's agent would plan and price on, as far as the probe read it (None: its GPUs are
        not known); what it could not read is not held against the host."""
        if self.gpus is None:
            return None
        memory = self.gpu_memory if self.gpu_memory and len(self.gpu_memory) == len(self.gpus) else None
        return Capabilities(
            gpu_count=len(self.gpus), logical_cpus=self.cores or UNKNOWN_CORES, gpu_name=self.gpus[0] if self.gpus else "",
            gpu_memory_bytes=min(total for total, _, _ in memory) if memory else UNKNOWN_GPU_MEMORY_BYTES if self.gpus else 0,
            gpu_memory_free_bytes=min(total - used for total, used, _ in memory) if memory else 0,
            infiniband=True, nvlink=self.link_class == "nvlink",
            pcie_gen=min(gen for _, _, gen in memory) if memory else 4,
            host_memory_bytes=self.host_memory_bytes or 0,
        )


def parse_probe(text: str) -> Probe:
    sections: dict = {"gpus": []}
    current = "gpus"
    for line in text.splitlines():
        if line.startswith("--- "):
            current = line[4:].strip()
            sections[current] = []
        else:
            sections.setdefault(current, []).append(line)
    names = tuple(m.group(1).strip() for m in map(_GPU_LINE.match, sections["gpus"]) if m)
    devices = "".join(sections.get("devices", [])).strip()
    # No GPU listed: none where no /dev/nvidiaN exists either, else not known (a driver without nvidia-smi).
    gpus = names if names or devices == "0" else None
    topology = "\n".join(sections.get("topology", []))
    if gpus is None or not gpus:
        link = None if gpus is None else "none"
    else:
        link = "nvlink" if re.search(r"\bNV\d+\b", topology) else "pcie" if topology.strip() else None
    cpu = next((line.split(":", 1)[1].strip() for line in sections.get("cpu", []) if ":" in line), None)
    cores = "".join(sections.get("cores", [])).strip()
    memory = tuple((int(m[1]) * MIB, int(m[2]) * MIB, int(m[3])) for m in map(_GPU_MEMORY_LINE.match, sections.get("gpu memory", [])) if m)
    # MemTotal, then the cgroup's limit ("max" where it has none): the lower bounds the ranks.
    sizes = [int(line) for line in map(str.strip, sections.get("memory", [])) if line.isdigit() and int(line) > 0]
    return Probe(gpus, link, cpu, int(cores) if cores.isdigit() and int(cores) > 0 else None,
                 _load("".join(sections.get("load", [])).strip()), memory or None, min(sizes, default=None))


def _load(text: str) -> "float | None":
    try:
        load = float(text)
    except ValueError:
        return None
    return load if 0 <= load < float("inf") else None


def probe(host: Host) -> "Probe | None":
    """What the host's machine has, read over its own way in (this machine, or SSH); None where it
    runs elsewhere (a batch scheduler's nodes). A HostError where it cannot be reached."""
    if host.runtime in SCHEDULED_RUNTIMES:
        return None
    try:
        if host.address:
            from bench.controller.ssh import SSHShell  # fabric and paramiko: only for hosts reached over SSH

            shell = SSHShell.connect(host)
        else:
            shell = LocalShell()
        try:
            done = shell.run(["sh", "-c", PROBE_SCRIPT], timeout=PROBE_TIMEOUT_S, what="reading the host's GPUs")
        finally:
            shell.close()
    except CommandNotFound as err:
        raise HostError(str(err)) from None
    return parse_probe(done.stdout)
