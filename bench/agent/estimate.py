"""How long a launch will take, before it runs: a cost model per suite, or the launch's own
duration in an earlier run on the same machine.

collectives: per point, (warm-up + timed + graph capture + check) calls of size x busbw factor /
the transport's bus bandwidth, plus a fixed cost per point. copy: the same per point, at the
link's copy bandwidth. ddp: start-up, set-up and compilation once per launch, then per
configuration (warm-up + timed + profiled) steps of FLOPs / (the GPU's dense bf16 peak x an
expected MFU) plus the gradient all-reduce. The figures below were fitted to the 2x H200 (NV18)
runs of issue 13, 1-GPU runs on an H200 and this project's 2-core CI machine
(benchmarks/results/plan_durations.md); they aim within 2x, which is what the run checks (an
ETA off by more than that is said in the log).
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.agent.gpu_peaks import dense_bf16_peak_tflops
from bench.agent.suites.copy import WARMUP_LEAST_S
from bench.agent.suites.ddp import WARMUP_WINDOW, least_warmup_steps
from bench.agent.models import gpt

LAUNCH_START_S = {"gpu": 8.0, "cpu": 5.0}  # torchrun, imports, process group (2 cores: 3-4 s idle, about 10 s under load)
POINT_OVERHEAD_S = {"gpu": 0.05, "cpu": 0.01}  # buffers, graph capture, the check's comparison
CALL_LATENCY_S = {"gpu": 20e-6, "cpu": 300e-6}
# Bus bandwidth (GB/s) an all-reduce reaches on large messages, per transport preset.
GPU_BUSBW_GBPS = {"p2p_off": {5: 25.0, 4: 12.0}, "socket": 3.5, "ib": 20.0, "gloo": 1.8}
NVLINK_BUSBW_GBPS, PCIE_P2P_BUSBW_GBPS = 300.0, {5: 40.0, 4: 20.0}
LOCAL_GBPS = {"gpu": 1000.0, "cpu": 5.0}  # one rank: a copy in memory
PCIE_COPY_GBPS = {5: 55.0, 4: 25.0}  # one-way host<->device copies (copy suite on one H200: 55.4 GB/s)
CPU_GLOO_BUSBW_GBPS = 1.0
# gloo on a GPU host reduces host tensors with one thread a rank (torchrun's OMP_NUM_THREADS=1):
# filling the inputs twice, the expected result and the check cost 27 s per GB of buffer on a 2x
# H200 host (seed002's 1.4 and 5.6 GB points: 43 and 174 s, of which 6 and 22 s in the calls).
# A CPU host's own sweeps are small, and their cost is inside its fitted constants.
GLOO_HOST_BUFFER_S_PER_BYTE = 27e-9

DDP_START_S = {"gpu": 6.0, "cpu": 1.0}  # model built and wrapped, optimizer, data
COMPILE_S_PER_LAYER, COMPILE_BASE_S = 0.9, 5.0  # torch.compile of a GPT, once per launch (H200: gpt2 30 s, gpt2-large 52 s with start-up)
UNET_COMPILE_S = 240.0  # SDXL's UNet on an H200, once per launch (benchmarks/results/sdxl_unet_step_h200x1.md)
GPT_MFU = {"compiled": 0.4, "eager": 0.29}  # gpt2 at micro-batch 8 on one H200 (attention FLOPs counted): 40.7%, eager 28.9%
FP32_OF_BF16_PEAK = 0.5  # TF32 tensor cores: half the bf16 rate on H100/H200 and RTX 3090
UNKNOWN_PEAK_TFLOPS = 100.0
UNET_TRAIN_FLOPS_PER_SAMPLE = {"sdxl-unet": 19e12, "tiny-unet": 2e9}  # forward, backward, recompute
# At micro-batch 2 the UNet's step is bound by launching its kernels (issue 13): eager 8% MFU on one
# H200 (4.10 s at global batch 16), compiled 13% (2.41 s); replayed from CUDA graphs, seed000 on
# 2x H200 reached 16-20% on one GPU and 12-18% on two (global batches 8 to 64).
UNET_MFU = {"compiled": 0.13, "eager": 0.08, "graphed": 0.18}
UNET_PARAMS = {"sdxl-unet": 2.6e9, "tiny-unet": 2e6}
# Once per launch beside DDP_START_S: diffusers imported, the UNet built, its graphs captured
# (seed000 on 2x H200: setup_s 20-22 s).
UNET_SETUP_S = {"gpu": 14.0, "cpu": 2.0}
# A profiled UNet step's trace (some 25,000 kernels a micro-batch) is exported and read after the
# step: on 2x H200 that took 3-4 times the step itself (profile_s 27 s for one 6.6 s step).
UNET_TRACE_STEPS = {"gpu": 3.0, "cpu": 0.0}
STEP_OVERHEAD_S = {"gpu": 0.01, "cpu": 0.01}  # Python, the optimizer's launches
CPU_FLOPS_PER_CORE = 2e10  # what a training step reaches, Python's overhead included


@dataclass(frozen=True)
class Machine:
    """What the cost model needs from the fingerprint."""

    gpu_name: str
    gpu_count: int
    nvlink: bool
    pcie_gen: int
    logical_cpus: int

    @classmethod
    def of(cls, fingerprint: dict) -> "Machine":
        gpus = fingerprint.get("gpus") or []
        first = gpus[0] if gpus else {}
        return cls(
            gpu_name=first.get("name") or "",
            gpu_count=len(gpus),
            nvlink=any((g.get("nvlink") or {}).get("active_links") for g in gpus),
            pcie_gen=min(((g.get("pcie") or {}).get("gen_max") or 4 for g in gpus), default=4),
            logical_cpus=(fingerprint.get("cpu") or {}).get("logical_cpus") or 1,
        )

    @property
    def kind(self) -> str:
        return "gpu" if self.gpu_count else "cpu"


def configurations(suite: str, params: dict, world_size: int, machine: "Machine | None" = None) -> int:
    """How many runs (configuration points) a launch records; the copy suite's depend on the
    machine's GPUs (one process drives them all)."""
    if suite == "ddp":
        return len(params.get("global_batches") or [None])
    if suite == "copy":
        return len(_copy_sweeps(params, machine)) * len(_sizes(params))
    sizes = _sizes(params)
    total = 0
    for op in params["ops"]:
        for _ in params["dtypes"]:
            if op == "sendrecv":
                total += len(params.get("p2p_sizes_bytes") or [params["end_bytes"]]) * world_size * (world_size - 1)
            else:
                total += len(sizes) * (len(set(params["in_place"])) if op in ("all_gather", "reduce_scatter") else 1)
    return total


