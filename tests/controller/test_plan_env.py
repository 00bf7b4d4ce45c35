"""A plan entry's env may tune NCCL but not undo what its runs are labelled with: the keys its
transport presets set (derived from the presets: on one node their env, over several their
between_env), NCCL's log (the evidence of the link), NVLink multicast, and NCCL's RAS listener.
In-process, as `validate` and `run` check a plan (bench.controller.plans.check)."""

from __future__ import annotations

import pytest

from bench.common.transports import PRESETS
from bench.controller.plans import check
from bench.errors import UserError

LEAN = {"ops": ["all_reduce"], "dtypes": ["float32"], "in_place": [True], "begin_bytes": 4096, "end_bytes": 4096, "factor": 2,
        "warmup_iters": 0, "iters": 1, "repetitions": 2}


def plan(env: dict, transports: list, **axes) -> dict:
    return {"name": "p", "suites": [{"suite": "collectives", "params": LEAN, "transports": transports, "env": env, **axes}]}


def refusal(document: dict) -> str:
    with pytest.raises(UserError) as refused:
        check(document, "p.yaml")
    return str(refused.value)


@pytest.mark.parametrize("name, preset", sorted((name, preset) for preset in PRESETS for name in PRESETS[preset].env))
def test_every_key_a_preset_sets_may_not_be_set_otherwise(name, preset):
    value = PRESETS[preset].env[name]
    other = "0" if value != "0" else "1"
    assert refusal(plan({name: other}, [preset])) == (
        f"p.yaml: field suites[0].env: {name}={other} undoes transport preset {preset!r}, which sets {name}={value}: its runs "
        f"would cross another link than the one they are labelled with; remove {name} from env (the entry's transports choose the link)")
    check(plan({name: value}, [preset]), "p.yaml")  # the preset's own value changes nothing


def test_a_key_the_preset_sets_on_one_node_only_is_free_over_emulated_nodes():
    """socket over two emulated nodes asks only for the network between them; inside each, NCCL keeps P2P."""
    check(plan({"NCCL_P2P_DISABLE": "0"}, ["socket"], world_sizes=[2], nodes=2), "p.yaml")
    assert "undoes transport preset 'socket'" in refusal(plan({"NCCL_IB_DISABLE": "0"}, ["socket"], world_sizes=[2], nodes=2))


def test_a_key_of_a_preset_in_the_gpu_block_is_judged_there():
    document = plan({"NCCL_SHM_DISABLE": "0"}, ["default"])
    document["suites"][0]["gpu"] = {"transports": ["socket"]}
    assert "NCCL_SHM_DISABLE=0 undoes transport preset 'socket'" in refusal(document)


@pytest.mark.parametrize("env, says", [
    ({"NCCL_DEBUG": "WARN"}, "NCCL_DEBUG=WARN changes NCCL's log (NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,BOOTSTRAP,ENV,TUNING on every "
                             "launch), whose lines are the evidence of the link, nodes and algorithm each run used; remove it from env"),
    ({"NCCL_DEBUG_SUBSYS": "INIT"}, "NCCL_DEBUG_SUBSYS=INIT changes NCCL's log"),
    ({"NCCL_DEBUG_TIMESTAMP_LEVELS": "WARN"}, "NCCL_DEBUG_TIMESTAMP_LEVELS=WARN changes NCCL's log"),
    ({"NCCL_NVLS_ENABLE": "1"}, "NCCL_NVLS_ENABLE=1 turns on NVLink multicast (NVLS), which every launch keeps off "
                                "(NCCL_NVLS_ENABLE=0); remove it from env"),
    ({"TORCH_SYMM_MEM_DISABLE_MULTICAST": "0"}, "TORCH_SYMM_MEM_DISABLE_MULTICAST=0 turns on NVLink multicast"),
    ({"NCCL_RAS_ADDR": "0.0.0.0:28028"}, "'NCCL_RAS_ADDR' is not allowed here: a plan may set only NCCL_* tuning (no file, plugin, "
                                         "path, library or address names; no RAS_*, which listens on a network address)"),
    ({"NCCL_RAS_TIMEOUT_FACTOR": "2"}, "'NCCL_RAS_TIMEOUT_FACTOR' is not allowed here"),
    ({"NCCL_IB_ADDR_FAMILY": "AF_INET6"}, "'NCCL_IB_ADDR_FAMILY' is not allowed here"),
])
def test_an_env_that_blinds_the_evidence_or_opens_a_listener_is_refused_naming_the_key(env, says):
    assert says in refusal(plan(env, ["default"])).replace("p.yaml: field suites[0].env: ", "")


def test_nccl_tuning_and_the_evidences_own_values_are_taken():
    check(plan({"NCCL_DEBUG": "INFO", "NCCL_NVLS_ENABLE": "0", "NCCL_BUFFSIZE": "4194304", "NCCL_P2P_LEVEL": "NVL",
                "NCCL_SOCKET_IFNAME": "=lo"}, ["default", "p2p_off"]), "p.yaml")


def test_a_thread_count_that_is_no_number_is_refused_in_one_line():
    said = refusal(plan({"OMP_NUM_THREADS": "INFO"}, ["default"]))
    assert "\n" not in said and "suites[0].env.OMP_NUM_THREADS" in said and "a whole number from 1" in said
    check(plan({"OMP_NUM_THREADS": "2"}, ["default"]), "p.yaml")  # a count is a plan's to choose
