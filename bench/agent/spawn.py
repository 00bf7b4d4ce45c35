"""Child processes started so that a stop (SIGINT, SIGTERM) never falls between a child's start and its
parent knowing it: the stop waits for the starts, then acts, and whoever ends the children finds them all.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator

STOPS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def stops_deferred() -> Iterator[None]:
    """Within the block a SIGINT or SIGTERM is held; as the block ends it is raised again, and its handler
    runs then. Off the main thread, where Python runs no signal handler, nothing is held."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list = []
    previous = {sig: signal.signal(sig, lambda signum, frame: caught.append(signum)) for sig in STOPS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
        for signum in caught:
            signal.raise_signal(signum)
