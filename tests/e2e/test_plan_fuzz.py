"""Plan entries drawn over every axis a run's setting comes from (algorithms, protocols, nodes, gpus,
pairs, ranks_per_core, transports, world sizes, the gpu: and cpu: overrides) and env keys from
NCCL's documented list: each is refused before anything runs, in one line, or planned so that
what its launches run is what their runs will record (the launch id says the algorithm, protocol,
nodes and GPUs; the ranks' environment holds the entry's env, the preset's and the evidence's,
none undoing another). Validation and planning only, on a GPU host and a CPU host as their
capabilities say; a few drawn entries then run for real on this CPU (marked slow), and their
bundle's runs are checked against their entry."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st

from bench.agent.planning import plan_launches
from bench.bundle import read_bundle
from bench.common.fits import world_sizes
from bench.common.host import Capabilities
from bench.common.protocol import parse_launch_id
from bench.common.selection import ENTRY_AXES, parse_variant, side_of
from bench.common.transports import BASE_NCCL_ENV, PRESETS
from bench.controller import plans
from bench.controller.inventory import Host, Inventory
from bench.controller.resume import setting_problem
from bench.controller.run import _checked_runtimes
from bench.errors import PlanError, UserError
from tests.conftest import bundle_path_from, cli

# NCCL's documented environment variables: its user guide's "Environment Variables" page
# (docs/userguide/source/env.rst of NVIDIA/nccl, 2.29).
NCCL_DOCUMENTED = """
NCCL_ALGO NCCL_ALLOC_P2P_NET_LL_BUFFERS NCCL_BUFFSIZE NCCL_CGA_CLUSTER_SIZE NCCL_CHECKS_DISABLE NCCL_CHECK_MODE
NCCL_CHECK_POINTERS NCCL_COLLNET_ENABLE NCCL_COLLNET_NODE_THRESHOLD NCCL_COMM_BLOCKING NCCL_COMM_ID NCCL_CONF_FILE
NCCL_CROSS_NIC NCCL_CTA_POLICY NCCL_CUMEM_ENABLE NCCL_CUMEM_HOST_ENABLE NCCL_DEBUG NCCL_DEBUG_FILE NCCL_DEBUG_SUBSYS
NCCL_DEBUG_TIMESTAMP_FORMAT NCCL_DEBUG_TIMESTAMP_LEVELS NCCL_DMABUF_ENABLE NCCL_ENV_PLUGIN NCCL_GRAPH_DUMP_FILE
NCCL_GRAPH_FILE NCCL_GRAPH_MIXING_SUPPORT NCCL_GRAPH_REGISTER NCCL_GRAPH_STREAM_ORDERING NCCL_HOSTID
NCCL_IB_ADAPTIVE_ROUTING NCCL_IB_ADDR_FAMILY NCCL_IB_ADDR_RANGE NCCL_IB_AR_THRESHOLD NCCL_IB_CUDA_SUPPORT
NCCL_IB_DISABLE NCCL_IB_ECE_ENABLE NCCL_IB_FIFO_TC NCCL_IB_GID_INDEX NCCL_IB_HCA NCCL_IB_MERGE_NICS NCCL_IB_OOO_RQ
NCCL_IB_PCI_RELAXED_ORDERING NCCL_IB_QPS_PER_CONNECTION NCCL_IB_RETRY_CNT NCCL_IB_RETURN_ASYNC_EVENTS
NCCL_IB_ROCE_VERSION_NUM NCCL_IB_SL NCCL_IB_SPLIT_DATA_ON_QPS NCCL_IB_TC NCCL_IB_TIMEOUT NCCL_IGNORE_COLLNET_MISMATCH
NCCL_IGNORE_CPU_AFFINITY NCCL_IGNORE_NET_MISMATCH NCCL_IPC_USE_ABSTRACT_SOCKET NCCL_LAUNCH_MODE
NCCL_LAUNCH_ORDER_IMPLICIT NCCL_LAUNCH_RACE_FATAL NCCL_LEGACY_CUDA_REGISTER NCCL_LL_THRESHOLD NCCL_LOCAL_REGISTER
NCCL_MAX_CTAS NCCL_MAX_NCHANNELS NCCL_MEM_SYNC_DOMAIN NCCL_MIN_CTAS NCCL_MIN_NCHANNELS NCCL_MNNVL_CLIQUE_ID
NCCL_MNNVL_ENABLE NCCL_MNNVL_UUID NCCL_MULTI_RANK_GPU_ENABLE NCCL_NET NCCL_NETDEVS_POLICY NCCL_NET_GDR_C2C
NCCL_NET_GDR_LEVEL NCCL_NET_GDR_READ NCCL_NET_MERGE_POLICY NCCL_NET_PLUGIN NCCL_NET_SHARED_BUFFERS
NCCL_NET_SHARED_COMMS NCCL_NSOCKS_PERTHREAD NCCL_NTHREADS NCCL_NVB_DISABLE NCCL_NVLS_ENABLE NCCL_OOB_NET_ENABLE
NCCL_OOB_NET_IFNAME NCCL_P2P_DIRECT_DISABLE NCCL_P2P_DISABLE NCCL_P2P_LEVEL NCCL_P2P_LL_THRESHOLD
NCCL_P2P_NET_CHUNKSIZE NCCL_P2P_PXN_LEVEL NCCL_PROFILER_PLUGIN NCCL_PROTO NCCL_PXN_C2C NCCL_PXN_DISABLE
NCCL_RAS_ADDR NCCL_RAS_ENABLE NCCL_RAS_TIMEOUT_FACTOR NCCL_RUNTIME_CONNECT NCCL_SET_STACK_SIZE NCCL_SET_THREAD_NAME
NCCL_SHM_DISABLE NCCL_SINGLE_RING_THRESHOLD NCCL_SOCKET_FAMILY NCCL_SOCKET_IFNAME NCCL_SOCKET_MAGIC
NCCL_SOCKET_NTHREADS NCCL_SOCKET_POLL_TIMEOUT_MSEC NCCL_SOCKET_RETRY_CNT NCCL_SOCKET_RETRY_SLEEP_MSEC
NCCL_SYM_GIN_KERNELS_ENABLE NCCL_TOPO_DUMP_FILE NCCL_TOPO_FILE NCCL_TREE_THRESHOLD NCCL_TUNER_PLUGIN
NCCL_UID_STAGGER_RATE NCCL_UID_STAGGER_THRESHOLD NCCL_WIN_ENABLE
""".split()
# Beside NCCL's: the other knobs a plan may set, and a few it may not.
OTHER_KEYS = ["CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "OMP_NUM_THREADS", "TORCH_SYMM_MEM_DISABLE_MULTICAST",
              "NVSHMEM_DISABLE_NVLS", "LD_PRELOAD", "PYTHONPATH"]
VALUES = ["0", "1", "2", "INFO", "WARN", "Ring", "allreduce:tree", "^LL128", "=lo", "localhost:28028", "0,1", "", "a b"]
# Drawn as often as all the others: the keys a launch sets itself (the preset's, the evidence's,
# NVLS off, the GPUs it is given, NCCL's algorithm), where an entry's env could undo what a run is labelled with.
SETTING_KEYS = sorted({*BASE_NCCL_ENV, *(key for preset in PRESETS.values() for key in {**preset.env, **preset.between_env}),
                       "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NCCL_ALGO", "NCCL_PROTO", "OMP_NUM_THREADS"})

LEAN = {"ops": ["all_reduce"], "dtypes": ["float32"], "in_place": [True], "begin_bytes": 4096, "end_bytes": 4096,
        "factor": 2, "warmup_iters": 0, "iters": 1, "repetitions": 2}
AXES = {
    "transports": st.lists(st.sampled_from(sorted(PRESETS)), min_size=1, max_size=3, unique=True),
    "algorithms": st.lists(st.sampled_from(["default", "ring", "tree", "pat"]), min_size=1, max_size=2, unique=True),
    "protocols": st.lists(st.sampled_from(["default", "ll", "ll128", "simple"]), min_size=1, max_size=2, unique=True),
    "nodes": st.integers(1, 4),
    "gpus": st.lists(st.integers(0, 5), min_size=1, max_size=4, unique=True),
    "pairs": st.just("all"),
    "ranks_per_core": st.integers(1, 4),
    "launch_repeats": st.integers(1, 2),
    "span": st.sampled_from(["all_nodes", "first_node"]),
}
assert set(AXES) == set(ENTRY_AXES)


def entries(axes: dict = AXES, env_keys: list = NCCL_DOCUMENTED + OTHER_KEYS, sizes: tuple = (1, 2, 3, 4, "all"),
            overrides: bool = True):
    """A collectives entry drawn over `axes` (and, with `overrides`, its gpu: and cpu: blocks over every axis)."""
    block = st.fixed_dictionaries({}, optional=AXES) if overrides else st.just({})
    return st.builds(
        lambda top, env, worlds, gpu, cpu: {"suite": "collectives", "params": LEAN, "world_sizes": worlds, **top,
                                            **({"env": env} if env else {}), **({"gpu": gpu} if gpu else {}),
                                            **({"cpu": cpu} if cpu else {})},
        st.fixed_dictionaries({}, optional=axes),
        st.dictionaries(st.one_of(st.sampled_from(SETTING_KEYS), st.sampled_from(env_keys)), st.sampled_from(VALUES), max_size=3),
        st.lists(st.sampled_from(list(sizes)), min_size=1, max_size=3, unique=True),
        block, block,
    )


GPU_HOST = Capabilities(gpu_count=4, gpu_memory_bytes=80 << 30, logical_cpus=32, gpu_name="NVIDIA H100 80GB HBM3",
                        gpu_memory_free_bytes=80 << 30, host_memory_bytes=512 << 30, nvlink=True, pcie_gen=5, nccl_version="2.28.9")
CPU_HOST = Capabilities(gpu_count=0, logical_cpus=2, host_memory_bytes=16 << 30)
LOCAL = Inventory(hosts=(Host(name="local", runtime="local"),))


def one_line(err: Exception) -> str:
    text = str(err)
    assert text and "\n" not in text and "Traceback" not in text, text
    return text


def checked_or_refused(plan: dict) -> "dict | None":
    """The plan as `run` takes it, or None where `validate` or `run` refuses it before any host is touched."""
    try:
        checked = plans.check(plan, "fuzz.yaml")
        _checked_runtimes(LOCAL, checked)
    except UserError as err:
        assert one_line(err).startswith(("fuzz.yaml: ", "the plan's suites[0]: ", "host 'local': ")), str(err)
        event("refused before any host")
        return None
    return checked


def assert_planned_as_recorded(entry: dict, hw: Capabilities, launches: list) -> None:
    """What each launch runs is what its id, and so its runs' records, say: its variant parses to its
    algorithm, protocol, nodes and GPUs; the ranks get the entry's env as written, and the preset's
    and every launch's own (the evidence, NVLS off) undone by none of it; the GPUs it names are the ones it sees."""
    side = side_of(entry, hw.cuda)
    for launch in launches:
        index, suite, preset, variant, world_size, repeat = parse_launch_id(launch.id)
        assert (index, suite, preset, world_size, repeat) == (0, "collectives", launch.preset, launch.world_size, launch.repeat)
        assert parse_variant(variant) == (launch.algorithm, launch.protocol, launch.emulated_nodes, launch.gpus), launch.id
        assert launch.preset in side.transports and launch.emulated_nodes == side.nodes
        assert launch.entry_env == entry.get("env", {})
        for name, value in entry.get("env", {}).items():
            assert launch.env[name] == value, (launch.id, name)
        if launch.backend == "nccl":
            for name, value in {**BASE_NCCL_ENV, **PRESETS[launch.preset].env_for(launch.topology.count)}.items():
                assert launch.env[name] == value, (launch.id, name, launch.env.get(name))
        if launch.gpus is not None:
            assert launch.env["CUDA_VISIBLE_DEVICES"] == ",".join(map(str, launch.gpus)) and launch.env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
        if not launch.skipped_reason:
            assert launch.world_size in world_sizes(entry["world_sizes"], hw, side.gpus) or side.pairs


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(entries())
def test_a_drawn_entry_is_refused_before_it_runs_or_planned_as_its_runs_record_it(entry):
    plan = checked_or_refused({"name": "fuzz", "suites": [entry]})
    if plan is None:
        return
    for hw in (GPU_HOST, CPU_HOST):
        try:
            launches = plan_launches(plan, hw)
        except PlanError as err:  # the agent's refusal on that host, before its first launch
            assert one_line(err).startswith("collectives: "), str(err)
            event(f"refused by the {hw.kind} host")
            continue
        assert_planned_as_recorded(plan["suites"][0], hw, launches)
        event(f"planned on the {hw.kind} host, {'some' if any(not l.skipped_reason for l in launches) else 'no'} launch run")


