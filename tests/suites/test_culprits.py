"""Every refusal names the real culprit: the parameter that asks for too much, the resource that is
short (memory, not time), the kind of host (processes on a CPU host, not GPUs), the file it wanted."""

from __future__ import annotations

import pytest

from bench.agent.planning import plan_launches
from bench.common.host import Capabilities
from bench.controller.plans import check
from bench.errors import PlanError
from tests.support.cli_in_process import ddpbench

TWO_CORES = Capabilities(gpu_count=0, logical_cpus=2, host_memory_bytes=24 << 30)


def refusal(entry: dict, host: Capabilities = TWO_CORES) -> str:
    with pytest.raises(PlanError) as refused:
        plan_launches(check({"name": "t", "timeout_s": 600, "suites": [entry]}, "t"), host)
    return str(refused.value)


def test_a_send_recv_size_past_memory_is_blamed_on_p2p_sizes_bytes():
    said = refusal({"suite": "collectives", "world_sizes": [2], "params": {
        "ops": ["all_reduce", "sendrecv"], "dtypes": ["float32"], "in_place": [True], "begin_bytes": 4096, "end_bytes": 4096,
        "factor": 4, "p2p_sizes_bytes": [16 << 30], "warmup_iters": 1, "iters": 1, "repetitions": 1}})
    assert said.startswith(f"collectives: p2p_sizes_bytes {16 << 30} needs about ") and said.endswith("; lower p2p_sizes_bytes")
    assert "end_bytes" not in said


def test_a_micro_batch_past_memory_is_refused_for_memory_not_time():
    said = refusal({"suite": "ddp", "world_sizes": [1], "params": {
        "model": "tiny", "micro_batch": 65536, "seq_len": 32, "steps": 4, "warmup_steps": 1, "precision": "fp32"}})
    assert said.startswith("ddp: tiny at micro_batch 65536 over 1 rank(s) needs about 98.01 GiB per rank by the estimate ")
    assert "this host's memory (24 GiB) gives each of the 1 rank(s) it runs here 24 GiB; it would fit with micro_batch " in said
    assert "timeout_s" not in said


def test_a_cpu_host_is_never_told_to_shard_over_gpus():
    said = refusal({"suite": "fsdp", "world_sizes": [2], "params": {
        "model": "llama3.1-8b", "seq_len": 1024, "global_batches": [8], "micro_batch": 4, "precision": "bf16", "steps": 2,
        "warmup_steps": 1}})
    assert said.startswith("fsdp: llama3.1-8b with sharding full over 2 ranks at micro_batch 4 needs about ")
    assert "per rank by the estimate" in said and "GPU" not in said
    assert said.endswith("not even activation checkpointing at micro_batch 1 fits: choose a smaller model")


@pytest.mark.parametrize("args, what", [
    (["run", "--hosts", "{folder}"], "a hosts file"), (["run", "--plan", "{folder}"], "a plan"),
    (["validate", "{folder}"], "a plan or hosts file"),
], ids=["hosts", "plan", "validate"])
def test_a_folder_given_for_a_file_is_named_once(tmp_path, args, what):
    done = ddpbench(*(arg.format(folder=tmp_path) for arg in args))
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"error: {tmp_path}: a directory; give the path of {what}"]
