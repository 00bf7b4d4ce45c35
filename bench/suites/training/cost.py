"""The training suites' cost model, all but their communication: start-up, set-up and compilation once
per launch, then per configuration (warm-up, priming, timed, profiled) steps of FLOPs / (the GPU's dense bf16
peak x an expected MFU); each suite adds what its strategy moves per step (ddp: the gradient
all-reduce; fsdp: all-gathers and reduce-scatters). Fitted as bench/common/cost.py says.

A small eager micro-batch takes longer than its FLOPs say: the host launches its kernels slower than
the GPU runs them, and small matrices use the GPU less. Where bench/common/launch_costs.py measured
a setup's eager micro-batch on this kind of host, no micro-batch as small or smaller is priced
below it, and where that paces it, its sampling stops as a host-paced run's does (bench/common/sampling.py).
Reading a profiled step's trace follows the kernels its micro-batches launch: where the setup's was
measured, it costs that per micro-batch."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Callable

from bench.common import cost
from bench.common.gpu_peaks import dense_bf16_peak_tflops
from bench.common.host import Capabilities
from bench.common.launch_costs import MEASURED
from bench.models.shapes import TRANSFORMER_PRESETS, flops_per_token, num_params
from bench.suites.training import PRIMING_STEPS, WARMUP_WINDOW, TrainingParams, least_warmup_steps
from bench.suites.training.auto import CANDIDATES, HOST_MARGIN

COMPILE_S_PER_LAYER, COMPILE_BASE_S = 0.9, 5.0  # torch.compile of a GPT, once per launch (H200: gpt2 30 s, gpt2-large 52 s with start-up)
# The same on a CPU (inductor's C++ code, built by the host's compiler), once per rank, as on an idle
# machine (a busy one's estimate is stretched: bench.agent.estimate): the tiny GPT (2 layers) took 4 s to
# wrap and 14 s to warm up compiled on this project's 2-core machine while others took 82% of its CPU.
CPU_COMPILE_S_PER_LAYER, CPU_COMPILE_BASE_S = 0.5, 2.5
UNET_COMPILE_S = 240.0  # SDXL's UNet on an H200, once per launch (benchmarks/results/sdxl_unet_step_h200x1.md)
# gpt2 at micro-batch 8 on one H200 (attention FLOPs counted): 40.7%, eager 28.9%; the other shapes
# take the same figures until they are measured.
GPT_MFU = {"compiled": 0.4, "eager": 0.29}
# Eager and GPU-bound (micro-batch 16-32) on one H100: GPT-2 Large 40.1-40.8%, Llama 3.2 1B 31.1-31.7%
# (benchmarks/results/pacing_h100.md). A host-paced step (micro-batch 2) is slower than these price it.
EAGER_MFU = {"gpt2-large": 0.40, "llama3.2-1b": 0.31}
FP32_OF_BF16_PEAK = 0.5  # TF32 tensor cores: half the bf16 rate on H100/H200 and RTX 3090
UNKNOWN_PEAK_TFLOPS = 100.0
UNET_TRAIN_FLOPS_PER_SAMPLE = {"sdxl-unet": 19e12, "tiny-unet": 2e9}  # forward, backward, recompute
# At micro-batch 2 the UNet's step is bound by launching its kernels: eager 8% MFU on one
# H200 (4.10 s at global batch 16), compiled 13% (2.41 s); replayed from CUDA graphs, seed000 on
# 2x H200 reached 16-20% on one GPU and 12-18% on two (global batches 8 to 64).
UNET_MFU = {"compiled": 0.13, "eager": 0.08, "graphed": 0.18}
UNET_PARAMS = {"sdxl-unet": 2.6e9, "tiny-unet": 2e6}
# A UNet's build (diffusers imported, the UNet built) where bench/common/launch_costs.py has not measured
# it on this kind of host (on one H100 it has: sdxl-unet 12.9 s).
UNET_BUILD_S = {"gpu": 14.0, "cpu": 2.0}
# A profiled UNet step's trace (some 25,000 kernels a micro-batch) is exported and read after the
# step: on 2x H200 that took 3-4 times the step itself (profile_s 27 s for one 6.6 s step).
UNET_TRACE_STEPS = {"gpu": 3.0, "cpu": 0.0}
# The profiler's own cost in a launch that profiles, its steps apart: on one H100, CUPTI's set-up 0.02 s,
# its stop 0.13 s, reading 16,500 events 0.14 s (the 6.3 s that torch.profiler's first start took there
# was its import of torch._inductor, which bench.agent.kernel_time does not make).
PROFILER_S = 0.5
STEP_OVERHEAD_S = {"gpu": 0.01, "cpu": 0.01}  # Python, the optimizer's launches
# What a training step reaches on a core of a CPU host (a rank gets the cores the plan's largest world
# size leaves it, 2 ranks for "all"), Python's overhead included: the tiny GPT on the 2-core machine,
# scaled to an idle one (bundle 20261127T094116Z-3acdd6: 39-41 ms a step of 8 samples a rank).
CPU_FLOPS_PER_CORE = 5e10
CPU_RANKS = 2  # the ranks that share a CPU host's cores: its "all" (bench.common.fits.CPU_WORLD_SIZE)


@dataclass(frozen=True)
class Compute:
    """A launch's work apart from communication."""

    once_s: float  # set-up and compilation, once per launch
    sample_s: float  # one sample's forward and backward on one rank
    steps: float  # steps a configuration runs past its warm-up: priming, timed, profiled, the trace's reading
    n_params: float
    micro_batch_floor_s: float = 0.0  # the least one micro-batch's forward and backward takes, where measured
    trace_s: float = 0.0  # the profiled steps' traces read, per micro-batch, where measured


