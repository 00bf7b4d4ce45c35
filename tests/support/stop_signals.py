"""How a test session stops on SIGINT (Ctrl-C) or SIGTERM (`kill`, `make` passing its own on, a CI
runner's cancel). The first raises KeyboardInterrupt, as Ctrl-C does by default: pytest ends the test
that runs and tears down every fixture, and the fixtures end the daemons they started (SIGTERM's
default would end pytest on the spot and leave them all running). While that teardown runs, a
further signal is said and set aside, so that a second Ctrl-C cannot cut it short; SIGKILL can,
and leaves the daemons running. A signal the session was started with ignored (a job put in the
background by a shell without job control ignores SIGINT) stays ignored."""

from __future__ import annotations

import signal
import sys


class StopSignals:
    def __init__(self) -> None:
        self.received: "str | None" = None  # the first signal's name
        self.tearing_down = False  # every test has run: the session's teardown is under way

    def install(self) -> "StopSignals":
        for number in (signal.SIGINT, signal.SIGTERM):
            if signal.getsignal(number) is not signal.SIG_IGN:
                signal.signal(number, self._received)
        return self

    def _received(self, number: int, _frame) -> None:
        name = signal.Signals(number).name
        if self.received is None and not self.tearing_down:
            self.received = name
            raise KeyboardInterrupt(f"{name}: the tests stop here, and the fixtures end the daemons they started")
        self.received = self.received or name
        sys.stderr.write(f"\n{name}: stopping already; the fixtures are ending the daemons the tests started "
                         "(SIGKILL would leave them running)\n")
