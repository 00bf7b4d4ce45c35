"""Test helper, put on PYTHONPATH: the rank listed in DDPBENCH_TEST_KILLED_RANK is killed with SIGKILL
as it starts, as the kernel's out-of-memory killer ends a process."""

import os
import signal

if os.environ.get("RANK") is not None and os.environ.get("RANK") == os.environ.get("DDPBENCH_TEST_KILLED_RANK"):
    os.kill(os.getpid(), signal.SIGKILL)
