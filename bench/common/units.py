"""Numbers as a reader wants them: bytes in binary units, times in a unit that keeps them short."""

from __future__ import annotations

import math


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:g} {unit}" if unit == "B" else f"{n:.4g} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def time_unit(seconds: list) -> tuple[float, str]:
    """(factor, unit) that brings the largest of these times to between 1 and 1000."""
    top = max(seconds, default=1.0)
    for factor, unit in ((1.0, "s"), (1e3, "ms"), (1e6, "µs")):
        if top * factor >= 1:
            return factor, unit
    return 1e9, "ns"


def count(n: int, singular: str, plural: "str | None" = None) -> str:
    """"1 launch", "3 launches": a count with its noun in the right number."""
    return f"{n} {singular if n == 1 else plural or singular + 's'}"


def plain(value: float, digits: int = 3) -> str:
    """value to `digits` significant figures as %g writes it, but never in e-notation (a table cell of
    2.022e+04 is read wrong): 20224.7 -> "20200", 0.0000123 -> "0.0000123"."""
    text = f"{value:.{digits}g}"
    if "e" not in text or not math.isfinite(value):
        return text
    magnitude = math.floor(math.log10(abs(value)))
    fixed = f"{round(value, digits - 1 - magnitude):.{max(0, digits - 1 - magnitude)}f}"
    return fixed.rstrip("0").rstrip(".") if "." in fixed else fixed
