"""One rank of one launch, started by torchrun: `python -m bench.agent.worker LAUNCH.json`.

Rank 0 appends each finished record to the launch's result file as one JSON line, so a
launch that dies halfway keeps what it measured.
"""

from __future__ import annotations

import datetime
import importlib
import json
import os
import socket
import sys
import traceback
from typing import NoReturn

import torch
import torch.distributed as dist

from bench import suites
from bench.agent import placement, wake
from bench.agent.harness import Context
from bench.common.protocol import LaunchSpec
from bench.common.sampling import Target


def pin_cpu_rank(spec: LaunchSpec, local_rank: int) -> None:
    """On the CPU every rank gets the threads, and the cores, the launch planned for it: the same
    share whatever the world size, so that a 1-rank baseline is comparable with N ranks."""
    if spec.threads_per_rank:
        torch.set_num_threads(spec.threads_per_rank)
    if spec.cpus_of_local_ranks:
        os.sched_setaffinity(0, spec.cpus_of_local_ranks[local_rank])


def gpu_bus_id(device: torch.device) -> "str | None":
    """The PCI address of a rank's GPU ('0000:81:00.0'), where it has one."""
    if device.type != "cuda":
        return None
    props = torch.cuda.get_device_properties(device)
    return f"{props.pci_domain_id:04x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"


def emulated_node(spec: LaunchSpec, local_rank: int, local_world_size: int) -> tuple[int, int]:
    """(the emulated node of this host's local rank, ranks a node): torchrun's local ranks in blocks."""
    per_node = local_world_size // spec.emulated_nodes
    return local_rank // per_node, per_node


def host_id(node: int) -> str:
    """The NCCL host id of one emulated node: NCCL decides "same node" by it (NCCL_HOSTID replaces its
    hash of the host name and boot id), so ranks with different ids meet over its network path, as
    between hosts. The host name and torchrun's node rank keep the nodes of two hosts (or of two agents
    on one machine) apart."""
    return f"{socket.gethostname()}-{os.environ.get('GROUP_RANK', '0')}-node{node}"


def main(spec_path: str) -> None:
    spec = LaunchSpec.read(spec_path)
    ranks = importlib.import_module(suites.get(spec.suite).ranks_module)
    rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    node, ranks_per_node = emulated_node(spec, local_rank, int(os.environ.get("LOCAL_WORLD_SIZE", world_size)))
    if spec.emulated_nodes > 1 and spec.backend == "nccl":  # before NCCL reads it, at the process group's start
        os.environ["NCCL_HOSTID"] = host_id(node)
    if spec.backend == "nccl":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
        pin_cpu_rank(spec, local_rank)
    placement.write(spec.placement_path, placement.of_rank(local_rank, gpu_bus_id(device)))
    if device.type == "cuda":
        wake.wake([device])
    dist.init_process_group(
        spec.backend,
        timeout=datetime.timedelta(seconds=spec.timeout_s),
        device_id=device if device.type == "cuda" else None,
    )
    ctx = Context(rank=rank, local_rank=local_rank, world_size=world_size, device=device, backend=spec.backend,
                  deadline=spec.deadline_s, ranks_per_node=ranks_per_node,
                  phase_path=spec.phase_path, target=Target(**spec.sampling) if spec.sampling else None)

    def emit(record: dict) -> None:
        if rank == 0:  # every record of the launch is its suite's: the ranks need not name it
            with open(spec.result_path, "a") as out:
                out.write(json.dumps({"suite": spec.suite, **record}) + "\n")

    try:
        ranks.run(ctx, spec.params, emit)
    finally:
        dist.destroy_process_group()


def exit_rank(status: int) -> NoReturn:
    """End the rank's process, its output flushed, without Python's finalization.

    Once DDP or FSDP has run, torch keeps a gloo process group alive past destroy_process_group
    (modules they import hold the default group in default arguments, DTensor's caches hold the
    mesh), so its worker threads are still running while Python finalizes. One that then drops
    the tensors of its last collective needs the GIL, CPython (before 3.14) ends that thread
    with pthread_exit, and the unwinding aborts the rank ("terminate called without an active
    exception") after every record was written, failing the launch."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":
    try:
        main(sys.argv[1])
    except Exception:
        traceback.print_exc()
        exit_rank(1)
    exit_rank(0)
