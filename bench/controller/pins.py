"""The plan's pin (torch, CUDA, NCCL versions) against what a host has."""

from __future__ import annotations

PINNED = ("torch", "cuda", "nccl")


def _components(version: str) -> list[str]:
    """'2.11.0+cu130' -> ['2', '11', '0']: the local part after '+' says how it was built, not which version."""
    return version.split("+")[0].split(".")


def matches(pinned: str, actual: "str | None") -> bool:
    if not actual:
        return False
    want = _components(pinned)
    return _components(actual)[: len(want)] == want


def mismatches(pin: dict, facts: dict) -> list[str]:
    """One line per pinned component the host does not match, e.g. "torch 2.13.0+cpu, the plan pins 2.11"."""
    found = []
    for key in PINNED:
        if key in pin and not matches(pin[key], facts.get(key)):
            actual = facts.get(key) or ("none (a CPU build of torch)" if key in ("cuda", "nccl") else "none")
            found.append(f"{key} {actual}, the plan pins {pin[key]}")
    return found
