"""One rank of a job, started by torchrun: `python -m bench.agent.worker LAUNCH.json [LAUNCH.json ...]`,
the job's launches in turn in the same processes and process group.

Rank 0 appends each finished record to its launch's result file as one JSON line, so a
launch that dies halfway keeps what it measured. Local rank 0 marks each phase a launch enters
(bench.common.protocol.Mark), from the process's own start on, so the runner can say where the
launch's time went.
"""

from __future__ import annotations

import time

STARTED_S = time.monotonic()  # before torch is imported: the rank's imports count from here

import datetime  # noqa: E402
import gc  # noqa: E402
import importlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import socket  # noqa: E402
import sys  # noqa: E402
import traceback  # noqa: E402
from typing import NoReturn  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from bench import suites  # noqa: E402
from bench.agent import placement, wake  # noqa: E402
from bench.agent.harness import Context, Marks  # noqa: E402
from bench.common.protocol import LAUNCH_BEGINS, LaunchSpec  # noqa: E402
from bench.common.sampling import Target  # noqa: E402


HOLD_POLL_S = 0.01


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


def launch_imports(spec: LaunchSpec) -> "list[str]":
    """The modules a launch's ranks use: its suite's ranks, and what they import only for some entries."""
    ranks = importlib.import_module(suites.get(spec.suite).ranks_module)
    return [ranks.__name__, *getattr(ranks, "imports", lambda params: ())(spec.params)]


def main(spec_paths: "list[str]") -> None:
    specs = [LaunchSpec.read(path) for path in spec_paths]
    spec = specs[0]  # how the ranks start is the same for every launch of a job
    rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    marks = Marks(spec.marks_path if local_rank == 0 else None)
    marks.at("imports", STARTED_S)
    for module in dict.fromkeys(m for s in specs for m in launch_imports(s)):  # once a job, with the imports
        importlib.import_module(module)
    if spec.hold_path:
        marks.enter("held")
        while not os.path.exists(spec.hold_path):  # the runner ends the job at its timeout_s
            time.sleep(HOLD_POLL_S)
    marks.enter("device")
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
    marks.enter("init")
    # One node's ranks meet in the spec's store file; over several nodes, in torchrun's (env://).
    meeting = {"init_method": f"file://{spec.store_path}", "world_size": world_size, "rank": rank} if spec.store_path else {}
    dist.init_process_group(
        spec.backend,
        **meeting,
        timeout=datetime.timedelta(seconds=max(s.timeout_s for s in specs)),
        device_id=device if device.type == "cuda" else None,
    )
    try:
        for index, spec in enumerate(specs):
            if index:
                marks = Marks(spec.marks_path if local_rank == 0 else None)
            run_launch(index, spec, marks, rank, local_rank, world_size, device, ranks_per_node)
    finally:
        dist.destroy_process_group()


def run_launch(index: int, spec: LaunchSpec, marks: Marks, rank: int, local_rank: int, world_size: int, device: torch.device,
               ranks_per_node: int) -> None:
    """The job's index-th launch: its suite's ranks over its params; what it leaves is freed before the next."""
    marks.enter("other")
    if local_rank == 0:  # NCCL's lines from here on are this launch's (bench.agent.collect.log_parts)
        print(f"{LAUNCH_BEGINS}{index}", flush=True)
    ranks = importlib.import_module(suites.get(spec.suite).ranks_module)
    ctx = Context(rank=rank, local_rank=local_rank, world_size=world_size, device=device, backend=spec.backend,
                  deadline=spec.deadline_from(time.monotonic()), ranks_per_node=ranks_per_node,
                  phase_path=spec.phase_path, marks=marks, target=Target(**spec.sampling) if spec.sampling else None,
                  profiled_records=spec.profiled_records)

    def emit(record: dict) -> None:
        if rank == 0:  # every record of the launch is its suite's: the ranks need not name it
            with open(spec.result_path, "a") as out:
                out.write(json.dumps({"suite": spec.suite, **record}) + "\n")

    ranks.run(ctx, spec.params, emit)
    gc.collect()  # the launch's model and buffers, held in reference cycles, before the next launch's
    if device.type == "cuda":
        torch.cuda.empty_cache()
    marks.end()


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
        main(sys.argv[1:])
    except Exception:
        traceback.print_exc()
        exit_rank(1)
    exit_rank(0)
