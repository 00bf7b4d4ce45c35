"""Machine fingerprint: everything needed to judge whether two results are comparable.

`collect()` returns a dict that schema/fingerprint.schema.json describes. It imports only the
standard library, plus pynvml and psutil when they are installed (torch in a child: torch_child.py),
and never raises: a failing probe leaves its field null (or empty) and adds a line to "probe_errors".
"""
from __future__ import annotations

import os
import platform
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from bench.agent.cpu_pace import python_call_ns
from bench.common.timestamps import utc_timestamp

from . import driver_module, environment, iommu, numa, nvidia_smi, nvml, pcie_path, software, system, torch_child

__all__ = ["FINGERPRINT_VERSION", "Collecting", "begin", "collect"]

FINGERPRINT_VERSION = 1


def collect(env: Mapping[str, str] | None = None, root: Path = Path("/")) -> dict:
    """Fingerprint of this machine; `env` (default os.environ) is the environment to report
    and the one that names the container pin file; `root` is where /sys and /proc are read (the
    host's files about its GPUs, the IOMMU, NUMA and the driver's module)."""
    return begin(env, root).finish()


@dataclass
class Collecting:
    """A fingerprint whose torch probes still run in their child (3-7 s: its `import torch`): `fingerprint`
    holds the rest, with their fields empty; finish() waits for the child and fills them in place. A run's
    first ranks may import beside it, but touch no GPU before it has finished (its link probe copies)."""

    fingerprint: dict
    child: "subprocess.Popen | None"
    probe: Callable
    began: float
    finished: bool = False

    def finish(self) -> dict:
        if not self.finished:
            self.finished = True
            fingerprint, errors = self.fingerprint, self.fingerprint["probe_errors"]
            from_torch = (self.probe("torch", lambda: torch_child.result(self.child)) if self.child else None) or {}
            errors.extend(from_torch.get("errors", []))
            loaded = from_torch.get("link_load") or {}
            fingerprint["link_load"] = {key: loaded.get(key) for key in ("pcie_loaded", "p2p_access", "nvlink_loaded")}
            fingerprint["software"].update(from_torch.get("software") or torch_child.NO_TORCH)
            fingerprint["probes"]["duration_s"] = round(time.monotonic() - self.began, 3)
        return self.fingerprint

    def stop(self) -> None:
        """Ends the torch probes' child where the run stopped before it finished them."""
        if not self.finished and self.child is not None:
            self.child.kill()
            self.child.communicate()


