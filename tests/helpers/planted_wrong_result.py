"""A rank of a 2-rank gloo job whose all_reduce is wrong on purpose (MAX instead of SUM):
the suite's correctness check must catch it on every rank. Writes OUT_DIR/RANK<r>.txt."""

import sys
from pathlib import Path

import torch
import torch.distributed as dist

from bench.agent.harness import Context
from bench.suites.collectives.ranks import COLLECTIVES, check_result

dist.init_process_group("gloo")
ctx = Context(rank=dist.get_rank(), local_rank=dist.get_rank(), world_size=dist.get_world_size(),
              device=torch.device("cpu"), backend="gloo")
buffers = COLLECTIVES["all_reduce"].make(ctx, 1000, torch.float32, True)
honest = check_result(ctx, buffers, torch.float32, "honest all_reduce")
buffers.run = lambda: dist.all_reduce(buffers.check()[0], op=dist.ReduceOp.MAX)
planted = check_result(ctx, buffers, torch.float32, "planted all_reduce")
Path(sys.argv[1], f"RANK{ctx.rank}.txt").write_text(f"honest={honest!r} planted={planted!r}")
dist.destroy_process_group()
