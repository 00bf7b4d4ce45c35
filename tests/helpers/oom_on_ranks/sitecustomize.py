"""Test helper, put on PYTHONPATH: in every rank listed in DDPBENCH_TEST_OOM_RANKS a training step
of global batch 4 raises torch.cuda.OutOfMemoryError, as a GPU that is out of memory does."""

import os

if os.environ.get("RANK") in os.environ.get("DDPBENCH_TEST_OOM_RANKS", "").split(","):
    import torch

    from bench.agent import training

    training.OOM_AGREEMENT_S = 5.0  # the test need not wait a minute for a peer that will never come
    real_step = training.Training.step

    def step(self, communicate=True):
        micro_batch = len(self.work.micro_batches[0][0])
        if self.accum * micro_batch * int(os.environ["WORLD_SIZE"]) == 4:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
        real_step(self, communicate)

    training.Training.step = step
