"""How fast one core of this host runs the interpreter: what paces an eager step whose GPU waits on the
host launching its kernels. Lent 1x H100 machines whose model names read alike ran the same host-paced
steps up to 1.5x apart; this figure, taken in a tenth of a second, tells such hosts apart."""

from __future__ import annotations

import time

ROUNDS, CALLS = 5, 50_000


class _Layer:
    """A module's call as torch.nn.Module makes it, in miniature: a hook check, a forward with a keyword."""

    def __init__(self):
        self.weight, self.hooks = 1, {}

    def forward(self, x, scale=1):
        return x + self.weight * scale

    def __call__(self, *args, **kwargs):
        if self.hooks:
            raise AssertionError("no hooks are set")
        return self.forward(*args, **kwargs)


def python_call_ns(rounds: int = ROUNDS, calls: int = CALLS) -> float:
    """One call of _Layer, in ns: the least of `rounds` rounds of `calls`, so that other processes'
    moments on this core count as little as they can."""
    layer, best = _Layer(), float("inf")
    for _ in range(rounds):
        x, began = 0, time.perf_counter()
        for _ in range(calls):
            x = layer(x, scale=1) & 1023
        best = min(best, time.perf_counter() - began)
    return round(best / calls * 1e9, 1)
