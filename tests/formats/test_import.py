"""`ddpbench import`: nccl-tests' and rccl-tests' result files (tests/fixtures/nccl-tests/, shaped from
their writers' sources) become sealed bundles of kind ddpbench.imported that keep every iteration's
time, which the report judges "normal?" and compare holds against a collectives sweep of the same
machine; a hostile or malformed file gets one error line."""

from __future__ import annotations

import hashlib
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from bench.bundle import SCHEMA_VERSION, read_bundle
from bench.formats.imported import import_file
from tests.conftest import REPO
from tests.support.cli_in_process import ddpbench

FIXTURES = REPO / "tests" / "fixtures" / "nccl-tests"
V3, V2, RCCL = FIXTURES / "all_reduce_perf-v3.json", FIXTURES / "all_reduce_perf-v2.json", FIXTURES / "rccl-tests.json"
NCCL_LOG = REPO / "tests" / "fixtures" / "h200x2" / "nccl-info-default.log"
# quick on the 2x H200 (NV18) whose nccl-tests figures the fixtures carry: its fingerprint and its sweep
SAME_MACHINE = REPO / "benchmarks" / "results" / "bundles" / "20261127T115002Z-3cea74.bundle.json.gz"


@pytest.fixture(scope="module")
def h200x2() -> dict:
    return read_bundle(SAME_MACHINE)["hosts"][0]["fingerprint"]


@pytest.fixture(scope="module")
def imported(h200x2, tmp_path_factory) -> Path:
    """The v3 file imported on its machine (that machine's fingerprint), with the run's NCCL log."""
    path, _ = import_file(V3, tmp_path_factory.mktemp("imported"), h200x2, NCCL_LOG)
    return path


