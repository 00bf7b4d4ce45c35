"""A bundle's figures out (`ddpbench export`: nccl-tests JSON, Bencher BMF, Prometheus text) and a
verdict out (`compare --junit --in-toto`), each read back by its own format's reader: ddpbench's
import, JSON, prometheus_client's parser, the JUnit schema Jenkins reads (tests/fixtures/junit/), the
in-toto Statement schema; a Statement signed with `sign` and checked by `validate --allowed-signers`."""

from __future__ import annotations

import hashlib
import json
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema
from prometheus_client.parser import text_string_to_metric_families

from bench import schemas
from bench.bundle import read_bundle
from bench.common.run import Run
from bench.formats import prometheus
from tests.conftest import REPO
from tests.formats.test_import import V3
from tests.support.cli_in_process import ddpbench

JUNIT_XSD = REPO / "tests" / "fixtures" / "junit" / "junit-10.xsd"


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("imported")
    done = ddpbench("import", V3, "--out", out)
    assert done.returncode == 0, done.stderr
    return Path(done.stdout.split()[1])


@pytest.fixture(scope="module")
def slower(tmp_path_factory) -> Path:
    """The same file with every call a quarter slower (its times; busbw / algbw as it was)."""
    document = json.loads(V3.read_text())
    for row in document["results"]:
        for key in ("out_of_place", "in_place"):
            row[key]["time"] *= 1.25
            row[f"{key}_per_iter"]["times_us"] = [t * 1.25 for t in row[f"{key}_per_iter"]["times_us"]]
    folder = tmp_path_factory.mktemp("slower")
    (folder / "slower.json").write_text(json.dumps(document))
    done = ddpbench("import", folder / "slower.json", "--out", folder)
    assert done.returncode == 0, done.stderr
    return Path(done.stdout.split()[1])


def test_nccl_tests_json_is_read_back_as_the_same_figures(imported, tmp_path):
    """Exported, each placement's per-iteration block is nccl-tests' (analyze_perf_json.py's keys); imported
    again, every run has the samples it had."""
    done = ddpbench("export", imported, "--format", "nccl-tests", "--out", tmp_path)
    assert done.returncode == 0, done.stderr
    (path,) = tmp_path.glob("*.json")
    assert done.stdout == f"nccl-tests: {path}\n" and path.name == "imported-00-collectives-default-ws2-all_reduce.json"
    document = json.loads(path.read_text())
    assert (document["version"], document["args"][0], document["config"]["per_iter_timing"]) == (3, "all_reduce_perf", "true")
    row = document["results"][0]
    assert set(row["in_place_per_iter"]) >= {"min_us", "max_us", "avg_us", "p99_us", "cv_pct", "times_us"}
    again = ddpbench("import", path, "--out", tmp_path / "again")
    assert again.returncode == 0, again.stderr
    before = {(r["params"]["in_place"], r["params"]["size_bytes"]): r["metrics"]["time_s"]["samples"]
              for r in read_bundle(imported)["hosts"][0]["runs"]}
    after = {(r["params"]["in_place"], r["params"]["size_bytes"]): r["metrics"]["time_s"]["samples"]
             for r in read_bundle(Path(again.stdout.split()[1]))["hosts"][0]["runs"]}
    assert before.keys() == after.keys()
    for key, samples in before.items():
        assert after[key] == pytest.approx(samples, rel=1e-6, abs=1e-12), key


def test_bmf_holds_each_figure_with_its_spread(imported):
    done = ddpbench("export", imported, "--format", "bmf")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    runs = read_bundle(imported)["hosts"][0]["runs"]
    assert len(document) == len(runs)
    name = "imported: all_reduce float32 1 GiB, 2 ranks (in_place=True) over default"
    measure = document[name]["allreduce-busbw-gbps"]
    one_gib = next(Run(r) for r in runs if r["params"]["size_bytes"] == 1 << 30 and r["params"]["in_place"])
    summary = one_gib.metric("busbw_gbps")["summary"]
    assert measure == {"value": summary["median"], "lower_value": summary["p5"], "upper_value": summary["p95"]}


