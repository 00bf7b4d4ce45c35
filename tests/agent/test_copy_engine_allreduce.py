"""The copy-engine all-reduce: where the planner refuses it, and (on a host with 2+ GPUs) that it
averages as NCCL does and trains the same weights under DDP."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from bench.agent.kernel_time import kernel_class
from bench.agent.planning import plan_launches
from bench.common.host import Capabilities
from bench.common.protocol import Placement
from bench.controller.plans import with_defaults
from bench.errors import PlanError
from tests.conftest import REPO

TINY_GPT = {"model": "tiny", "micro_batch": 2, "seq_len": 32, "steps": 4, "warmup_steps": 1, "precision": "fp32",
            "compile": False, "allreduce": "copy_engine"}
CPU_HOST = Capabilities(gpu_count=0, gpu_memory_bytes=0, infiniband=False, logical_cpus=2)
GPU_HOST = Capabilities(gpu_count=2, gpu_memory_bytes=80 << 30, infiniband=False, logical_cpus=16)


def entry(transports: list[str], **params) -> dict:
    return with_defaults({"suites": [{"suite": "ddp", "transports": transports, "world_sizes": [2], "params": {**TINY_GPT, **params}}]})


def test_default_transport_on_a_gpu_host_is_planned():
    assert [l.id for l in plan_launches(entry(["default"]), GPU_HOST)] == ["00-ddp-default-ws2"]


@pytest.mark.parametrize("plan, hardware, nodes, message", [
    (entry(["default"]), CPU_HOST, Placement(),
     "ddp: allreduce copy_engine moves gradients between GPUs, this host has none; use allreduce: nccl"),
    (entry(["default", "p2p_off"]), GPU_HOST, Placement(),
     "ddp: allreduce copy_engine bypasses NCCL's transports, so it cannot measure transport 'p2p_off'; "
     "run that transport with allreduce: nccl"),
    (entry(["default"]), GPU_HOST, Placement(nnodes=2, rendezvous="127.0.0.2:29400"),
     "ddp: allreduce copy_engine runs within one host, not across 2; use allreduce: nccl"),
    (entry(["default"], grad_reduce_dtype="bf16"), GPU_HOST, Placement(),
     "ddp: allreduce copy_engine reduces the gradients in their own dtype; drop grad_reduce_dtype bf16 or use allreduce: nccl"),
])
def test_planner_refuses_copy_engine_where_it_cannot_run(plan, hardware, nodes, message):
    with pytest.raises(PlanError) as refused:
        plan_launches(plan, hardware, nodes)
    assert str(refused.value) == message


@pytest.mark.parametrize("name", [
    # Names torch.profiler gives the copy-engine all-reduce's work on 2x H200 (torch 2.11).
    "Memcpy PtoP (Device -> Device)",
    "Memcpy DtoD (Device -> Device)",
    "c10d::symmetric_memory::put_signal_kernel(unsigned int**, int, int, int, int, unsigned long)",
    "c10d::symmetric_memory::wait_signal_kernel(unsigned int**, int, int, int, int, unsigned long)",
])
def test_copy_engine_work_counts_as_communication(name):
    assert kernel_class(name) == "comm"


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs 2 GPUs of one host")
def test_copy_engine_allreduce_matches_nccl_on_gpus():
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "tests/helpers/copy_engine_check.py"],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO), "NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1"},
        capture_output=True, text=True, timeout=300,
    )
    print(done.stdout)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("averaged as NCCL does, identical on every rank") == 2
    assert done.stdout.count("trains the weights DDP's all-reduce trains") == 2
