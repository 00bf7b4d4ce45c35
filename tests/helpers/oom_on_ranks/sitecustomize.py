"""Test helper, put on PYTHONPATH: in every rank listed in DDPBENCH_TEST_OOM_RANKS the forward pass
of global batch 4 raises torch.cuda.OutOfMemoryError, as a GPU that is out of memory does."""

import os

if os.environ.get("RANK") in os.environ.get("DDPBENCH_TEST_OOM_RANKS", "").split(","):
    import torch

    from bench.agent import models
    from bench.agent.suites import ddp

    ddp.OOM_AGREEMENT_S = 5.0  # the test need not wait a minute for a peer that will never come
    real_build = models.build

    def build(params, accum, device, rank):
        work = real_build(params, accum, device, rank)
        if accum * params.micro_batch * int(os.environ["WORLD_SIZE"]) == 4:
            def out_of_memory(*batch):
                raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
            work.module.forward = out_of_memory
        return work

    ddp.run.__defaults__ = (build,)  # run(ctx, params, emit, build=models.build)
