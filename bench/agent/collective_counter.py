"""The collectives a piece of training runs, counted as they are called: calls and bytes per kind.

Within `counting()`, torch.distributed's all-gather, reduce-scatter and all-reduce entry points are
wrapped, so whatever calls them through the package (FSDP2 does: `dist.all_gather_single`, or
`dist.all_gather_into_tensor` in torch 2.11 and before) is seen with its real tensors. Sizes are
nccl-tests': an all-gather counts its gathered output, a reduce-scatter its full input, an
all-reduce its tensor. A call made from within a counted one (a deprecated name forwarding to its
successor) is not counted twice. Used for one untimed step: the wrapping costs Python time.
"""

from __future__ import annotations

import contextlib
import inspect
import threading
from collections import Counter
from dataclasses import dataclass, field

import torch.distributed as dist

# entry point -> (kind, the argument whose bytes count)
ENTRY_POINTS = {
    "all_gather_single": ("all_gather", "output_tensor"),
    "all_gather_into_tensor": ("all_gather", "output_tensor"),
    "_all_gather_base": ("all_gather", "output_tensor"),
    "reduce_scatter_single": ("reduce_scatter", "input"),
    "reduce_scatter_tensor": ("reduce_scatter", "input"),
    "_reduce_scatter_base": ("reduce_scatter", "input"),
    "all_reduce": ("all_reduce", "tensor"),
}


@dataclass
class Counted:
    calls: Counter = field(default_factory=Counter)  # kind -> calls
    bytes: Counter = field(default_factory=Counter)  # kind -> bytes, nccl-tests' size


@contextlib.contextmanager
def counting():
    """Counted collectives of the calls made inside the block."""
    counted, inside = Counted(), threading.local()
    originals = {name: getattr(dist, name) for name in ENTRY_POINTS if hasattr(dist, name)}

    def counter(name, original):
        kind, argument = ENTRY_POINTS[name]
        signature = inspect.signature(original)

        def counted_call(*args, **kwargs):
            if getattr(inside, "depth", 0) == 0:
                tensor = signature.bind(*args, **kwargs).arguments[argument]
                counted.calls[kind] += 1
                counted.bytes[kind] += tensor.numel() * tensor.element_size()
            inside.depth = getattr(inside, "depth", 0) + 1
            try:
                return original(*args, **kwargs)
            finally:
                inside.depth -= 1

        return counted_call

    for name, original in originals.items():
        setattr(dist, name, counter(name, original))
    try:
        yield counted
    finally:
        for name, original in originals.items():
            setattr(dist, name, original)
