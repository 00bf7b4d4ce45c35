"""What must match between two hosts' fingerprints for their numbers to be comparable."""

from __future__ import annotations

import re
from dataclasses import dataclass

from bench.common.links import link_summary, pairs_without_p2p
from bench.judging.health import gpu_warnings, machine_concerns

# The machine's concerns that change the path a run's bytes take. A small /dev/shm stops runs
# rather than slowing them, and persistence mode off costs a launch's start, not its timed steps.
COMPARED_CONCERNS = ("acs_on_gpu_path", "numa_split", "iommu_translated")
# Compared only where both fingerprints measured them (older fingerprints did not).
MEASURED_SINCE = frozenset({"health", "pairs_without_p2p", *COMPARED_CONCERNS})


def _pcie(gpus: list, field: str) -> list:
    # The slot's maximum, which the fingerprint reads from the device and system together; the
    # current value drops when an idle GPU trains its link down, so it is only the fallback.
    return sorted((g["pcie"][f"{field}_max"] or g["pcie"][f"{field}_current"] or 0) for g in gpus)


def image_ref(fingerprint: "dict | None") -> "str | None":
    """The image the agent ran in, pinned by digest where the fingerprint knows it."""
    container = (fingerprint or {}).get("container") or {}
    image, digest = container.get("image"), container.get("digest")
    if digest:
        return f"{image.split('@')[0]}@{digest}" if image and digest.startswith("sha256:") else digest
    return image


def profile(fingerprint: dict) -> dict:
    """The fields compared, by name. Without GPUs the suites measure the CPU, so its model counts too."""
    gpus = fingerprint.get("gpus") or []
    link = link_summary(fingerprint)
    nccl = (fingerprint.get("software") or {}).get("nccl")
    fields = {
        "gpu_model": link["gpu"],
        "gpu_count": len(gpus),
        "link_class": link["link_class"],
        "pcie_gen": _pcie(gpus, "gen"),
        "pcie_width": _pcie(gpus, "width"),
        "nccl_major": nccl.split(".")[0] if nccl else None,
        "image_digest": ((fingerprint.get("container") or {}).get("digest")),
    }
    if not gpus:
        fields["cpu_model"] = (fingerprint.get("cpu") or {}).get("model")
    if "health" in fingerprint:
        # The concerns without GPU numbers: a machine whose second GPU is capped differs from one whose first is.
        fields["health"] = sorted({line.split(": ", 1)[1] for line in gpu_warnings(fingerprint)})
    found = machine_concerns(fingerprint)
    fields.update({name: found[name] for name in COMPARED_CONCERNS if name in found})
    if (fingerprint.get("link_load") or {}).get("p2p_access") is not None:
        fields["pairs_without_p2p"] = len(pairs_without_p2p(fingerprint))
    return fields


def differences(original: dict, new: dict, ignore: "frozenset[str]" = frozenset()) -> list[dict]:
    """[{"field", "original", "new"}] for every compared field that differs, in a fixed order."""
    a, b = profile(original), profile(new)
    return [
        {"field": name, "original": a.get(name), "new": b.get(name)}
        for name in dict.fromkeys([*a, *b])
        if name not in ignore and a.get(name) != b.get(name) and (name not in MEASURED_SINCE or (name in a and name in b))
    ]


def said(value) -> str:
    """A field's or a parameter's value in words: "none" for None or an empty list, a list's items joined by commas."""
    if value is None or value == []:
        return "none"
    if isinstance(value, (list, tuple)):
        return ",".join(said(item) for item in value)
    return str(value)


def differs_text(differs: list) -> str:
    """"gpu_model NVIDIA H100 80GB HBM3 -> none; pcie_gen 5,5 -> none": each field that differs, in words."""
    return "; ".join(f"{d['field']} {said(d['original'])} -> {said(d['new'])}" for d in differs)


# What `verify` reads of a host before it runs anything there: its GPUs (`nvidia-smi -L`), whether
# NVLink joins them (`nvidia-smi topo -m`, the matrix the fingerprint reads too), its CPU model and
# its cores (online, as the agent's os.cpu_count() counts them).
# A second or two, against the fingerprint's tens of seconds (its link under load, its gate).
PROBE_SCRIPT = (
    "if command -v nvidia-smi >/dev/null 2>&1; then nvidia-smi -L 2>/dev/null; echo '--- topology'; "
    "nvidia-smi topo -m 2>/dev/null; fi; echo '--- cpu'; grep -m1 '^model name' /proc/cpuinfo; "
    "echo '--- devices'; ls /dev 2>/dev/null | grep -c '^nvidia[0-9]'; echo '--- cores'; getconf _NPROCESSORS_ONLN"
)
PROBE_TIMEOUT_S = 60.0
_GPU_LINE = re.compile(r"^GPU \d+: (.+?) \(UUID")


@dataclass(frozen=True)
class Probe:
    """What the probe found: GPU names (None: not known), their link class, the CPU model, the cores (None: not known)."""

    gpus: "tuple[str, ...] | None"
    link_class: "str | None"
    cpu_model: "str | None"
    cores: "int | None" = None


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
    return Probe(gpus, link, cpu, int(cores) if cores.isdigit() and int(cores) > 0 else None)


def light_profile(fingerprint: dict) -> dict:
    """The fields of profile() the probe can read too."""
    fields = profile(fingerprint)
    return {name: fields[name] for name in ("gpu_model", "gpu_count", "link_class", "cpu_model") if name in fields}


def probe_differences(fingerprint: dict, probe: Probe) -> list[dict]:
    """[{"field", "original", "new"}] of light_profile() against what the probe read; a field it
    could not read is not compared (the fingerprint decides it after the run)."""
    if probe.gpus is None:
        return []
    found = {"gpu_model": " + ".join(sorted(set(probe.gpus))) or None, "gpu_count": len(probe.gpus), "link_class": probe.link_class}
    if not probe.gpus:
        found["cpu_model"] = probe.cpu_model
    original = light_profile(fingerprint)
    return [{"field": name, "original": original.get(name), "new": found[name]} for name in found
            if found[name] is not None and original.get(name) != found[name] and (name != "cpu_model" or name in original)]


def machine_words(gpu_count: int, gpu_model: "str | None", link_class: "str | None", cpu_model: "str | None") -> str:
    """"2 GPUs NVIDIA H100 80GB HBM3 joined by NVLink", "no GPU (a CPU: AMD EPYC 7B13)"."""
    if not gpu_count:
        return f"no GPU (a CPU{': ' + cpu_model if cpu_model else ''})"
    link = {"nvlink": " joined by NVLink", "pcie": " over PCIe"}.get(link_class or "", "")
    return f"{gpu_count} GPU{'s' if gpu_count > 1 else ''} {gpu_model}{link}"
