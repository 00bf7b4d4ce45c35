"""Test helper, put on PYTHONPATH: every training step of a rank takes DDPBENCH_TEST_STEP_S seconds
more, as a step of a model far larger than the test's would."""

import os
import time

if os.environ.get("RANK") is not None and os.environ.get("DDPBENCH_TEST_STEP_S"):
    from bench.agent import training

    _step = training.Training.step

    def slow_step(self, communicate: bool = True) -> None:
        _step(self, communicate)
        time.sleep(float(os.environ["DDPBENCH_TEST_STEP_S"]))

    training.Training.step = slow_step
