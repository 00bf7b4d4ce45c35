"""Summary statistics of a list of samples (standard library only, shared by agent and controller)."""

from __future__ import annotations

import math
import statistics


def percentile(sorted_samples: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), q in [0, 100]."""
    if len(sorted_samples) == 1:
        return sorted_samples[0]
    pos = (len(sorted_samples) - 1) * q / 100.0
    low = math.floor(pos)
    high = min(low + 1, len(sorted_samples) - 1)
    return sorted_samples[low] + (sorted_samples[high] - sorted_samples[low]) * (pos - low)


def summarize(samples: list[float]) -> dict:
    """median, mean, stdev, cv, p5, p95, min, max and n; stdev and cv are 0 for one sample."""
    if not samples:
        raise ValueError("no samples to summarize")
    ordered = sorted(samples)
    mean = statistics.fmean(ordered)
    stdev = statistics.stdev(ordered) if len(ordered) > 1 else 0.0
    return {
        "n": len(ordered),
        "median": statistics.median(ordered),
        "mean": mean,
        "stdev": stdev,
        "cv": stdev / mean if mean else 0.0,
        "p5": percentile(ordered, 5),
        "p95": percentile(ordered, 95),
        "min": ordered[0],
        "max": ordered[-1],
    }


def metric(samples: list[float]) -> dict:
    """The bundle's form of one metric: the raw samples and their summary."""
    return {"samples": list(samples), "summary": summarize(samples)}
