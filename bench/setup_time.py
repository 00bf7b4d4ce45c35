"""What `make` says before it sets up the venv: how long that takes on this machine now. `make venv`
runs it with the host's python3 (`python3 -m bench.setup_time VENV GOAL`), before anything is
installed: standard library only.

On the shared 2-core development machine (2026-12-06) the set-up (a venv, torch's CPU build, then
ddpbench's packages from the local index) took 4 min 06 s at a load of 4.3 times its cores and
5 min 58 s at 6.5. pip's work is partly disk and network, so it grows less than in proportion to
the load: about 30 s, plus 50 s for each time the load holds the cores (80 s idle), torch half of it,
which a python3 that has torch spares. The load is read as the agent reads it to stretch a CPU host's
estimates (bench/agent/estimate.py cpu_slowdown).
"""

from __future__ import annotations

import importlib.util
import os
import sys

from bench.common.escape import terminal

FIXED_S = 30
PER_SLOWDOWN_S = 50
SAID_SLOWDOWN = 1.2  # a machine this many times slower than idle says so


def slowdown() -> float:
    """The 1-minute load average over the cores this process may use; at least 1."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        return 1.0
    return max(1.0, load / max(1, len(os.sched_getaffinity(0))))


def announcement(venv: str, goal: str, times: float, has_torch: bool) -> str:
    seconds = (FIXED_S + PER_SLOWDOWN_S * times) / (2 if has_torch else 1)
    said = f"{round(seconds / 60)} min" if seconds >= 90 else f"{round(seconds)} s"
    busy = f" (this CPU {times:.1f}x slower than idle: other processes)" if times >= SAID_SLOWDOWN else ""
    steps = "on this Python's torch" if has_torch else "torch's CPU build"
    return f"make: setting up {venv} once ({steps}, then ddpbench's packages): about {said} here{busy}; then {goal} goes on"


if __name__ == "__main__":
    print(terminal(announcement(sys.argv[1], sys.argv[2], slowdown(), importlib.util.find_spec("torch") is not None)))
