"""What a training configuration holds in a GPU's memory at its peak, estimated before launch from the
model's shapes (torch-free): what the fsdp suite refuses a configuration by, and what its benchmark
sets against the measured peak (torch.cuda.max_memory_allocated: the CUDA context and the
allocator's slack are not in it, so neither are they here; RESERVE_BYTES stands for them when the
estimate is held against a GPU's memory).

The parts, per GPU, for P parameters:
- parameters, gradients, optimizer state: P x the weights' bytes each (AdamW: two moments), over the
  shards: DDP keeps full copies, FSDP divides them by the ranks that shard (all, or a node's under hybrid);
- gathered: what is unsharded while it computes. FSDP full and hybrid: the root unit (embeddings, head:
  FSDP2 keeps the root gathered from forward to backward) and two blocks (the one computing, the one
  prefetched), their unsharded gradients and the reduce-scatter's copy in the reduce dtype; grad_op:
  every unit, from its forward to its backward. DDP under bf16 autocast: the bf16 copy of every
  weight a matmul saves for its backward; without gradient_as_bucket_view its buckets, a second
  copy of the gradients. Accumulating under FSDP without sync keeps every unit's unsharded gradient
  (over 2 or more shards: on one rank the sharded gradient is that gradient);
- activations of one micro-batch: per token and block, the bytes of what autograd saves (counted
  below for each model family and precision), or with checkpointing only each block's input and one
  block recomputed; and the logits with their fp32 loss (12 bytes a logit under bf16, 16 under fp32).

The peak holds the gradients and the activations together only when accumulating (the earlier
micro-batches' gradients stay while the next one's activations are made); in a step of one
micro-batch the backward frees each block's activations as it makes that block's gradients, so
the peak holds the larger of the two. Counting both put one H100's peaks of single-micro-batch
steps 12-30% too high (benchmarks/results/fsdp_one_gpu_h100.md).

Checked on one H200 against the ddp suite's gpt2 at micro-batch 8 (quick): 8.90 GiB estimated,
9.355 GiB measured (-4.9%); benchmarks/fsdp_one_gpu.py sets it against eight more configurations on
one H100, within 10% of each.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from bench.common.units import human_bytes
from bench.models.shapes import GPT_PRESETS, TRANSFORMER_PRESETS, units

RESERVE_BYTES = 1 << 30  # the CUDA context, NCCL's buffers, the caching allocator's slack
STRATEGIES = ("replicated", "full", "grad_op", "hybrid")  # DDP's full copies, then FSDP's shardings
MOST_GPUS_SUGGESTED = 64


@dataclass(frozen=True)
class Setup:
    """What the estimate reads of a training configuration."""

    model: str
    strategy: str  # one of STRATEGIES
    shards: int  # ranks that share each parameter's shards (1 replicated)
    micro_batch: int
    seq_len: int
    precision: str  # bf16 or fp32
    weights_dtype: str = "float32"
    optimizer: str = "adamw"
    checkpointing: bool = False
    accumulating: bool = False  # some global batch takes more than one micro-batch a step
    reduce_dtype: str = "fp32"  # FSDP: the gradients' reduce-scatter
    separate_buckets: bool = False  # DDP over 2+ ranks without gradient_as_bucket_view


@dataclass(frozen=True)
class Estimate:
    """Bytes per GPU at the peak, by part."""

    parameters_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    gathered_bytes: float
    activations_bytes: float
    accumulating: bool = False  # the gradients are held beside the activations (the module's docstring)

    @property
    def total_bytes(self) -> float:
        held = self.parameters_bytes + self.optimizer_bytes + self.gathered_bytes
        if self.accumulating:
            return held + self.gradients_bytes + self.activations_bytes
        return held + max(self.gradients_bytes, self.activations_bytes)

    def parts(self) -> str:
        said = ", ".join(f"{f.name.removesuffix('_bytes')} {human_bytes(getattr(self, f.name))}" for f in fields(self)
                         if f.name.endswith("_bytes"))
        return said if self.accumulating else f"{said}; of gradients and activations the larger, one micro-batch a step"


def _activation_bytes_per_token_and_block(setup: Setup, sharded: bool) -> float:
    """Bytes autograd keeps per token in one block. GPT (d = width): LayerNorm inputs and outputs,
    q, k and v, attention's output and the projection's input, the MLP's 4d up and GELU outputs.
    Llama (d, kv width, f = FFN width): RMSNorm's fp32 input and output, q and the repeated k and v,
    attention's output and o's input, SwiGLU's gate, SiLU, up and product. Under bf16 autocast (DDP)
    the residual stream stays fp32, under FSDP's bf16 mixed precision it is bf16."""
    cfg = TRANSFORMER_PRESETS[setup.model]
    d = cfg.dim
    if setup.precision != "bf16":
        return 4 * (17 * d if setup.model in GPT_PRESETS else 9 * d + 4 * cfg.ffn_dim)
    if setup.model in GPT_PRESETS:
        return (34 if sharded else 38) * d
    return (22 if sharded else 30) * d + 8 * cfg.ffn_dim