def imported_by_cli(tmp_path: Path, *args) -> dict:
    done = ddpbench("import", *args, "--out", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    return read_bundle(Path(done.stdout.split()[1]))


def test_a_version_3_file_becomes_a_sealed_bundle_that_says_what_it_lacks(tmp_path):
    done = ddpbench("import", V3, "--out", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    path = Path(done.stdout.split()[1])
    assert done.stdout.startswith("bundle: ") and "(kind imported: 14 run(s) of nccl-tests)" in done.stdout
    bundle = read_bundle(path)  # sealed and schema-valid
    assert (bundle["kind"], bundle["schema_version"], "plan" in bundle) == ("ddpbench.imported", SCHEMA_VERSION, False)
    facts = bundle["imported"]
    assert facts["file_sha256"] == hashlib.sha256(V3.read_bytes()).hexdigest()
    assert (facts["format"], facts["format_version"], facts["program"], facts["devices"]) == ("nccl-tests", 3, "all_reduce_perf", ["NVIDIA H200"])
    assert facts["env"] == {"CUDA_HOME": "/usr/local/cuda", "NCCL_DEBUG": "INFO", "NCCL_NVLS_ENABLE": "0"}  # no HF_TOKEN
    assert [lack.split(":")[0] for lack in facts["lacks"]] == ["a plan", "the machine's fingerprint", "the transport NCCL used"]
    assert done.stderr.splitlines() == [f"lacks: {lack}" for lack in facts["lacks"]]
    host = bundle["hosts"][0]
    assert (host["fingerprint"], host["runtime"]) == (None, "imported")
    runs = host["runs"]
    assert {(r["params"]["in_place"], r["params"]["size_bytes"]) for r in runs} == {
        (placed, 1 << shift) for placed in (False, True) for shift in (20, 22, 24, 26, 28, 30, 32)}
    # every iteration but the one -K 1 skipped, as nccl-tests summarized them
    document = json.loads(V3.read_text())
    first = document["results"][0]["out_of_place_per_iter"]
    one_mib = next(r for r in runs if r["params"]["size_bytes"] == 1 << 20 and not r["params"]["in_place"])
    assert one_mib["metrics"]["time_s"]["samples"] == pytest.approx([t * 1e-6 for t in first["times_us"][1:]])
    assert one_mib["metrics"]["busbw_gbps"]["summary"]["n"] == 19
    assert one_mib["transport"] == {"preset": "default", "backend": "nccl", "env": {}, "nccl_used": [], "nccl_via": [],
                                    "matches_preset": True, "nccl_version": "2.28.9"}


def test_a_version_2_file_and_an_rccl_tests_list(tmp_path):
    """Version 2 has no skipped iterations: all 20 are kept. rccl-tests' list has one figure per size and
    placement, and says that it has no iteration's time."""
    v2 = imported_by_cli(tmp_path / "v2", V2)
    assert {len(r["metrics"]["time_s"]["samples"]) for r in v2["hosts"][0]["runs"]} == {20}
    rccl = imported_by_cli(tmp_path / "rccl", RCCL)
    runs = rccl["hosts"][0]["runs"]
    assert len(runs) == 10 and {r["world_size"] for r in runs} == {2}
    assert {len(r["metrics"]["busbw_gbps"]["samples"]) for r in runs} == {1}
    first = json.loads(RCCL.read_text())[0]
    assert runs[0]["metrics"]["busbw_gbps"]["samples"][0] == pytest.approx(first["busBw"])
    assert any(lack.startswith("each iteration's time and the RCCL version") for lack in rccl["imported"]["lacks"])


def test_the_report_judges_its_numbers_on_its_machine(imported, tmp_path):
    """With the machine's fingerprint and the NCCL log, "is my number normal?" holds each figure against
    the 2x H200's ranges (NCCL 2.28): the 1 MiB all-reduce, 67 GB/s in nccl-tests, lies above the range
    this project's own sweeps make; every other size within."""
    done = ddpbench("report", imported, "--out", tmp_path / "report")
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "report" / "report.md").read_text()
    normal = text[text.index("## Is my number normal?"):]
    assert "12 within, 2 above" in normal
    rows = [line for line in normal.splitlines() if line.startswith("| imported |")]
    assert len(rows) == 14 and all("default via P2P" in row for row in rows)
    assert {row.split(" | ")[1] for row in rows if row.endswith("| above | - |")} == {"all_reduce float32 1 MiB, 2 ranks"}


def test_compare_holds_it_against_the_sweep_of_the_same_machine(imported, tmp_path):
    """nccl-tests against ddpbench's quick sweep on the same 2x H200: the sizes both measured are judged
    (64 MiB to 1 GiB reproduce), those only one did (4 GiB, out of place) are not comparable, nothing failed."""
    done = ddpbench("compare", imported, SAME_MACHINE, "--out", tmp_path / "verdict", "--junit", tmp_path / "junit.xml")
    verdict = json.loads((tmp_path / "verdict" / "verdict.json").read_text())
    assert (done.returncode, verdict["outcome"]) == (3, "inconclusive")
    judged = {(r["params"]["size_bytes"], r["params"]["in_place"]): r["verdict"] for r in verdict["runs"]}
    assert {judged[size, True] for size in (64 << 20, 256 << 20, 1 << 30)} == {"reproduced"}
    assert judged[4 << 30, True] == judged[1 << 20, False] == "not comparable"
    assert "failed" not in judged.values()
    assert {r["reason"] for r in verdict["runs"] if r["verdict"] == "not comparable"} == {"the other bundle did not measure it"}
    # as JUnit: a reproduced run passes, an inconclusive or uncompared one is skipped with its reason
    cases = ET.parse(tmp_path / "junit.xml").getroot().findall("testcase")
    kinds = {run["verdict"]: [] for run in verdict["runs"]}
    for case, run in zip(cases, verdict["runs"]):
        kinds[run["verdict"]].append([(child.tag, child.get("type")) for child in case])
    assert kinds["reproduced"] == [[]] * 3 and len(kinds["not comparable"]) == 8
    assert {tuple(found) for found in kinds["inconclusive"]} == {(("skipped", "inconclusive"),)}
    skipped = next(case.find("skipped").get("message") for case in cases if case.find("skipped") is not None
                   and case.find("skipped").get("type") == "inconclusive")
    assert skipped.startswith("inconclusive; busbw_gbps ratio") and "launches differ more than samples do" in skipped


def test_an_imported_bundle_is_not_rerun(imported, tmp_path):
    done = ddpbench("verify", imported, "--out", tmp_path / "out")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"error: {imported}: an imported bundle (nccl-tests's result), which has no plan to rerun")


@pytest.mark.slow  # the agent's fingerprint of this machine takes some 20 s
def test_the_fingerprint_of_another_machine_is_refused(tmp_path):
    done = ddpbench("import", V3, "--fingerprint", "--out", tmp_path / "out")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"error: {V3}: it ran 2 ranks on NVIDIA H200, and this machine has ")
    assert not (tmp_path / "out").exists()


def hostile(tmp_path: Path, change) -> Path:
    document = json.loads(V3.read_text())
    change(document)
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(document))
    return path


def _set(path: tuple, value):
    def change(document):
        holder = document
        for part in path[:-1]:
            holder = holder[part]
        holder[path[-1]] = value
    return change


