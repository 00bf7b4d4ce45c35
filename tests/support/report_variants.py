"""Bundles of other "hosts" made from a real one: a GPU fingerprint, host name, transport and speeds
edited in, samples optionally jittered, then re-sealed. Used by the report tests and by
benchmarks/report_speed.py."""

from __future__ import annotations

import copy
import hashlib
import json
import random
import statistics
from pathlib import Path

from bench.suites.ddp.derived import baselines, derive_scaling
from bench.suites.training import pacing
from bench.bundle import seal
from bench import schemas
from bench.common.run import Run
from bench.common.stats import metric

PLAN = Path(__file__).resolve().parents[1] / "report" / "plan.yaml"


def _gpu(index: int, name: str, capability: str, pcie: tuple, nvlink: tuple) -> dict:
    return {
        "index": index, "name": name, "uuid_sha256": f"{index:016x}", "pci_bus_id": f"00000000:0{index + 1}:00.0",
        "memory_total_bytes": 24 * 2**30,
        "pcie": {"gen_current": pcie[0], "gen_max": pcie[0], "width_current": pcie[1], "width_max": 16},
        "power_limit_w": 350.0, "max_sm_clock_mhz": 2100, "max_mem_clock_mhz": 10501, "compute_capability": capability,
        "nvlink": {"active_links": nvlink[0], "link_speed_gbps": nvlink[1]},
    }


def _pair(cell: str) -> dict:
    return {"GPU0": {"GPU1": cell}, "GPU1": {"GPU0": cell}}


# The rigs of seed 000: 2x RTX 3090 joined by NVLink (4 links of 14.0625 GB/s) and 2x RTX 4090 on
# PCIe 4.0 x4; and the lent 2x H200 (18 links of 26.5625 GB/s).
HARDWARE = {
    "3090-nvlink": {"gpus": [_gpu(i, "NVIDIA GeForce RTX 3090", "8.6", (4, 16), (4, 14.0625)) for i in range(2)], "cell": "NV4"},
    "4090-pcie-x4": {"gpus": [_gpu(i, "NVIDIA GeForce RTX 4090", "8.9", (4, 4), (0, None)) for i in range(2)], "cell": "PHB"},
    "h200-nvlink": {"gpus": [_gpu(i, "NVIDIA H200", "9.0", (5, 16), (18, 26.5625)) for i in range(2)], "cell": "NV18"},
}


def _rescale(found: dict, factor: float, jitter: "random.Random | None") -> dict:
    noise = (lambda: jitter.lognormvariate(0, 0.05)) if jitter else (lambda: 1.0)
    return metric([s * factor * noise() for s in found["samples"]])


def _rebuild_ddp(run: dict, baseline: dict, exposed: float, jitter) -> None:
    noise = (lambda: jitter.lognormvariate(0, 0.05)) if jitter else (lambda: 1.0)
    p, n = run["params"], run["world_size"]
    # The baseline's step at this run's work per rank (its global batch / N, or strong scaling's G, over N).
    compute = statistics.median(baseline["metrics"]["step_time_s"]["samples"]) * p["global_batch"] / n / baseline["params"]["global_batch"]
    original = run["metrics"]["step_time_s"]["samples"]
    steps = [compute * (1 + exposed) * s / statistics.median(original) * noise() for s in original]
    run.pop("warnings", None)  # what the real run's figures drew; the rebuilt ones scale below 100% with exposed communication
    run["metrics"].update(
        step_time_s=metric(steps),
        per_sample_gpu_time_s=metric([t / p["global_batch"] * n for t in steps]),
        samples_per_s=metric([p["global_batch"] / t for t in steps]),
        tokens_per_s=metric([p["global_batch"] * p["seq_len"] / t for t in steps]),
    )
    # The real run's own prediction does not describe the rebuilt numbers.
    run["derived"]["predicted_step_time_s"] = None


def with_gpus(fingerprint: dict, hardware: str) -> None:
    """A CPU host's fingerprint edited into one of HARDWARE's: its GPUs, their topology, NCCL and an image."""
    spec = HARDWARE[hardware]
    fingerprint.update(gpus=copy.deepcopy(spec["gpus"]), gpu_count=2, driver_version="550.54.15", cuda_driver_version="12.4")
    fingerprint["topology"] = {"matrix": _pair(spec["cell"]), "p2p_read": _pair("OK"), "cpu_affinity": None, "numa_affinity": None}
    fingerprint["software"]["nccl"] = "2.21.5"
    fingerprint["container"] = {"image": "ghcr.io/example/ddpbench:1", "digest": "sha256:" + "ab12" * 16, "pin": None}


GPU_BOUND_PACING = {"verdict": "gpu-bound", "gpu_busy_fraction": 0.97, "power_fraction": None, "mfu_fraction": None, "step_cv": None}


def make_variant(bundle: dict, name: str, *, hardware: "str | None" = None, preset: str = "default",
                 nccl_used: tuple = ("P2P",), matches_preset: bool = True, bandwidth: float = 1.0,
                 exposed: "float | None" = None, run_id: "str | None" = None,
                 jitter: "random.Random | None" = None) -> dict:
    """A re-sealed copy of a real bundle as if another host had made it.

    bandwidth multiplies every collective's bandwidth. exposed, where given, rebuilds each
    multi-rank DDP run from its 1-GPU baseline: step time = (the 1-GPU step at its work per GPU) x (1 + exposed),
    keeping the run's own spread, so scaling efficiency is 1 / (1 + exposed) whatever the machine's
    load was when the real run ran. jitter, where given, multiplies every sample by its own noise (5%).
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
        with_gpus(fp, hardware)
        transport.update(backend="nccl", nccl_used=list(nccl_used))
    for launch in host["launches"]:
        launch["preset"] = preset
        launch["transport"] = transport
    views = [Run(run) for run in host["runs"]]
    found = baselines(views)
    for view in views:
        run = view.record
        run["transport"] = transport
        m = run["metrics"]
        if run["suite"] == "collectives":
            for key in ("busbw_gbps", "algbw_gbps"):
                m[key] = _rescale(m[key], bandwidth, jitter)
            for key in ("time_s", "time_max_rank_s"):
                m[key] = _rescale(m[key], 1 / bandwidth, jitter)
        elif run["world_size"] > 1 and exposed is not None:
            _rebuild_ddp(run, found[id(view)].record, exposed, jitter)
        if "pacing" in run:  # a GPU host's step, as its profiled kernels would judge it: GPU-bound
            run["pacing"] = GPU_BOUND_PACING if hardware else pacing.judge(view).as_record()
    derive_scaling(views)
    sealed = seal(doc)
    schemas.validator("bundle").validate(sealed)
    return sealed


def quiet(bundle: dict) -> dict:
    """The bundle as a quiet machine records it: what other users of this shared machine took of its
    CPU is not what these tests judge (a busy run's report marks and keeps apart its figures)."""
    for host in bundle["hosts"]:
        for launch in host["launches"]:
            launch["cpu_taken_by_others_fraction"] = 0.0
    return seal({key: value for key, value in bundle.items() if key != "sha256"})


def write(path: Path, document: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document))
    return path
