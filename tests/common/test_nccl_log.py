"""What NCCL's own log says it did, read from lines in NCCL's source formats (tests/fixtures/nccl/):
the algorithm and protocol of each collective, the nodes it saw, the marks a run gets where either
is not what was asked, and what its active diagnostics found."""

from __future__ import annotations

import pytest

from bench.common.nccl_log import diagnostics_report, minor_version, seen_nodes, tuning_choices, tuning_summary, version_text
from bench.common.transports import Nodes, mismatch, run_transport, transport_record
from tests.conftest import FIXTURES as H200X2
from tests.support import FIXTURES

NCCL = FIXTURES / "nccl"
EMULATED, ONE_NODE = (NCCL / "emulated-2x2-socket.log").read_text(), (NCCL / "one-node-of-4.log").read_text()
TWO_BY_TWO = Nodes(2, 2, emulated=True)


def test_each_collective_is_read_with_its_function_algorithm_protocol_and_bytes():
    choices = tuning_choices(EMULATED)
    assert [(c.function, c.bytes, c.algorithm, c.protocol) for c in choices] == [
        ("AllReduce", 4, "TREE", "LL"), ("AllReduce", 1048576, "TREE", "LL128"), ("AllReduce", 4194304, "TREE", "LL128"),
        ("AllReduce", 67108864, "TREE", "SIMPLE"), ("Broadcast", 4, "RING", "LL"), ("AllGather", 1048576, "RING", "LL128")]
    rows = tuning_summary(choices)
    assert rows[1] == {"function": "AllReduce", "algorithm": "TREE", "protocol": "LL128", "calls": 2,
                       "min_bytes": 1048576, "max_bytes": 4194304}


@pytest.mark.parametrize("name, expected", [
    ("tuning-2.23.log", [("AllReduce", 4194304, "RING", "SIMPLE"), ("AllGather", 1048576, "PAT", "SIMPLE")]),
    ("tuning-2.21.log", [(None, 4194304, "TREE", "LL128")]),
])
def test_older_ncccls_lines_name_algorithm_and_protocol_by_index(name, expected):
    assert [(c.function, c.bytes, c.algorithm, c.protocol) for c in tuning_choices((NCCL / name).read_text())] == expected


def test_the_nodes_nccl_saw_come_from_its_init_lines():
    assert seen_nodes(EMULATED, 4) == (2, 2, True)
    assert seen_nodes(ONE_NODE, 4) == (1, 4, True)
    assert seen_nodes(EMULATED, 2) == (None, None, False)  # no communicator over 2 ranks
    # The real 2x H200 capture: 2 ranks of one host, one node; under the socket preset NCCL counts each GPU a node.
    assert seen_nodes((H200X2 / "nccl-info-default.log").read_text(), 2) == (1, 2, True)
    assert seen_nodes((H200X2 / "nccl-info-socket.log").read_text(), 2) == (2, 1, True)


def test_emulated_nodes_with_sockets_between_are_proven_from_the_log():
    record = transport_record("socket", "nccl", 4, EMULATED, TWO_BY_TWO)
    assert record["matches_preset"] is True and mismatch(record) is None
    assert record["env"] == {"NCCL_IB_DISABLE": "1"}, "inside each node NCCL keeps P2P: only InfiniBand is turned off"
    nodes = record["nodes"]
    assert (nodes["nccl_nodes"], nodes["nccl_ranks_per_node"], nodes["proof"]) == (2, 2, "nccl")
    assert (nodes["inside"], nodes["between"]) == (["P2P"], ["NET/Socket"])


def test_nccl_seeing_one_node_where_two_were_asked_is_a_mismatch():
    record = transport_record("default", "nccl", 4, ONE_NODE, TWO_BY_TWO)
    assert record["matches_preset"] is False
    assert mismatch(record) == "2 nodes of 2 ranks asked, NCCL saw 1 of 4"