def begin(env: Mapping[str, str] | None = None, root: Path = Path("/")) -> Collecting:
    """collect(), its torch probes left running: Collecting.finish() ends them."""
    env = os.environ if env is None else env
    errors: list[str] = []
    durations: dict[str, float] = {}
    began = time.monotonic()

    def probe(name: str, read: Callable, default=None):
        start = time.monotonic()
        try:
            return read()
        except Exception as error:  # noqa: BLE001 - a fingerprint must never stop a run
            errors.append(f"{name}: {type(error).__name__}: {error}"[:200])
            return default
        finally:
            durations[name] = round(durations.get(name, 0.0) + time.monotonic() - start, 3)

    gpu_facts, gpu_source = probe("nvml", lambda: nvml.read(errors)), "nvml"
    if gpu_facts is None:
        gpu_facts = probe("nvidia-smi -q", lambda: _smi(nvidia_smi.QUERY_XML, nvidia_smi.parse_query_xml))
        gpu_source = "nvidia-smi" if gpu_facts else "none"
    gpu_facts = gpu_facts or {"driver_version": None, "cuda_driver_version": None, "gpus": []}
    gpus = gpu_facts["gpus"]
    health = gpu_facts.get("health") or {"source": "none", "gpus": []}
    # torch's probes run in a child beside the others. The link under load needs NVML and torch on a
    # GPU; without them it stays "not measured".
    child = probe("torch", lambda: torch_child.start(link=bool(gpus) and gpu_source == "nvml"))

    topology = {"matrix": None, "p2p_read": None, "p2p_write": None, "cpu_affinity": None, "numa_affinity": None}
    if gpus:  # no GPU, no topology: spares the nvidia-smi calls that could each hang 10 s
        topology.update(probe("nvidia-smi topo -m", lambda: _smi(nvidia_smi.TOPO_MATRIX, nvidia_smi.parse_topo_matrix)) or {})
        topology["p2p_read"] = probe("nvidia-smi topo -p2p r", lambda: _smi(nvidia_smi.P2P_READ, nvidia_smi.parse_p2p_matrix))
        topology["p2p_write"] = probe("nvidia-smi topo -p2p w", lambda: _smi(nvidia_smi.P2P_WRITE, nvidia_smi.parse_p2p_matrix))
        nvlink_status = probe("nvidia-smi nvlink -s", lambda: _smi(nvidia_smi.NVLINK_STATUS, nvidia_smi.parse_nvlink_status))
        if nvlink_status is not None:
            _fill_nvlink(gpus, nvlink_status)

    limit = probe("memory limit", lambda: system.memory_limit(root))
    cpu_default = {"model": None, "identity": None, "sockets": None, "cores_physical": None, "logical_cpus": os.cpu_count() or 1, "numa_nodes": None}
    fingerprint = {
        "fingerprint_version": FINGERPRINT_VERSION,
        "collected_at": utc_timestamp(),
        "host": probe("host", system.host, {"hostname_sha256": None, "kernel": None, "os": None, "arch": None}),
        "cpu": probe("cpu", system.cpu, cpu_default),
        "memory_total_bytes": probe("memory", system.memory_total_bytes),
        "memory_limit_bytes": (limit or (None, None))[0],
        "memory_limit_cgroup": (limit or (None, None))[1],
        "gpus": gpus,
        "gpu_count": len(gpus),
        "driver_version": gpu_facts["driver_version"],
        "cuda_driver_version": gpu_facts["cuda_driver_version"],
        "topology": topology,
        "health": health,
        "link_load": {key: None for key in ("pcie_loaded", "p2p_access", "nvlink_loaded")},
        "network": probe("network", system.network, {"nics": [], "infiniband": []}),
        "software": {"python": platform.python_version(), **torch_child.NO_TORCH},
        "container": probe("container", lambda: software.container(env),
                           {"image": env.get("DDPBENCH_IMAGE") or None, "digest": None, "pin": None}),
        "env": probe("env", lambda: environment.allowed(env), {}),
        # modinfo, the fallback, only where there are GPUs: a CPU host need not start it.
        "kernel_module": probe("kernel module", lambda: driver_module.read(root, **({} if gpus else {"modinfo": lambda: None})),
                               {"flavor": None, "version": None}),
        "pcie_path": probe("pcie path", lambda: pcie_path.read(gpus, root)),
        "iommu": probe("iommu", lambda: iommu.read(gpus, root)),
        "numa": probe("numa", lambda: numa.read(gpus, root)),
        "dev_shm_total_bytes": probe("/dev/shm", lambda: system.dev_shm_total_bytes(root / "dev/shm")),
        "probes": {"gpu_source": gpu_source},
        "probe_errors": errors,
    }
    # How fast the interpreter ran as the plan began; it moves, so each launch records its own (cpu_pace).
    fingerprint["cpu"]["python_call_ns"] = probe("cpu pace", lambda: python_call_ns(rounds=5, calls=50_000))
    fingerprint["probes"].update(duration_s=round(time.monotonic() - began, 3), durations_s=durations)
    return Collecting(fingerprint, child, probe, began)


def _smi(args: tuple, parse: Callable):
    """nvidia-smi's output for args, parsed; None where nvidia-smi is missing."""
    text = nvidia_smi.run(args)
    return None if text is None else parse(text)


def _fill_nvlink(gpus: list[dict], status: dict[int, dict]) -> None:
    """`nvidia-smi nvlink -s` fills what NVML could not tell (e.g. its NVLink calls failed);
    a GPU that it does not list has no active link."""
    for gpu in gpus:
        for key, value in status.get(gpu["index"], {"active_links": 0, "link_speed_gbps": None}).items():
            if gpu["nvlink"][key] is None:
                gpu["nvlink"][key] = value
