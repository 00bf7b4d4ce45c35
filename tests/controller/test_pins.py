"""Version pins: a plan's pins against what a host has."""

from __future__ import annotations

from bench.controller.pins import mismatches


def test_pin_mismatches_compare_leading_version_components():
    facts = {"torch": "2.11.0+cu130", "cuda": "13.0", "nccl": "2.28.9"}
    assert mismatches({"torch": "2.11", "cuda": "13.0", "nccl": "2.28", "fatal": True}, facts) == []
    assert mismatches({"torch": "2.1"}, facts) == ["torch 2.11.0+cu130, the plan pins 2.1"]
    assert mismatches({"nccl": "2.28"}, {"torch": "2.13.0+cpu", "cuda": None, "nccl": None}) == [
        "nccl none (a CPU build of torch), the plan pins 2.28"]