def test_a_preset_between_nodes_that_nccl_did_not_take_is_a_mismatch():
    """ib asked between the nodes, NCCL went over sockets."""
    record = transport_record("ib", "nccl", 4, EMULATED, TWO_BY_TWO)
    assert record["matches_preset"] is False
    assert mismatch(record) == "between nodes the preset asks for ['NET/IB'], NCCL used ['NET/Socket']"


def test_each_run_keeps_the_tuning_lines_of_its_own_collective():
    launch = transport_record("socket", "nccl", 4, EMULATED, TWO_BY_TWO, algorithm="tree")
    run = run_transport(launch, tuning_choices(EMULATED), [("AllReduce", 4194304)], 4)
    assert run["nccl_tuning"] == [{"function": "AllReduce", "algorithm": "TREE", "protocol": "LL128", "calls": 1,
                                   "min_bytes": 4194304, "max_bytes": 4194304}]
    assert run["matches_preset"] is True and run["algorithm"] == "tree"


def test_asking_for_tree_and_getting_ring_is_a_mismatch():
    launch = transport_record("default", "nccl", 4, ONE_NODE, algorithm="tree")
    run = run_transport(launch, tuning_choices(ONE_NODE), [("AllReduce", None)], 4)
    assert run["matches_preset"] is False
    assert mismatch(run) == "TREE/any asked, NCCL ran RING/LL, RING/LL128, RING/SIMPLE"


def test_asking_for_an_algorithm_with_no_tuning_line_in_the_log_is_not_a_match():
    """The P2P gate's rule for transports: what the log does not show was not proven."""
    text = (H200X2 / "nccl-info-default.log").read_text()  # captured without TUNING in NCCL_DEBUG_SUBSYS
    run = run_transport(transport_record("default", "nccl", 2, text, algorithm="ring"), tuning_choices(text), [("AllReduce", None)], 2)
    assert run["nccl_tuning"] == [] and run["matches_preset"] is False
    assert mismatch(run) == "RING asked, and NCCL's log has no TUNING line for the run"


def test_a_node_without_rank_0_judges_no_algorithm_from_its_log():
    """NCCL logs TUNING on global rank 0 only: a job's second node (a real 2-node run on 2x H200 over SSH
    showed none in its log) records nothing to judge by, and its launch is no mismatch."""
    text = (H200X2 / "nccl-info-default.log").read_text()
    launch = transport_record("default", "nccl", 2, text, algorithm="ring")
    run = run_transport(launch, None, [("AllReduce", None)], 2)
    assert "nccl_tuning" not in run and mismatch(run) is None


def test_nccl_version_codes_read_as_nccl_prints_them():
    """ncclGetVersion's code (nccl-tests' nccl_version) as NCCL's banner prints it, both encodings."""
    assert [version_text(code) for code in (22809, 23206, 21003, 2708)] == ["2.28.9", "2.32.6", "2.10.3", "2.7.8"]
    assert (minor_version("2.28.9"), minor_version(None)) == ("2.28", None)


# NCCL's active diagnostics' report (NCCL_RUN_DIAGNOSTICS=1, NCCL 2.31 and later), in the shapes of its
# troubleshooting guide and of the lines its unit tests pin; not captured: the lent GPUs carry NCCL 2.28.
ADVICE_PCIE = ("check the affected pair with 'nvidia-smi topo -p2p p', then check Linux bare-metal IOMMU mode and PCIe "
               "ACS settings")