def test_prometheus_text_parses_back_with_a_hostile_host_name(imported):
    """prometheus_client reads every sample back; a name holding a quote, a backslash, a newline and an
    escape byte reads back as written, the escape byte shown (\\x1b), never sent."""
    done = ddpbench("export", imported, "--format", "prometheus")
    assert done.returncode == 0, done.stderr
    bundle = read_bundle(imported)
    (family,) = text_string_to_metric_families(done.stdout)
    assert (family.name, family.type) == ("ddpbench_allreduce_busbw_gbps", "gauge")
    assert len(family.samples) == 3 * len(bundle["hosts"][0]["runs"])
    assert {sample.labels["quantile"] for sample in family.samples} == {"0.05", "0.5", "0.95"}
    one_gib = next(Run(r) for r in bundle["hosts"][0]["runs"] if r["params"]["size_bytes"] == 1 << 30 and r["params"]["in_place"])
    median = [s.value for s in family.samples if s.labels["size_bytes"] == str(1 << 30) and s.labels["quantile"] == "0.5"]
    assert one_gib.median("busbw_gbps") in median
    bundle["hosts"][0]["name"] = 'box "a"\\b\nc\x1b[2J'
    hosts = {sample.labels["host"] for family in text_string_to_metric_families(prometheus.text(bundle)) for sample in family.samples}
    assert hosts == {'box "a"\\b\nc\\x1b[2J'}


def test_the_verdict_as_junit_validates_and_fails_each_slower_run(imported, slower, tmp_path):
    done = ddpbench("compare", imported, slower, "--out", tmp_path, "--junit", tmp_path / "junit.xml")
    assert done.returncode == 1 and f"junit: {tmp_path / 'junit.xml'}" in done.stdout
    xmlschema.XMLSchema(JUNIT_XSD).validate(tmp_path / "junit.xml")
    suite = ET.parse(tmp_path / "junit.xml").getroot()
    cases = suite.findall("testcase")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), len(cases)) == ("14", "14", "0", 14)
    assert {case.find("failure").get("type") for case in cases} == {"slower"}
    assert cases[0].get("name") == "op=all_reduce size_bytes=1048576 in_place=False over default, 2 ranks"
    assert cases[0].find("failure").get("message").startswith("slower; busbw_gbps ratio 0.8")


def test_the_verdict_as_an_in_toto_statement_is_signed_and_checked(imported, slower, tmp_path):
    statement = tmp_path / "verdict.intoto.json"
    same = ddpbench("compare", imported, imported, "--out", tmp_path / "same", "--junit", tmp_path / "same.xml")
    assert same.returncode == 0 and 'tests="0"' in (tmp_path / "same.xml").read_text()
    done = ddpbench("compare", imported, slower, "--out", tmp_path, "--in-toto", statement)
    assert done.returncode == 1
    document = json.loads(statement.read_text())
    assert schemas.first_problem(document, "in-toto") is None
    assert (document["_type"], document["predicateType"]) == ("https://in-toto.io/Statement/v1",
                                                              "https://in-toto.io/attestation/test-result/v0.1")
    assert document["subject"][0]["digest"]["sha256"] == hashlib.sha256(slower.read_bytes()).hexdigest()
    predicate = document["predicate"]
    assert (predicate["result"], len(predicate["failedTests"]), predicate["passedTests"]) == ("FAILED", 14, [])
    roles = [item["annotations"]["role"] for item in predicate["configuration"]]
    assert roles == ["original", "verdict"]
    assert predicate["configuration"][1]["digest"]["sha256"] == hashlib.sha256((tmp_path / "verdict.json").read_bytes()).hexdigest()
    keys = tmp_path / "keys"
    keys.mkdir()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "alice", "-f", keys / "alice"], check=True)
    public = (keys / "alice.pub").read_text().split()
    (keys / "allowed").write_text(f"alice@example.org {public[0]} {public[1]}\n")
    assert ddpbench("sign", statement, "--key", keys / "alice").returncode == 0
    checked = ddpbench("validate", statement, "--allowed-signers", keys / "allowed")
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.startswith(f"{statement}: ok: in-toto Statement, FAILED of {slower.name}; signed by alice@example.org")
    statement.write_text(statement.read_text().replace('"FAILED"', '"PASSED"'))
    forged = ddpbench("validate", statement, "--allowed-signers", keys / "allowed")
    assert forged.returncode == 2 and "is not a valid ddpbench-attestation signature of this file" in forged.stderr
    # a bundle's signature does not pass for a Statement's: the namespaces differ
    (tmp_path / "bundle.intoto.json").write_bytes(statement.read_bytes())
    ddpbench("sign", imported, "--key", keys / "alice")
    (tmp_path / "bundle.intoto.json.sig").write_bytes(Path(f"{imported}.sig").read_bytes())
    assert ddpbench("validate", tmp_path / "bundle.intoto.json").returncode == 2