# Entries this CPU can run in a few seconds: gloo, at most two ranks; env keys the schema allows.
CPU_AXES = {"transports": st.sampled_from([["default"], ["gloo"], ["default", "gloo"]]), "nodes": st.integers(1, 2),
            "ranks_per_core": st.integers(1, 2)}
CPU_ENV = [key for key in NCCL_DOCUMENTED if not any(part in key for part in ("FILE", "PLUGIN", "ADDR", "RAS", "COMM_ID", "HOSTID",
                                                                                "CONF"))] + ["OMP_NUM_THREADS"]


@pytest.mark.slow
@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(entry=entries(CPU_AXES, CPU_ENV, (1, 2), overrides=False))
def test_a_drawn_entry_that_runs_on_this_cpu_records_what_ran(entry, tmp_path_factory):
    """Three real runs: each run of the bundle records its entry's env, nodes and no NCCL algorithm,
    and its setting is its launch's (what --resume would seal)."""
    if entry.get("env", {}).get("OMP_NUM_THREADS") in ("", "a b", "0"):
        entry["env"]["OMP_NUM_THREADS"] = "1"
    plan = checked_or_refused({"name": "fuzz", "timeout_s": 120, "suites": [entry]})
    if plan is None:
        return
    folder = tmp_path_factory.mktemp("fuzz")
    (folder / "plan.json").write_text(json.dumps(plan))
    done = cli("run", "--plan", folder / "plan.json", "--out", folder / "out", timeout=600)
    assert "Traceback" not in done.stderr, done.stderr
    if done.returncode == 1 and "nothing was measured" in done.stderr:
        event("every launch skipped")
        return
    assert done.returncode == 0, done.stderr
    event("ran")
    host = read_bundle(bundle_path_from(done.stdout))["hosts"][0]
    launches = {launch["id"]: launch for launch in host["launches"]}
    entry = plan["suites"][0]
    side = side_of(entry, False)
    for run in host["runs"]:
        assert run.get("env", {}) == entry.get("env", {})
        assert "algorithm" not in run["transport"] and "protocol" not in run["transport"]
        assert (run["transport"].get("nodes") or {}).get("count", 1) == side.nodes
        assert setting_problem(run, launches[run["launch_id"]], entry, gpus=False) is None


@pytest.mark.parametrize("key", ["CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"])
def test_gpus_beside_an_env_that_chooses_gpus_too_is_refused_on_a_gpu_host(key):
    """The launch numbers GPUs as nvidia-smi does (PCI_BUS_ID) for gpus: to name them: an env that
    renumbers or narrows them would make a run record GPUs it did not run on (too rare to draw)."""
    plan = checked_or_refused({"name": "fuzz", "suites": [{"suite": "collectives", "params": LEAN, "world_sizes": [2],
                                                          "gpus": [0, 2], "env": {key: "0"}}]})
    with pytest.raises(PlanError) as refused:
        plan_launches(plan, GPU_HOST)
    assert str(refused.value) == (f"collectives: gpus: [0, 2] and {key} (the entry's or the hosts file's env) both choose GPUs; "
                                  "choose them in one place")
