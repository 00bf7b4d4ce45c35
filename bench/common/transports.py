"""Transport presets (environment for the launched ranks), what NCCL really used, and the name of
the link a run's bytes crossed.

A preset only asks; NCCL_DEBUG=INFO's "via ..." lines say which link NCCL chose, and a run whose
transport does not match its preset is marked rather than silently mislabelled. The report's
series and the benchmarks' tables label runs with link_name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Preset:
    name: str
    backend: str  # "nccl" or "gloo"
    env: dict = field(default_factory=dict)
    accepts: frozenset = frozenset()  # transport classes NCCL may use under this preset
    needs_infiniband: bool = False


PRESETS = {
    p.name: p
    for p in (
        Preset("default", "nccl", {}, frozenset({"P2P", "SHM", "NET/Socket", "NET/IB", "COLLNET", "NVLS"})),
        Preset("p2p_off", "nccl", {"NCCL_P2P_DISABLE": "1"}, frozenset({"SHM", "NET/Socket", "NET/IB"})),
        Preset(
            "socket",
            "nccl",
            {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1", "NCCL_IB_DISABLE": "1"},
            frozenset({"NET/Socket"}),
        ),
        Preset("ib", "nccl", {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}, frozenset({"NET/IB"}), True),
        Preset("gloo", "gloo"),
    )
}

# Environment every launch gets: NVLink multicast (NVLS) stays off, as the lent GPU machines
# require, and INFO logging is what proves the transport.
BASE_NCCL_ENV = {
    "NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1", "NCCL_DEBUG": "INFO",
}

_VIA = re.compile(r"\bvia (P2P|SHM|NET/\w+|COLLNET\w*|NVLS)(/\S+)?")


def transports_in_log(text: str) -> list[str]:
    """Transport classes named in NCCL_DEBUG=INFO channel lines, e.g. ["P2P"] or ["NET/Socket"], sorted."""
    return sorted({m.group(1) for m in _VIA.finditer(text)})


def transport_details_in_log(text: str) -> list[str]:
    """The full "via ..." forms, e.g. "P2P/CUMEM", "SHM/direct/direct", "NET/Socket/0"."""
    return sorted({m.group(1) + (m.group(2) or "") for m in _VIA.finditer(text)})


def backend_for(preset_name: str, has_cuda: bool) -> str:
    """`default` on a machine without a GPU is gloo: the CPU path of the embedded default."""
    preset = PRESETS[preset_name]
    return "gloo" if preset.backend == "gloo" or not has_cuda else "nccl"


def transport_record(preset_name: str, backend: str, world_size: int, log_text: str) -> dict:
    """What the bundle says about the link a launch used."""
    preset = PRESETS[preset_name]
    if backend == "gloo":
        return {"preset": preset_name, "backend": "gloo", "env": {}, "nccl_used": [], "nccl_via": [], "matches_preset": True}
    used = transports_in_log(log_text)
    # One rank talks to nobody: NCCL opens no channel, so there is nothing to check.
    matches = world_size == 1 or (bool(used) and set(used) <= preset.accepts)
    return {
        "preset": preset_name,
        "backend": "nccl",
        "env": dict(preset.env),
        "nccl_used": used,
        "nccl_via": transport_details_in_log(log_text),
        "matches_preset": matches,
    }


def on_gpu(run: dict) -> bool:
    """Whether a run's ranks computed on GPUs: gloo's ranks train on the CPU, on a GPU host too."""
    return (run.get("transport") or {}).get("backend") != "gloo"


def ranks_label(world_size: int, gpus: bool) -> str:
    """"2 GPUs", "1 GPU"; on the CPU "2 processes", "1 process"."""
    return f"{world_size} GPU{'s' * (world_size != 1)}" if gpus else f"{world_size} process{'es' * (world_size != 1)}"


def link_name(run: dict) -> str:
    """The link a run's bytes crossed, for tables and legends: its preset and the transport NCCL
    used ("default via P2P"), gloo's runs marked, a default launch the P2P gate sent through host
    memory labelled so (a suite that moves bytes past NCCL says so itself: Suite.link_name)."""
    transport = run["transport"]
    name = transport["preset"] if transport["backend"] == "nccl" else f"{transport['preset']} (gloo)"
    if transport["nccl_used"]:
        name += " via " + "+".join(transport["nccl_used"])
    if transport.get("p2p_off_by_gate"):
        name += ", P2P off by the gate"
    return name