def launch_seconds(suite: str, preset: str, params: dict, world_size: int, machine: Machine) -> float:
    if suite == "collectives":
        return LAUNCH_START_S[machine.kind] + _collectives_s(preset, params, world_size, machine)
    if suite == "copy":
        return LAUNCH_START_S[machine.kind] + _copy_s(params, machine)
    return LAUNCH_START_S[machine.kind] + _ddp_s(preset, params, world_size, machine)


def _sizes(params: dict) -> list[int]:
    sizes, size = [], params["begin_bytes"]
    while size <= params["end_bytes"]:
        sizes.append(size)
        size *= params["factor"]
    return sizes


def _busbw_gbps(preset: str, world_size: int, machine: Machine) -> float:
    if world_size == 1:
        return LOCAL_GBPS[machine.kind]
    if machine.kind == "cpu":
        return CPU_GLOO_BUSBW_GBPS
    if preset == "default":
        return NVLINK_BUSBW_GBPS if machine.nvlink else PCIE_P2P_BUSBW_GBPS.get(machine.pcie_gen, 10.0)
    figure = GPU_BUSBW_GBPS.get(preset, 5.0)
    return figure.get(machine.pcie_gen, 6.0) if isinstance(figure, dict) else figure


def _collectives_s(preset: str, params: dict, world_size: int, machine: Machine) -> float:
    kind = machine.kind
    graph = kind == "gpu" and params.get("cuda_graph", True) and preset != "gloo"
    calls = params["warmup_iters"] + params["repetitions"] * params["iters"] + 1 + (2 * params["iters"] if graph else 0)
    busbw = _busbw_gbps(preset, world_size, machine) * 1e9
    factor = 2 * (world_size - 1) / world_size if world_size > 1 else 1.0
    total = 0.0
    for op in params["ops"]:
        for _ in params["dtypes"]:
            if op == "sendrecv":
                for size in params.get("p2p_sizes_bytes") or [params["end_bytes"]]:
                    pairs = world_size * (world_size - 1)
                    total += pairs * (calls * (CALL_LATENCY_S[kind] + size / busbw) + POINT_OVERHEAD_S[kind])
                continue
            placements = len(set(params["in_place"])) if op in ("all_gather", "reduce_scatter") else 1
            for size in _sizes(params):
                per_call = CALL_LATENCY_S[kind] + size * factor / busbw
                host_buffers = size * GLOO_HOST_BUFFER_S_PER_BYTE if kind == "gpu" and preset == "gloo" else 0.0
                total += placements * (calls * per_call + POINT_OVERHEAD_S[kind] + host_buffers)
    return total


