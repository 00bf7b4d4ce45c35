"""Waiting for something another process does, up to a deadline."""

from __future__ import annotations

import time
from typing import Callable


def wait_until(done: Callable[[], bool], within_s: float, every_s: float = 0.05) -> bool:
    """True as soon as done() is; False when within_s passed first. done() is asked at least once."""
    deadline = time.monotonic() + within_s
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(every_s)
    return True
