"""The switches a user sets in a host's environment to turn a part of the agent off (to measure what
it costs, or what it saves), read alike: unset, or any of the usual spellings of on or off; any
other value is refused, never taken for one of them."""

from __future__ import annotations

import os

from bench.errors import UserError

SHARED_JOBS = "DDPBENCH_SHARED_JOBS"  # off: every launch in processes of its own (to see what sharing saves)
GPU_COUNTERS = "DDPBENCH_GPU_COUNTERS"  # off: no NVML sampler while launches run (to measure what it costs)
TIMELINE = "DDPBENCH_TIMELINE"  # off: no step timeline recorder, its hooks not even installed (to measure what it costs)
SWITCHES = (SHARED_JOBS, GPU_COUNTERS, TIMELINE)
ON, OFF = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def on(name: str, env=os.environ) -> bool:
    """Whether the switch is on: unset, empty or one of ON (any case); off for one of OFF; a UserError else."""
    value = env.get(name, "").strip().lower()
    if value in ("", *ON):
        return True
    if value in OFF:
        return False
    raise UserError(f"{name}={env[name][:40]!r} is neither on nor off; set it to 1 or 0 (or {'/'.join(ON[1:])}, "
                    f"{'/'.join(OFF[1:])}), or unset it")


def check(env, where: str = "the environment") -> None:
    """A UserError, naming `where`, for the first switch in env whose value is neither on nor off."""
    for name in SWITCHES:
        try:
            on(name, env)
        except UserError as err:
            raise UserError(f"{where}: {err}") from None
