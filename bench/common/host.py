"""What a host can do, read once from its fingerprint: what the planner checks a plan against and
what the cost models price a launch on. The suites see a host only through this."""

from __future__ import annotations

import os
from dataclasses import dataclass

from bench.common.units import human_bytes


@dataclass(frozen=True)
class Capabilities:
    gpu_count: int
    gpu_memory_bytes: int = 0  # the smallest GPU's
    logical_cpus: int = 1
    gpu_name: str = ""  # the first GPU's, as CUDA names it
    gpu_memory_free_bytes: int = 0  # the smallest GPU's total less what other processes hold
    host_memory_bytes: int = 0  # what the host lets the ranks use: its memory, or its cgroup's limit where lower
    memory_cgroup: "str | None" = None  # the cgroup whose limit host_memory_bytes is (None: the host's memory; "": not named)
    infiniband: bool = False  # an active InfiniBand port
    nvlink: bool = False  # some GPU has an active NVLink
    pcie_gen: int = 4  # the lowest PCIe generation a GPU's slot supports (4 where unknown)
    nccl_version: "str | None" = None  # the NCCL torch loads ("2.28.9"), None where unknown or absent

    @classmethod
    def of(cls, fingerprint: dict) -> "Capabilities":
        gpus = fingerprint.get("gpus") or []
        total, limit = fingerprint.get("memory_total_bytes"), fingerprint.get("memory_limit_bytes")
        ib = (fingerprint.get("network") or {}).get("infiniband") or []
        used = {h["index"]: h["memory_used_bytes"] for h in (fingerprint.get("health") or {}).get("gpus") or []}
        return cls(
            gpu_count=len(gpus),
            gpu_memory_bytes=min((g.get("memory_total_bytes") or 0 for g in gpus), default=0),
            logical_cpus=(fingerprint.get("cpu") or {}).get("logical_cpus") or os.cpu_count() or 1,
            gpu_name=(gpus[0].get("name") or "") if gpus else "",
            gpu_memory_free_bytes=min(((g.get("memory_total_bytes") or 0) - (used.get(g["index"]) or 0) for g in gpus), default=0),
            host_memory_bytes=min(filter(None, [total, limit]), default=0),
            memory_cgroup=(fingerprint.get("memory_limit_cgroup") or "") if limit and (not total or limit < total) else None,
            infiniband=any((port.get("state") or "").upper().endswith("ACTIVE") for port in ib),
            nvlink=any((g.get("nvlink") or {}).get("active_links") for g in gpus),
            pcie_gen=min(((g.get("pcie") or {}).get("gen_max") or 4 for g in gpus), default=4),
            nccl_version=(fingerprint.get("software") or {}).get("nccl"),
        )

    @property
    def host_memory(self) -> str:
        """What host_memory_bytes is, in words: the memory limit of the cgroup that sets it, or the host's memory."""
        size = human_bytes(self.host_memory_bytes)
        if self.memory_cgroup is None:
            return f"this host's memory ({size})"
        return f"the memory limit of cgroup {self.memory_cgroup} ({size})" if self.memory_cgroup else f"its cgroup's memory limit ({size})"

    @property
    def cuda(self) -> bool:
        return self.gpu_count > 0

    @property
    def kind(self) -> str:
        """"gpu" or "cpu": the cost models keep one set of figures for each."""
        return "gpu" if self.cuda else "cpu"
