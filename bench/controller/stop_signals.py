"""Ctrl-C, SIGTERM and SIGHUP end a run alike: the agents are ended and the bundle of what
finished is written, marked incomplete with the signal's name.

`timeout`, a batch scheduler's time limit and a dropped SSH session send SIGTERM or SIGHUP,
not SIGINT; each raises `Stop` (a KeyboardInterrupt) in the main thread. Later signals are
ignored while the run winds down, so a second Ctrl-C cannot lose the bundle being written.
"""

from __future__ import annotations

import signal
import threading

NAMES = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP"}
_received: "list[int]" = []


class Stop(KeyboardInterrupt):
    def __init__(self, signum: int) -> None:
        super().__init__(NAMES[signum])
        self.signum = signum


def _on_signal(signum, frame) -> None:
    if _received:
        return  # already winding down
    _received.append(signum)
    raise Stop(signum)


def install() -> None:
    """Before the run starts; only the main thread may set signal handlers (elsewhere Python's own stay)."""
    _received.clear()
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in NAMES:
        signal.signal(signum, _on_signal)


def reason() -> str:
    """The bundle's incomplete_reason: 'interrupted (Ctrl-C)', 'interrupted (SIGTERM)', ..."""
    return f"interrupted ({NAMES[_received[0] if _received else signal.SIGINT]})"


def exit_status() -> int:
    """128 + the signal's number, as a shell reports a process that signal ended: 130, 143, 129."""
    return 128 + (_received[0] if _received else signal.SIGINT)