DIAG_PASSED = """\
node0:4242 NCCL INFO Channel 00/24 : 0 1 2 3 4 5 6 7
node0:4242 NCCL DIAG === NCCL Diagnostics ===
node0:4242 NCCL DIAG [OK]   p2p: verified P2P access in both directions between every GPU pair (56 peer accesses)
node0:4242 NCCL DIAG NCCL diagnostics completed in 245.3 ms across 8 ranks
"""
DIAG_FAILED = f"""\
node0:4242 NCCL DIAG === NCCL Diagnostics ===
node0:4242 NCCL DIAG [INFO] p2p: write mismatch srcRank=4 srcCudaDev=4 srcNvmlDev=14 dstRank=1 dstCudaDev=1 \
dstNvmlDev=11 path=PIX handle=LEGACY_CUDA_IPC expected=0x4000000200000001 got=0x0000000000000abc \
verify=0x0000000000000def; {ADVICE_PCIE}
node0:4242 NCCL DIAG [INFO] p2p: peer-memory import failed srcRank=1 srcCudaDev=1 srcNvmlDev=11 dstRank=4 \
dstCudaDev=4 dstNvmlDev=14 path=PIX handle=LEGACY_CUDA_IPC reason=import; check CUDA IPC support, GPU visibility, \
and process or container isolation
node0:4242 NCCL DIAG [INFO] p2p: only 52/56 GPU-to-GPU peer accesses passed verification
node0:4242 NCCL DIAG NCCL diagnostics completed in 250.0 ms across 8 ranks
"""


def test_nccl_diagnostics_that_passed_count_the_peer_accesses_and_keep_no_host_name():
    found = diagnostics_report(DIAG_PASSED)
    assert (found["status"], found["peer_accesses_passed"], found["peer_accesses_tested"]) == ("passed", 56, 56)
    assert (found["failed_pairs"], found["reason"], found["nccl_duration_ms"]) == ([], None, 245.3)
    assert found["lines"][0] == "=== NCCL Diagnostics ===" and not any("node0" in line for line in found["lines"])


def test_nccl_diagnostics_that_failed_name_each_pair_its_path_and_nccls_advice():
    found = diagnostics_report(DIAG_FAILED)
    assert (found["status"], found["peer_accesses_passed"], found["peer_accesses_tested"]) == ("failed", 52, 56)
    write, imported = found["failed_pairs"]
    assert write == {"kind": "write mismatch", "src_rank": 4, "src_cuda_dev": 4, "src_nvml_dev": 14, "dst_rank": 1,
                     "dst_cuda_dev": 1, "dst_nvml_dev": 11, "path": "PIX", "handle": "LEGACY_CUDA_IPC", "advice": ADVICE_PCIE}
    assert (imported["kind"], imported["src_rank"], imported["dst_rank"]) == ("peer-memory import failed", 1, 4)
    assert imported["advice"].startswith("check CUDA IPC support")


@pytest.mark.parametrize("text, status, reason", [
    # no pair NCCL would join directly (NCCL_P2P_DISABLE=1, or one GPU a node): the report has no p2p line
    ("NCCL DIAG === NCCL Diagnostics ===\nNCCL DIAG NCCL diagnostics completed in 3.0 ms across 2 ranks\n",
     "inconclusive", "NCCL tested no GPU pair"),
    ("NCCL DIAG === NCCL Diagnostics ===\nNCCL DIAG [INFO] p2p: setup failed on rank 1 result=2\n",
     "inconclusive", "NCCL said: [INFO] p2p: setup failed on rank 1 result=2"),
    # one process driving several GPUs: NCCL says it opened peer access, which is no finding
    ("NCCL DIAG [INFO] p2p: temporarily enabled context-wide CUDA peer access rank=3 cudaDev=3; avoid concurrent CUDA "
     "use on this context until diagnostics completes\nNCCL DIAG [OK]   p2p: all 56 directed GPU P2P edges verified\n",
     "passed", None),
    ("NCCL DIAG [INFO] p2p: only 0/2 GPU-to-GPU peer accesses passed verification\n", "failed", None),
])
def test_nccl_diagnostics_without_a_pass_or_a_pair_say_why(text, status, reason):
    found = diagnostics_report(text)
    assert found["status"] == status
    assert (found["reason"] or "").startswith(reason or "") and (reason is None) == (found["reason"] is None)


def test_a_log_without_nccl_diagnostics_holds_no_report():
    assert diagnostics_report((H200X2 / "nccl-info-default.log").read_text()) is None  # NCCL 2.28.9, not asked