def estimate(setup: Setup) -> Estimate:
    cfg = TRANSFORMER_PRESETS[setup.model]
    root, *blocks = units(cfg)
    block = blocks[0]
    total = root + sum(blocks)
    sharded = setup.strategy != "replicated"
    weight = 2 if setup.weights_dtype == "bfloat16" else 4
    compute = 2 if setup.precision == "bf16" else weight  # what a matmul multiplies by
    reduce = 2 if setup.reduce_dtype == "bf16" else 4
    shards = setup.shards if sharded else 1
    optimizer = 2 * weight if setup.optimizer == "adamw" else 0  # Adafactor's factors: under 0.2% of P here
    if sharded:
        # Unsharded parameters; the unsharded gradients of the root (its head's come first in the
        # backward, its embedding's last) and of two blocks, each with its reduce-scatter input.
        weights_gathered = total if setup.strategy == "grad_op" else root + 2 * block
        gathered = weights_gathered * compute + root * compute + 2 * block * (compute + reduce)
        if setup.accumulating and shards > 1:  # on one rank the sharded gradient is the unsharded one
            gathered += total * reduce
    else:
        gathered = (cfg.matmul_params() * 2 if setup.precision == "bf16" and weight == 4 else 0)
        gathered += total * weight if setup.separate_buckets else 0
    tokens = setup.micro_batch * setup.seq_len
    per_block = _activation_bytes_per_token_and_block(setup, sharded) * tokens
    if setup.checkpointing:
        residual = 2 if sharded and setup.precision == "bf16" else 4
        blocks_bytes = cfg.n_layers * residual * cfg.dim * tokens + 2 * per_block
    else:
        blocks_bytes = cfg.n_layers * per_block
    logits = tokens * cfg.vocab_size * (12 if setup.precision == "bf16" else 16)
    return Estimate(
        parameters_bytes=total * weight / shards,
        gradients_bytes=total * weight / shards,
        optimizer_bytes=total * optimizer / shards,
        gathered_bytes=gathered,
        activations_bytes=blocks_bytes + logits,
        accumulating=setup.accumulating,
    )


def fits(need: float, room: float) -> bool:
    return need + RESERVE_BYTES <= room


def refusal(setup: Setup, room: float, *, on_gpu: bool, has: str) -> "str | None":
    """None where the estimate fits `room`; else, to follow what the configuration is: what it needs by
    the estimate, by part, against `has` (room, in words), and what would fit. Ranks on the CPU share
    the host's memory, so sharding over more of them is no remedy there."""
    need = estimate(setup)
    if fits(need.total_bytes, room):
        return None
    found = remedies(setup, room, most_shards=MOST_GPUS_SUGGESTED if on_gpu else 0)
    fix = f"it would fit with {' or '.join(found)}" if found else (
        f"nothing up to {MOST_GPUS_SUGGESTED} GPUs with activation checkpointing at micro_batch 1 fits: choose a smaller model" if on_gpu
        else "not even activation checkpointing at micro_batch 1 fits: choose a smaller model")
    return (f"needs about {human_bytes(need.total_bytes)} per {'GPU' if on_gpu else 'rank'} by the estimate ({need.parts()}) plus "
            f"{human_bytes(RESERVE_BYTES)} for {'CUDA and the allocator' if on_gpu else 'the process'}, {has}; {fix}")


def remedies(setup: Setup, room: float, most_shards: int = MOST_GPUS_SUGGESTED) -> list[str]:
    """What would fit `room`, each with its estimate: checkpointing, micro-batch 1 or both, and the
    fewest GPUs, up to most_shards, to shard over (as it is, or so lean)."""
    lean = replace(setup, checkpointing=True, micro_batch=1)
    smaller = replace(setup, micro_batch=_largest_micro_batch(setup, room))
    changes = [("activation_checkpointing: true", replace(setup, checkpointing=True)),
               (f"micro_batch {smaller.micro_batch}", smaller),
               ("activation_checkpointing: true at micro_batch 1", lean)]
    found = []
    for what, changed in changes:
        need = estimate(changed).total_bytes
        if changed != setup and fits(need, room) and not (changed is lean and found):
            found.append(f"{what} ({human_bytes(need)})")
    strategy = "full" if setup.strategy in ("replicated", "grad_op") else setup.strategy
    wrapper = " (FSDP)" if setup.strategy == "replicated" else ""
    for base, how in ((setup, ""), (lean, " with activation_checkpointing at micro_batch 1")):
        shards = max(2, setup.shards * 2)
        while shards <= most_shards:
            need = estimate(replace(base, strategy=strategy, shards=shards)).total_bytes
            if fits(need, room):
                where = f"{shards} GPUs per node" if strategy == "hybrid" else f"{shards} GPUs"
                return found + [f"sharding {strategy}{wrapper} over {where}{how} ({human_bytes(need)})"]
            shards *= 2
    return found


def _largest_micro_batch(setup: Setup, room: float) -> int:
    """The largest of micro_batch / 2, / 4 ... 1 that fits (1 where none does)."""
    size = setup.micro_batch // 2
    while size > 1 and not fits(estimate(replace(setup, micro_batch=size)).total_bytes, room):
        size //= 2
    return max(size, 1)
