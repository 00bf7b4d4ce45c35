"""The ratio of two medians and its confidence interval, from a bootstrap of both sides' samples.

Each side is resampled with replacement (its own sample count), the ratio of the two resampled
medians is taken, and the interval is the central 95% of those ratios. The generator is seeded per
comparison, so the same two bundles always give the same interval.
"""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass

RESAMPLES = 2000
SEED = 0
LEVEL = 0.95
METHOD = (
    f"ratio = new median / original median; {LEVEL:.0%} interval from a bootstrap of the ratio of medians "
    f"({RESAMPLES} resamples of each side's samples, fixed seed {SEED})"
)


@dataclass(frozen=True)
class Ratio:
    value: float
    low: "float | None"  # None when the samples cannot give an interval (a zero in the original's)
    high: "float | None"


def ratio_of_medians(original: list[float], new: list[float]) -> Ratio:
    """new median / original median with its bootstrap interval; the original's median must be > 0."""
    value = statistics.median(new) / statistics.median(original)
    if min(original) <= 0:
        return Ratio(value, None, None)
    rng = random.Random(SEED)
    ratios = sorted(
        statistics.median(rng.choices(new, k=len(new))) / statistics.median(rng.choices(original, k=len(original)))
        for _ in range(RESAMPLES)
    )
    tail = (1 - LEVEL) / 2
    return Ratio(value, ratios[int(tail * RESAMPLES)], ratios[int((1 - tail) * RESAMPLES) - 1])