HOSTILE = {
    "a later version": (_set(("version",), 4), "field version: 4 is not an nccl-tests JSON file version ddpbench reads (2, 3)"),
    "a version as text": (_set(("version",), "3"), "field version: '3' is not an nccl-tests JSON file version"),
    "a negative size": (_set(("results", 2, "size"), -4096), "field results[2].size: -4096 is less than the minimum of 0"),
    "NaN as text": (_set(("results", 1, "out_of_place", "bus_bw"), "nan"), "field results[1].out_of_place.bus_bw: 'nan' is not of type 'number'"),
    "a control byte in a name": (_set(("config", "devices", 0, "device_info"), "NVIDIA H200\u001b[2J"),
                                 "field config.devices[0].device_info: 'NVIDIA H200\\x1b[2J' is not allowed here: Printable ASCII"),
    "a control byte in a type": (_set(("results", 0, "type"), "flo\u0007at"), "field results[0].type: 'flo\\x07at' is not allowed here"),
    "the host's time": (lambda d: d["results"][0].update(out_of_place={**{k: v for k, v in d["results"][0]["out_of_place"].items() if k != "time"}, "cpu_time": 9.0}),
                        "field results[0].out_of_place: it holds cpu_time (nccl-tests -C 1)"),
    "another program": (_set(("args", 0), "./build/alltoall_perf"), "field args[0]: 'alltoall_perf' is not a program whose results ddpbench holds"),
    "an unknown type": (_set(("results", 0, "type"), "int8"), "field results[0].type: 'int8'; ddpbench's collectives time float32 (float)"),
    "ranks miscounted": (_set(("config", "ngpus"), 4), "field results[0].out_of_place: bus_bw / alg_bw is 1, but all_reduce over 4 ranks"),
    "no iteration left": (_set(("results", 0, "out_of_place_per_iter", "skipped_iterations"), 20), "every iteration skipped (-K)"),
}


@pytest.mark.parametrize("case", HOSTILE, ids=list(HOSTILE))
def test_a_hostile_or_malformed_file_gets_one_error_line(case, tmp_path):
    change, said = HOSTILE[case]
    path = hostile(tmp_path, change)
    done = ddpbench("import", path, "--out", tmp_path / "out")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"error: {path}: ") and said in done.stderr, done.stderr
    assert not (tmp_path / "out").exists()


def test_a_file_too_big_not_json_or_neither_format_gets_one_error_line(tmp_path):
    """A 1 GiB file (sparse: nothing is written) is refused by its size before a byte is read."""
    big = tmp_path / "big.json"
    with open(big, "wb") as handle:
        handle.truncate(1 << 30)
    cases = {big: "1073741824 bytes is over the 67108864-byte limit", tmp_path / "text.json": "not valid JSON",
             tmp_path / "number.json": "a int, not an nccl-tests result (an object) or rccl-tests' (a list)",
             tmp_path / "twice.json": "the key 'version' is given twice in one object"}
    (tmp_path / "text.json").write_text("# nccl-tests version 2.19.6\n")
    (tmp_path / "number.json").write_text("3")
    (tmp_path / "twice.json").write_text('{"version": 3, "version": 2}')
    for path, said in cases.items():
        done = ddpbench("import", path, "--out", tmp_path / "out")
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and said in done.stderr, done.stderr


CAPTURED = FIXTURES / "h100x1"


@pytest.mark.parametrize("name", ["nccl-tests-2.19.6-all_reduce-h100x1", "nccl-tests-2.19.5-all_reduce-h100x1"])
def test_files_captured_on_a_lent_h100_import_as_the_program_printed_them(name, tmp_path):
    """nccl-tests 2.19.6 (file version 3) and 2.19.5 (version 2), run on a lent 1x H100 beside ddpbench's sweep
    of the same sizes: each size's out-of-place time is the one the program printed. On one GPU an all-reduce
    crosses no link (busbw 0 in both tools): compare says so of every size rather than judge it."""
    sweep = CAPTURED / "ddpbench-collectives-h100x1.bundle.json.gz"
    fingerprint = read_bundle(sweep)["hosts"][0]["fingerprint"]
    path, _ = import_file(CAPTURED / f"{name}.json", tmp_path / "imported", fingerprint, None)
    runs = read_bundle(path)["hosts"][0]["runs"]
    printed = {int(cells[0]): float(cells[5]) for cells in (line.split() for line in (CAPTURED / f"{name}.txt").read_text().splitlines())
               if cells and cells[0].isdigit()}
    out_of_place = {run["params"]["size_bytes"]: run["metrics"]["time_s"]["summary"]["median"] * 1e6 for run in runs
                    if not run["params"]["in_place"]}
    assert printed.keys() == out_of_place.keys() == {1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30}
    assert all(out_of_place[size] == pytest.approx(printed[size], rel=0.01, abs=0.01) for size in printed)
    done = ddpbench("compare", path, sweep, "--out", tmp_path / "verdict")
    verdict = json.loads((tmp_path / "verdict" / "verdict.json").read_text())
    assert (done.returncode, verdict["outcome"]) == (4, "not comparable")
    assert {run["verdict"] for run in verdict["runs"]} == {"not comparable"}
