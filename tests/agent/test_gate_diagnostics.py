"""The P2P gate's control arm of NCCL's own active diagnostics (NCCL_RUN_DIAGNOSTICS=1), on the CPU:
which NCCL runs it, what the gate records where it does not, and the one line a failing GPU pair
gets where the gate's other findings are (the agent's warnings, the report's host concerns). The
failed report is made up, in the shapes of NCCL's guide (tests/common/test_nccl_log.py): the lent
GPUs carry NCCL 2.28, which has no diagnostics."""
from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path

import pytest

from bench import schemas
from bench.agent import gate
from bench.agent.estimate import gate_seconds
from bench.agent.planning import Launch
from bench.common.host import Capabilities
from bench.common.nccl_log import diagnostics_report
from bench.common.protocol import Placement
from bench.judging.health import health_warnings, p2p_gate
from bench.judging.verdicts import judge
from tests.common.test_nccl_log import ADVICE_PCIE, DIAG_FAILED, DIAG_PASSED

# A real gate: quick on the lent 2x H200, NCCL 2.28.9, both arms ok.
H200X2_BUNDLE = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "bundles" / "20261127T115002Z-3cea74.bundle.json.gz"


@pytest.fixture(scope="module")
def h200x2() -> dict:
    return json.loads(gzip.decompress(H200X2_BUNDLE.read_bytes()))["hosts"][0]


def with_diagnostics(host: dict, found: dict) -> dict:
    """The host, its gate holding NCCL's diagnostics arm that found `found`."""
    host = copy.deepcopy(host)
    host["fingerprint"]["gate"]["nccl_diagnostics"] = {**found, "check_status": "ok", "error": None, "duration_s": 4.2}
    return host


@pytest.mark.parametrize("cuda, version, why", [
    (True, "2.31.0", None),
    (True, "2.32.6", None),
    (True, "3.0.1", None),
    (True, "2.28.9", "NCCL 2.28.9 has no active diagnostics (2.31 or newer)"),
    (True, "2.30.3", "NCCL 2.30.3 has no active diagnostics (2.31 or newer)"),
    (True, None, "the version of the NCCL torch loads is not known"),
    (False, None, "no GPU: the ranks talk over gloo, not NCCL"),
    (False, "2.31.0", "no GPU: the ranks talk over gloo, not NCCL"),
])
def test_nccls_diagnostics_run_where_torchs_nccl_has_them(cuda, version, why):
    assert gate.diagnostics_not_run(cuda, version) == why


def test_the_estimate_counts_the_diagnostics_arm_where_it_runs():
    launch = Launch(id="a", suite="collectives", preset="default", backend="nccl", nproc_per_node=2, nodes=Placement(),
                    params={}, timeout_s=60, env={})
    without, with_them = (gate_seconds([launch], Capabilities(gpu_count=2, nccl_version=version)) for version in ("2.28.9", "2.31.0"))
    assert with_them == pytest.approx(without * (len(gate.ARMS) + 1) / len(gate.ARMS))
    cpu = Capabilities(gpu_count=0, logical_cpus=2, nccl_version="2.31.0")
    assert gate_seconds([launch], cpu, env={gate.PLANTED_FAULT: "wrong:1"}) == gate_seconds([launch], Capabilities(gpu_count=0, logical_cpus=2), env={gate.PLANTED_FAULT: "wrong:1"})


def test_a_gate_without_diagnostics_records_why_and_says_nothing_more(h200x2, tmp_path):
    for cuda, version in ((False, None), (True, "2.28.9")):
        record = gate._diagnostics(2, cuda, {}, tmp_path, 30, version)  # returns before any process starts
        assert (record["status"], record["duration_s"], record["lines"]) == ("not_run", 0.0, [])
        assert schemas.first_problem(record, "fingerprint", "nccl_diagnostics") is None
        host = with_diagnostics(h200x2, record)
        assert p2p_gate(host["fingerprint"]) == [] and schemas.first_problem(host["fingerprint"], "fingerprint") is None
    assert not list(tmp_path.iterdir())
    assert record["reason"] == "NCCL 2.28.9 has no active diagnostics (2.31 or newer)"


def test_diagnostics_that_passed_say_nothing(h200x2):
    host = with_diagnostics(h200x2, diagnostics_report(DIAG_PASSED))
    assert schemas.first_problem(host["fingerprint"], "fingerprint") is None
    assert not [line for line in health_warnings(host["fingerprint"]) if "P2P gate" in line]


def test_a_failing_pair_is_one_line_naming_it_its_path_and_the_fix(h200x2):
    host = with_diagnostics(h200x2, diagnostics_report(DIAG_FAILED))
    fingerprint = host["fingerprint"]
    assert schemas.first_problem(fingerprint, "fingerprint") is None
    assert fingerprint["gate"]["verdict"] == "ok"  # ddpbench's own arms found every value right: NCCL's arm is the control
    (line,) = p2p_gate(fingerprint)
    assert line == ("P2P gate: NCCL's own diagnostics (NCCL_RUN_DIAGNOSTICS=1) found 4 of 56 peer accesses failed; first "
                    "GPU14→GPU11 (ranks 4→1) over path PIX: write mismatch, and 1 more pair(s): peer-to-peer transfers "
                    f"between these GPUs are broken; fix: {ADVICE_PCIE}, or run with NCCL_P2P_DISABLE=1 (the p2p_off preset)")
    # where the report says the host's concerns, and where the agent warns before the first launch
    assert line in judge(host, []).concerns and line in health_warnings(fingerprint)


def test_a_failed_report_without_pairs_still_says_so(h200x2):
    found = diagnostics_report("NCCL DIAG [INFO] p2p: only 0/2 GPU-to-GPU peer accesses passed verification\n")
    (line,) = p2p_gate(with_diagnostics(h200x2, found)["fingerprint"])
    assert "found 2 of 2 peer accesses failed: " in line and line.endswith("fix: run with NCCL_P2P_DISABLE=1 (the p2p_off preset)")
