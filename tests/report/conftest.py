"""Real bundles for the report tests: the CPU plan runs once per session; other "hosts" are copies
of its bundle with a GPU fingerprint, host name, transport and speeds edited in, then re-sealed."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.agent.stats import metric
from bench.analysis import derive_scaling
from bench.bundle import seal
from bench import schemas

REPO = Path(__file__).resolve().parents[2]
PLAN = Path(__file__).with_name("plan.yaml")


def _gpu(index: int, name: str, pcie: tuple, nvlink: tuple) -> dict:
    return {
        "index": index, "name": name, "uuid_sha256": f"{index:016x}", "pci_bus_id": f"00000000:0{index + 1}:00.0",
        "memory_total_bytes": 24 * 2**30,
        "pcie": {"gen_current": pcie[0], "gen_max": pcie[0], "width_current": pcie[1], "width_max": 16},
        "power_limit_w": 350.0, "max_sm_clock_mhz": 2100, "max_mem_clock_mhz": 10501, "compute_capability": "8.6",
        "nvlink": {"active_links": nvlink[0], "link_speed_gbps": nvlink[1]},
    }


def _pair(cell: str) -> dict:
    return {"GPU0": {"GPU1": cell}, "GPU1": {"GPU0": cell}}


# Two rigs of seed 000: 2x RTX 3090 joined by NVLink (4 links of 14.0625 GB/s), and 2x RTX 4090 on PCIe 4.0 x4.
HARDWARE = {
    "3090-nvlink": {"gpus": [_gpu(i, "NVIDIA GeForce RTX 3090", (4, 16), (4, 14.0625)) for i in range(2)], "cell": "NV4"},
    "4090-pcie-x4": {"gpus": [_gpu(i, "NVIDIA GeForce RTX 4090", (4, 4), (0, None)) for i in range(2)], "cell": "PHB"},
}


def _rescale(found: dict, factor: float) -> dict:
    return metric([s * factor for s in found["samples"]])


def make_variant(bundle: dict, name: str, *, hardware: "str | None" = None, preset: str = "default",
                 nccl_used: tuple = ("P2P",), matches_preset: bool = True, bandwidth: float = 1.0,
                 comm_slowdown: float = 1.0, predicted: bool = False, run_id: "str | None" = None) -> dict:
    """A re-sealed copy of a real bundle as if another host had made it.

    bandwidth multiplies every collective's bandwidth; comm_slowdown multiplies the multi-rank DDP
    step times (so scaling efficiency changes); predicted adds derived.predicted_step_time_s.
    """
    doc = copy.deepcopy(bundle)
    tag = hashlib.sha256(f"{name} {preset}".encode()).hexdigest()
    doc["run_id"] = run_id or doc["run_id"][:-6] + tag[:6]
    host = doc["hosts"][0]
    host["name"], host["labels"] = name, [f"{name} (edited copy of a CPU run)"]
    fp = host["fingerprint"]
    fp["host"]["hostname_sha256"] = hashlib.sha256(name.encode()).hexdigest()[:16]
    transport = {"preset": preset, "backend": "gloo", "env": {}, "nccl_used": [], "nccl_via": [], "matches_preset": matches_preset}
    if hardware:
        spec = HARDWARE[hardware]
        fp.update(gpus=copy.deepcopy(spec["gpus"]), gpu_count=2, driver_version="550.54.15", cuda_driver_version="12.4")
        fp["topology"] = {"matrix": _pair(spec["cell"]), "p2p_read": _pair("OK"), "cpu_affinity": None, "numa_affinity": None}
        fp["software"]["nccl"] = "2.21.5"
        fp["container"] = {"image": "ghcr.io/example/ddpbench:1", "digest": "sha256:" + "ab12" * 16, "pin": None}
        transport.update(backend="nccl", nccl_used=list(nccl_used))
    for launch in host["launches"]:
        launch["preset"] = preset
        launch["transport"] = transport
    for run in host["runs"]:
        run["transport"] = transport
        m = run["metrics"]
        if run["suite"] == "collectives":
            for key in ("busbw_gbps", "algbw_gbps"):
                m[key] = _rescale(m[key], bandwidth)
            for key in ("time_s", "time_max_rank_s"):
                m[key] = _rescale(m[key], 1 / bandwidth)
        elif run["world_size"] > 1:
            for key in ("step_time_s", "per_sample_gpu_time_s"):
                m[key] = _rescale(m[key], comm_slowdown)
            for key in ("samples_per_s", "tokens_per_s"):
                m[key] = _rescale(m[key], 1 / comm_slowdown)
    derive_scaling(host["runs"])
    if predicted:
        for run in host["runs"]:
            if run["suite"] == "ddp" and run["world_size"] > 1:
                # A made-up prediction a little under the measured median: the gap is the unexplained overhead.
                run["derived"]["predicted_step_time_s"] = run["metrics"]["step_time_s"]["summary"]["median"] * 0.8
    sealed = seal(doc)
    schemas.validator("bundle").validate(sealed)
    return sealed


def write(path: Path, document: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document))
    return path


@pytest.fixture(scope="session")
def real_bundle(tmp_path_factory) -> dict:
    """The bundle of one real CPU run of tests/report/plan.yaml (gloo, 2 ranks, the tiny GPT)."""
    out = tmp_path_factory.mktemp("real-run")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "bench", "run", "--plan", str(PLAN), "--out", str(out)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    (path,) = out.glob("*/bundle.json")
    return json.loads(path.read_text())


@pytest.fixture(scope="session")
def fleet(real_bundle, tmp_path_factory) -> dict:
    """name -> path of a bundle: the real CPU run and edited copies standing for GPU hosts."""
    root = tmp_path_factory.mktemp("fleet")
    docs = {
        "cpu": real_bundle,
        "rig-3090": make_variant(real_bundle, "rig-3090", hardware="3090-nvlink", bandwidth=40, comm_slowdown=0.6, predicted=True),
        "rig-4090": make_variant(real_bundle, "rig-4090", hardware="4090-pcie-x4", bandwidth=5, comm_slowdown=0.9, predicted=True),
        "rig-4090-p2p_off": make_variant(real_bundle, "rig-4090", hardware="4090-pcie-x4", preset="p2p_off",
                                         nccl_used=("P2P",), matches_preset=False, bandwidth=3, comm_slowdown=1.1,
                                         predicted=True),
    }
    return {name: write(root / name / "bundle.json", doc) for name, doc in docs.items()}
