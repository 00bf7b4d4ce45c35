"""Test helper, put on PYTHONPATH: the rank listed in DDPBENCH_TEST_RAISING_RANK fails as it imports
its suite's ranks, with an error it leaves uncaught, as a bug in a suite would."""

import os
import sys


class RaisingImport:
    def find_spec(self, name, path=None, target=None):
        if name == "bench.suites.collectives.ranks":
            raise RuntimeError("a bug in the suite")
        return None


if os.environ.get("RANK") is not None and os.environ.get("RANK") == os.environ.get("DDPBENCH_TEST_RAISING_RANK"):
    sys.meta_path.insert(0, RaisingImport())