def eager_setup(suite: str, params: dict) -> "str | None":
    """What an eager step's host work (the kernels it launches) depends on, the key of its measured
    micro-batches in bench/common/launch_costs.py: "fsdp full llama3.2-1b checkpointed"; None for a step
    that compiles or replays CUDA graphs (its host work is then another). `params`: a run's or a launch's."""
    if params.get("compile") or params.get("cuda_graphs"):
        return None
    checkpointed = "checkpointed" if params.get("activation_checkpointing") else ""
    return " ".join(part for part in (suite, params.get("sharding"), params["model"], checkpointed) if part)


def measured_setup(suite: str, params: TrainingParams, kind: str) -> dict:
    """What bench/common/launch_costs.py measured of this launch's eager setup on this kind of host: its
    least micro-batch (micro_batch, micro_batch_s) and its profiles' trace (trace_s); {} where none."""
    key = eager_setup(suite, asdict(params))
    return (MEASURED.get(kind, {}).get("eager_micro_batches", {}).get(key) or {}) if key else {}


def compute(suite: str, params: TrainingParams, world_size: int, host: Capabilities) -> Compute:
    kind, model = host.kind, params.model
    compiled = kind == "gpu" and params.compile
    cuda_graphs = getattr(params, "cuda_graphs", False)
    profiled = params.profile_steps if kind == "gpu" else 0
    steps = params.steps + profiled + (PRIMING_STEPS if kind == "gpu" else 0)  # warm-up apart: it depends on the global batch
    if kind == "gpu":
        peak = (dense_bf16_peak_tflops(host.gpu_name) or UNKNOWN_PEAK_TFLOPS) * 1e12
    else:
        peak = CPU_FLOPS_PER_CORE * max(1, host.logical_cpus // max(world_size, CPU_RANKS))
    unet_build_s = None if model in TRANSFORMER_PRESETS else UNET_BUILD_S[kind]
    once = cost.training_build_s(kind, model, unet_build_s) + (PROFILER_S if profiled else 0.0)
    if model in TRANSFORMER_PRESETS:
        cfg = TRANSFORMER_PRESETS[model]
        n_params = num_params(cfg)
        flops_per_sample = flops_per_token(cfg, params.seq_len) * params.seq_len
        mfu = GPT_MFU["compiled"] if compiled else EAGER_MFU.get(model, GPT_MFU["eager"])
        rate = peak if kind == "cpu" else peak * mfu * (1.0 if params.precision == "bf16" else FP32_OF_BF16_PEAK)
        if compiled:
            once += COMPILE_BASE_S + COMPILE_S_PER_LAYER * cfg.n_layers
        elif params.compile:  # on the CPU
            once += CPU_COMPILE_BASE_S + CPU_COMPILE_S_PER_LAYER * cfg.n_layers
    else:
        n_params = UNET_PARAMS.get(model, 2.6e9)
        flops_per_sample = UNET_TRAIN_FLOPS_PER_SAMPLE.get(model, 19e12)
        mode = "compiled" if compiled else "graphed" if cuda_graphs else "eager"
        rate = peak * UNET_MFU[mode] if kind == "gpu" else peak
        once += UNET_COMPILE_S if compiled else 0.0
        steps += profiled * UNET_TRACE_STEPS[kind]
    measured = measured_setup(suite, params, kind)
    # A measured micro-batch bounds those as small or smaller from below.
    floor_s = measured["micro_batch_s"] if measured and params.micro_batch <= measured["micro_batch"] else 0.0
    return Compute(once, flops_per_sample / rate, steps, n_params, floor_s, profiled * measured.get("trace_s", 0.0))


def least_gpu_bound(suite: str, params: TrainingParams, host: Capabilities, world_sizes: "list[int]") -> "int | None":
    """The smallest of auto.CANDIDATES whose compute is auto.HOST_MARGIN x the host's measured time launching
    one micro-batch's kernels (the same kernels at any size); None where that is not measured."""
    launching_s = measured_setup(suite, params, host.kind).get("micro_batch_s")
    if not launching_s:
        return None
    sample_s = min(compute(suite, params, ranks, host).sample_s for ranks in world_sizes)
    return next((size for size in sorted(CANDIDATES) if size * sample_s >= HOST_MARGIN * launching_s), max(CANDIDATES))


def host_paced(work: Compute, micro_batch: int) -> bool:
    """Whether its setup's measured micro-batch, not its FLOPs, paces the step: the host launching its
    kernels (a slower GPU's step is its own FLOPs', and GPU-bound)."""
    return work.micro_batch_floor_s > micro_batch * work.sample_s


@dataclass(frozen=True)
class Priced:
    """A training launch by the cost model: its seconds past its start-up, of them its timed steps, and
    whether the host is expected to pace its steps."""

    seconds: float
    measured_s: float
    host_paced: bool


def priced(params: TrainingParams, world_size: int, host: Capabilities, work: Compute,
           comm_s: Callable[[int], float], synced_on_gpu: bool = False) -> Priced:
    """The launch: its set-up, then each global batch's warm-up and timed steps of compute plus
    comm_s(global batch) of communication a step."""
    kind = host.kind
    total, measured = work.once_s, 0.0
    taken = 0  # the launch's global batches train one model in turn
    for batch in params.batches(world_size) + [batch for batch, _ in params.baseline_batches()]:
        micro_batches = batch / world_size / params.micro_batch
        step_s = micro_batches * max(params.micro_batch * work.sample_s, work.micro_batch_floor_s) + comm_s(batch) + STEP_OVERHEAD_S[kind]
        least = least_warmup_steps(params.warmup_steps, taken, synced_on_gpu)
        warmup = min(max(least, WARMUP_WINDOW), max(least, params.warmup_max_steps))  # steady at once: its least steps, or its window
        total += (warmup + work.steps) * step_s + micro_batches * work.trace_s
        measured += params.steps * step_s
        taken += warmup + work.steps
    return Priced(total, measured, host_paced(work, params.micro_batch))
