"""Test helper, put on PYTHONPATH: the fingerprint's torch probes (their child process) take
DDPBENCH_TEST_TORCH_PROBES_S seconds more, as on a machine whose first `import torch` is slow."""

import os
import sys
import time

if "bench.agent.fingerprint.torch_child" in sys.orig_argv and os.environ.get("DDPBENCH_TEST_TORCH_PROBES_S"):
    time.sleep(float(os.environ["DDPBENCH_TEST_TORCH_PROBES_S"]))
