"""Test helper, put on PYTHONPATH: every rank ends with its gloo workers still finishing its last
collectives. All-reduces are in flight when it destroys its process group; then it runs Python
without a thread switch while they complete, so the workers wait for the GIL to drop their tensors,
and it leaves a line in stdout's buffer, whose flush as Python finalizes hands them the GIL."""

import os

if os.environ.get("RANK") is not None:
    import sys
    import time

    import torch
    import torch.distributed as dist

    destroy_process_group = dist.destroy_process_group

    def destroy_with_collectives_in_flight(*args, **kwargs) -> None:
        for _ in range(20):
            dist.all_reduce(torch.ones(1 << 20), async_op=True)
        destroy_process_group(*args, **kwargs)
        sys.setswitchinterval(100)
        print("collectives in flight as the rank ends")
        until = time.monotonic() + 2
        while time.monotonic() < until:
            pass

    dist.destroy_process_group = destroy_with_collectives_in_flight