def _copy_sweeps(params: dict, machine: "Machine | None") -> list[float]:
    """The GB/s a copy reaches, one entry per size sweep (direction, engine, way, GPU or pair) the
    suite runs here: one host-to-host sweep without a GPU (bench/agent/suites/copy.py)."""
    gpus = machine.gpu_count if machine else 0
    if not gpus:
        return [LOCAL_GBPS["cpu"]]
    sweeps = []
    for direction in params["directions"]:
        targets = gpus * (gpus - 1) if direction == "d2d" else gpus
        link_gbps = (NVLINK_BUSBW_GBPS if machine.nvlink else PCIE_P2P_BUSBW_GBPS.get(machine.pcie_gen, 10.0)) \
            if direction == "d2d" else PCIE_COPY_GBPS.get(machine.pcie_gen, 10.0)
        sweeps += [link_gbps] * (targets * len(params["engines"]) * len(params["bidirectional"]))
    return sweeps


def _copy_s(params: dict, machine: Machine) -> float:
    timed_calls = params["repetitions"] * params["iters"] + 1
    kind, total = machine.kind, 0.0
    for gbps in _copy_sweeps(params, machine):
        for size in _sizes(params):
            call_s = CALL_LATENCY_S[kind] + size / (gbps * 1e9)
            total += max(params["warmup_iters"] * call_s, WARMUP_LEAST_S) + timed_calls * call_s + POINT_OVERHEAD_S[kind]
    return total


def _ddp_s(preset: str, params: dict, world_size: int, machine: Machine) -> float:
    kind, model = machine.kind, params["model"]
    compiled = kind == "gpu" and params.get("compile", True)
    profiled = params.get("profile_steps", 3) if kind == "gpu" else 0
    steps = params["steps"] + profiled  # warm-up apart: it depends on the global batch
    batches = params.get("global_batches") or [params["micro_batch"] * params.get("grad_accum", 1) * world_size]
    if kind == "gpu":
        peak = (dense_bf16_peak_tflops(machine.gpu_name) or UNKNOWN_PEAK_TFLOPS) * 1e12
    else:
        peak = CPU_FLOPS_PER_CORE * machine.logical_cpus / world_size
    total = DDP_START_S[kind]
    if model in gpt.PRESETS:
        cfg = gpt.PRESETS[model]
        n_params = 12 * cfg.n_layer * cfg.n_embd ** 2 + cfg.vocab_size * cfg.n_embd
        flops_per_sample = (6 * n_params + 12 * cfg.n_layer * cfg.n_embd * params["seq_len"]) * params["seq_len"]
        precision = params.get("precision", "bf16")
        rate = peak if kind == "cpu" else peak * GPT_MFU["compiled" if compiled else "eager"] * (1.0 if precision == "bf16" else FP32_OF_BF16_PEAK)
        if compiled:
            total += COMPILE_BASE_S + COMPILE_S_PER_LAYER * cfg.n_layer
    else:
        n_params = UNET_PARAMS.get(model, 2.6e9)
        flops_per_sample = UNET_TRAIN_FLOPS_PER_SAMPLE.get(model, 19e12)
        mode = "compiled" if compiled else "graphed" if params.get("cuda_graphs") else "eager"
        rate = peak * UNET_MFU[mode] if kind == "gpu" else peak
        total += UNET_SETUP_S[kind] + (UNET_COMPILE_S if compiled else 0.0)
        steps += profiled * UNET_TRACE_STEPS[kind]
    half = params.get("weights_dtype") == "bfloat16" or params.get("grad_reduce_dtype") == "bf16"
    grad_bytes = n_params * (2 if half else 4)
    allreduce_s = 0.0 if world_size == 1 else grad_bytes * 2 * (world_size - 1) / world_size / (_busbw_gbps(preset, world_size, machine) * 1e9)
    taken = 0  # the launch's global batches train one model in turn
    for batch in batches:
        step_s = batch / world_size * flops_per_sample / rate + allreduce_s + STEP_OVERHEAD_S[kind]
        warmup = _warmup_steps(params, taken, kind == "gpu" and world_size > 1)
        total += (warmup + steps) * step_s
        taken += warmup + steps
    return total


def _warmup_steps(params: dict, steps_taken: int, ddp_on_gpu: bool) -> int:
    """The suite's warm-up when it is steady at once: its least steps, or its WARMUP_WINDOW, up to warmup_max_steps."""
    least = least_warmup_steps(params.get("warmup_steps", 0), steps_taken, ddp_on_gpu)
    return min(max(least, WARMUP_WINDOW), max(least, params.get("warmup_max_steps", 20)))

