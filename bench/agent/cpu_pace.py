"""How fast one core of this host runs the interpreter while a launch runs: what paces an eager step
whose GPU waits on the host launching its kernels. A thread times a Python call (as a module's forward
makes it) every INTERVAL_S; each launch keeps the median, least and most over its span.

On a lent 1x H100 VM the same call took 460 ns and 1,084 ns four minutes apart, with no steal time in
/proc/stat and nothing else running: its neighbours on the physical host take the core's speed, which
the guest cannot see otherwise. Host-paced launches there ran 1.2-1.7x their estimates
(benchmarks/results/pacing_h100.md); this figure says whether a rerun's host had the same pace."""

from __future__ import annotations

import statistics
import threading
import time

INTERVAL_S = 1.0
ROUNDS, CALLS = 3, 5_000  # some 5-15 ms a sample on the machines measured: about 1% of one core


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
    """One call of _Layer, in ns: the least of `rounds` rounds of `calls`, so that a moment another
    thread takes counts as little as it can."""
    layer, best = _Layer(), float("inf")
    for _ in range(rounds):
        x, began = 0, time.perf_counter()
        for _ in range(calls):
            x = layer(x, scale=1) & 1023
        best = min(best, time.perf_counter() - began)
    return round(best / calls * 1e9, 1)


class PaceSampler:
    """`with PaceSampler() as pace: ...` then `pace.span_summary(start_s, end_s)` per launch."""

    def __init__(self, interval_s: float = INTERVAL_S):
        self.interval_s = interval_s
        self.samples: "list[tuple[float, float]]" = []  # (CLOCK_MONOTONIC, ns)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="cpu-pace")

    def __enter__(self) -> "PaceSampler":
        self._thread.start()
        return self

    def _run(self) -> None:
        while True:
            self.samples.append((time.monotonic(), python_call_ns()))
            if self._stop.wait(self.interval_s):
                return

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def span_summary(self, start_s: float, end_s: float) -> "dict | None":
        """The launch's record of its CPU's pace (schema: bundle's launch cpu_pace) over the samples from
        start_s to end_s (CLOCK_MONOTONIC); None where none fell in it."""
        inside = [ns for t, ns in list(self.samples) if start_s <= t <= end_s]
        if not inside:
            return None
        return {"python_call_ns_median": round(statistics.median(inside), 1), "python_call_ns_min": min(inside),
                "python_call_ns_max": max(inside), "samples_count": len(inside), "interval_s": self.interval_s}
