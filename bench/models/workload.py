"""The model presets, each built into a Workload: a module whose forward returns the loss, and the
synthetic micro-batches of one step, generated on the device and seeded. The training suites
build their models here; a model takes what it needs (ModelChoice), not a suite's parameters."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, Protocol

import torch
import torch.nn as nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from bench.models import gpt, llama, unet
from bench.models.recompute import checkpoint
from bench.models.shapes import GPT_PRESETS, LLAMA_PRESETS, TRANSFORMER_PRESETS


class ModelChoice(Protocol):
    """What building a workload reads of a suite's parameters."""

    model: str
    micro_batch: int
    seq_len: "int | None"
    seed: int
    weights_dtype: str
    activation_checkpointing: bool


@dataclass
class Workload:
    module: nn.Module  # forward(*micro_batch) -> scalar loss
    micro_batches: list  # one tuple of forward arguments per micro-batch of a step
    tokens_per_sample: "int | None"  # None where tokens mean nothing (images)
    flops_per_sample: float  # training FLOPs (forward + backward), for MFU


def count_training_flops(make_module: Callable[[], nn.Module], micro_batch: tuple) -> float:
    """Training FLOPs (forward + backward) per sample of one micro-batch, as torch's FLOP counter sees them.

    Counted on the meta device (shapes only: no memory, no time) with attention in its math
    form, whose matrix products the counter sees on every device; fused CPU attention it misses.
    """
    with torch.device("meta"):
        module = make_module()
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        module(*(t.to("meta") for t in micro_batch)).backward()
    return counter.get_total_flops() / micro_batch[0].shape[0]


@functools.lru_cache(maxsize=None)
def unet_flops_per_sample(name: str, micro_batch: int) -> float:
    """Counted once per worker and shape: a sweep rebuilds the model for every global batch."""
    meta = torch.device("meta")
    return count_training_flops(lambda: unet.build_module(name), unet.micro_batch(name, micro_batch, meta, None))


WEIGHTS_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def enable_checkpointing(module: nn.Module) -> None:
    if isinstance(module, (gpt.GPT, llama.Llama)):
        module.checkpoint_blocks = True
    else:  # diffusers' own, per resnet and transformer block, through our checkpoint
        module.unet.enable_gradient_checkpointing(lambda block, *args: checkpoint(block.__call__, *args))


def build_module(name: str) -> nn.Module:
    """The preset's module, random weights, on the current default device."""
    if name in GPT_PRESETS:
        return gpt.GPT(GPT_PRESETS[name])
    if name in LLAMA_PRESETS:
        return llama.Llama(LLAMA_PRESETS[name])
    return unet.build_module(name)


def build(params: ModelChoice, accum: int, device: torch.device, rank: int) -> Workload:
    """The preset's model, seeded, and this rank's micro-batches of one step."""
    name, size = params.model, params.micro_batch
    torch.manual_seed(params.seed)
    generator = torch.Generator(device=device).manual_seed(params.seed + rank)
    with device:  # initialised where it runs: billions of parameters are slow to initialise on a CPU
        module = build_module(name)
    weights = WEIGHTS_DTYPES[params.weights_dtype]
    module.to(device=device, dtype=weights)
    if params.activation_checkpointing:
        enable_checkpointing(module)
    if name in TRANSFORMER_PRESETS:
        seq_len = params.seq_len
        tokens = torch.randint(module.cfg.vocab_size, (accum, size, seq_len + 1), device=device, generator=generator)
        batches = [(t[:, :-1].contiguous(), t[:, 1:].contiguous()) for t in tokens]
        return Workload(module, batches, seq_len, float(module.flops_per_token(seq_len) * seq_len))
    batches = [tuple(t.to(weights) if t.is_floating_point() else t for t in unet.micro_batch(name, size, device, generator))
               for _ in range(accum)]
    return Workload(module, batches, None, unet_flops_per_sample(name, size))
