"""Run under torchrun on 2+ GPUs of one host: the copy-engine all-reduce against NCCL's.

1. Buckets of awkward sizes, back to back with no host synchronisation between them (so the
   shared staging buffer is reused while peers are still working), average to what NCCL's
   all-reduce gives, and to the same bits on every rank.
2. A few DDP steps with the copy-engine hook train the same weights as DDP's own all-reduce.
3. The profiler's names for its work, which kernel_time classes as communication.

Prints one line per check; exits non-zero on the first failure.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from bench.agent import kernel_time
from bench.agent.copy_engine_allreduce import CopyEngineAllReduce, peer_access_missing

SIZES = [1, 7, 4097, 1_000_003, 2_500_000, 3, 2_500_000]
CAPACITY = 2_000_000  # smaller than the largest bucket: those go in pieces, as DDP's first step does


def check_buckets(rank: int, device: torch.device) -> None:
    reducer = CopyEngineAllReduce(dist.group.WORLD, device, CAPACITY, torch.float32)
    generator = torch.Generator(device=device).manual_seed(1234 + rank)
    buckets = [torch.randn(n, device=device, generator=generator) for n in SIZES * 3]
    expected = [b.clone() for b in buckets]
    with torch.cuda.stream(reducer.stream):
        reducer.stream.wait_stream(torch.cuda.current_stream())
        for bucket in buckets:
            reducer.average_(bucket)
    torch.cuda.current_stream().wait_stream(reducer.stream)
    for bucket in expected:
        dist.all_reduce(bucket)
        bucket.div_(dist.get_world_size())
    for got, want in zip(buckets, expected):
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    flat = torch.cat(buckets)
    gathered = [torch.empty_like(flat) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, flat)
    assert all(torch.equal(gathered[0], g) for g in gathered), "ranks hold different averages"
    print(f"rank {rank}: {len(buckets)} buckets averaged as NCCL does, identical on every rank", flush=True)


def train(device: torch.device, rank: int, copy_engine: bool) -> list[torch.Tensor]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 512)).to(device)
    ddp = DDP(model, device_ids=[device.index], bucket_cap_mb=1, gradient_as_bucket_view=True)
    if copy_engine:
        # A buffer for the 1 MB buckets: DDP's first step, one bucket of every gradient, goes in pieces.
        ddp.register_comm_hook(None, CopyEngineAllReduce(dist.group.WORLD, device, 2048 * 512 + 2048, torch.float32).hook)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    generator = torch.Generator(device=device).manual_seed(99 + rank)
    for _ in range(5):
        loss = ddp(torch.randn(64, 512, device=device, generator=generator)).square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return [p.detach().clone() for p in model.parameters()]


def check_ddp(rank: int, device: torch.device) -> None:
    with_nccl, with_copy_engine = train(device, rank, False), train(device, rank, True)
    for a, b in zip(with_nccl, with_copy_engine):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
    print(f"rank {rank}: DDP with the copy-engine hook trains the weights DDP's all-reduce trains", flush=True)


def report_profiled_names(rank: int, device: torch.device) -> None:
    from torch.profiler import ProfilerActivity, profile

    reducer = CopyEngineAllReduce(dist.group.WORLD, device, 1 << 22, torch.float32)
    bucket = torch.randn(1 << 22, device=device)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        with torch.cuda.stream(reducer.stream):
            reducer.average_(bucket)
        torch.cuda.synchronize(device)
    names = sorted({e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA})
    if rank == 0:
        for name in names:
            print(f"profiled: {kernel_time.kernel_class(name):9s} {name[:110]}", flush=True)


def main() -> None:
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank)
    dist.init_process_group("nccl", device_id=device)
    rank = dist.get_rank()
    missing = peer_access_missing(device, dist.get_world_size())
    assert missing is None, missing
    check_buckets(rank, device)
    check_ddp(rank, device)
    report_profiled_names(rank, device)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
