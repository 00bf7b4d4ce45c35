"""A rank that cannot go on ends its whole launch with one line, which the runner reports as the
launch's error instead of torchrun's exit status."""

from __future__ import annotations

import os
import re
import sys
from typing import NoReturn

PREFIX = "ddpbench rank error: "
# The last line of a Python traceback, as a rank prints it (torch may put "[rank0]: " before it).
EXCEPTION_LINE = re.compile(r"^(?:\[rank\d+\]:\s*)?((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt)\b(?::.*)?)$")


def end_launch(message: str) -> NoReturn:
    print(PREFIX + message, file=sys.stderr, flush=True)
    # At once, with no clean-up: the peers wait in a collective that will never complete, and
    # torchrun ends them as soon as it sees this rank gone.
    os._exit(3)


def reported(log_text: str) -> "str | None":
    """The last rank error in a launch's log, if a rank ended the launch."""
    found = [line.split(PREFIX, 1)[1].strip() for line in log_text.splitlines() if PREFIX in line]
    return found[-1] if found else None


def uncaught(log_text: str) -> "str | None":
    """The last exception a rank left uncaught in a launch's log (a traceback's last line), if any."""
    found = [m.group(1).strip() for m in map(EXCEPTION_LINE.match, log_text.splitlines()) if m]
    return found[-1][:300] if found else None
