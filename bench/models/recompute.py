"""Activation checkpointing as both presets use it."""

from __future__ import annotations

from typing import Callable

import torch.utils.checkpoint


def checkpoint(block: Callable, *args):
    """`block(*args)`, its activations recomputed in the backward pass. Without stashing the RNG
    state: neither preset draws random numbers in its blocks (no dropout), and a CUDA graph being
    captured (cuda_graphs) may not stash it; so the step is the same graphed or not."""
    return torch.utils.checkpoint.checkpoint(block, *args, use_reentrant=False, preserve_rng_state=False)
