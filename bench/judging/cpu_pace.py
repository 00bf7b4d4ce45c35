"""The hosts' CPU pace beside a comparison of host-paced steps: each launch records how fast one core
ran the interpreter while it ran (bench/agent/cpu_pace.py). Host-paced steps follow that pace, so a
rerun whose host ran Python 1.5x slower is slower for its CPU, not its link. Verify and compare say it."""

from __future__ import annotations

import statistics

# Paces this many times apart are said as a difference; closer, as one pace.
SAID_APART = 1.1


def pace_ns(host: "dict | None", launch_ids: "set[str]") -> "float | None":
    """The median Python call (ns) over the launches of `host` with these ids that recorded their pace."""
    paces = [(launch.get("cpu_pace") or {}).get("python_call_ns_median") for launch in (host or {}).get("launches", [])
             if launch["id"] in launch_ids]
    paces = [pace for pace in paces if pace]
    return statistics.median(paces) if paces else None


def pace_words(paces: tuple) -> "str | None":
    """What the two sides' paces (original, new) say about host-paced steps; None where either is unknown."""
    original, new = paces
    if not original or not new:
        return None
    ratio = new / original
    if max(ratio, 1 / ratio) < SAID_APART:
        return f"both hosts' CPUs ran Python at one pace (a call {original:.0f} and {new:.0f} ns)"
    return (f"the new host's CPU ran Python {max(ratio, 1 / ratio):.1f}x {'slower' if ratio > 1 else 'faster'} "
            f"(a call {new:.0f} ns against {original:.0f} ns), which host-paced steps follow")
