"""What must match between two hosts' fingerprints for their numbers to be comparable."""

from __future__ import annotations

from bench.common.links import link_summary, pairs_without_p2p
from bench.controller.probe import Probe
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
