"""Real bundles for the report tests: the CPU plan runs once per session (a real torchrun with gloo);
the other "hosts" are edited, re-sealed copies of its bundle (tests/support/report_variants.py)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import cli
from tests.support.report_variants import PLAN, make_variant, quiet, write


@pytest.fixture(scope="session")
def real_bundle(tmp_path_factory) -> dict:
    """The bundle of one real CPU run of tests/report/plan.yaml (gloo, 2 ranks, the tiny GPT)."""
    out = tmp_path_factory.mktemp("real-run")
    done = cli("run", "--plan", PLAN, "--out", out)
    assert done.returncode == 0, done.stdout + done.stderr
    (path,) = out.glob("*/bundle.json")
    return quiet(json.loads(path.read_text()))


@pytest.fixture(scope="session")
def fleet(real_bundle, tmp_path_factory) -> dict:
    """name -> path of a bundle: the real CPU run and edited copies standing for GPU hosts."""
    root = tmp_path_factory.mktemp("fleet")
    docs = {
        "cpu": real_bundle,
        "rig-3090": make_variant(real_bundle, "rig-3090", hardware="3090-nvlink", bandwidth=40, exposed=0.05),
        "rig-4090": make_variant(real_bundle, "rig-4090", hardware="4090-pcie-x4", bandwidth=5, exposed=0.25),
        "rig-4090-p2p_off": make_variant(real_bundle, "rig-4090", hardware="4090-pcie-x4", preset="p2p_off",
                                         nccl_used=("P2P",), matches_preset=False, bandwidth=3, exposed=0.6),
    }
    return {name: write(root / name / "bundle.json", doc) for name, doc in docs.items()}


@pytest.fixture(scope="session")
def fleet_report(fleet, tmp_path_factory):
    """The fleet's report folder (report.md, report.html, the plots), made by `ddpbench report`."""
    out = tmp_path_factory.mktemp("fleet-report")
    done = cli("report", *fleet.values(), "--out", out)
    assert done.returncode == 0, done.stderr
    return out
