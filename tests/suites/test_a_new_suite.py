"""A new suite is one folder: the toy barrier-latency suite of docs/writing-a-suite.md, its files taken
from the page's code blocks and written into a temporary folder on the suite path
(DDPBENCH_SUITES_PATH), runs end to end on the CPU without a change anywhere else: plan -> agent
(torchrun, 2 ranks, gloo) -> a bundle that validates -> report (its section) -> compare (verdicts),
with an estimate before the launch and progress lines during it, and passes every check the page
lists, by the page's command. It brings its expected ranges in its folder (expected.json), and its
figure is judged against them in the report. Without its report part the report says so in one line; a suite
nobody has is one error line in a plan, a bundle and a compare; so is a suite that names itself
unlike its folder, or refers to no harness class."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest
import yaml

from bench.bundle import seal
from bench.suites import SUITES_PATH_ENV
from tests.conftest import REPO, bundle_path_from, cli
from tests.support.report_variants import with_gpus

PAGE = REPO / "docs" / "writing-a-suite.md"
CHECKS_COMMAND = re.compile(r"^DDPBENCH_SUITES_PATH=\S+ \.venv/bin/python -m pytest .*$", re.M)


def page_suite() -> tuple[dict, dict]:
    """(file name -> text: the first code block under each `### N. ...: `FILE`` heading, the plan of its yaml block)."""
    text = PAGE.read_text()
    files = {match.group(1): match.group(2) for match in
             re.finditer(r"^### \d+\. [^\n]*`([^`\n]+)`[^\n]*\n.*?^```[^\n]*\n(.*?)^```", text, re.M | re.S)}
    plan = yaml.safe_load(re.search(r"^```yaml\n(.*?)^```", text, re.M | re.S).group(1))
    return files, plan


FILES, PAGE_PLAN = page_suite()
# The page's plan, and a collectives entry beside it: the report shows every suite's part.
PLAN = {**PAGE_PLAN, "suites": [*PAGE_PLAN["suites"],
    {"suite": "collectives", "world_sizes": [2], "params": {
        "ops": ["all_reduce"], "dtypes": ["float32"], "in_place": [True], "begin_bytes": 4096, "end_bytes": 4096,
        "factor": 2, "warmup_iters": 1, "iters": 2, "repetitions": 3}},
]}


def test_the_page_gives_every_file_of_the_suite():
    assert sorted(FILES) == ["README.md", "expected.json", "params.schema.json", "ranks.py", "report.py", "suite.py"]
    assert [entry["suite"] for entry in PAGE_PLAN["suites"]] == ["barrier"]


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """The suite path holding the toy suite's folder, and the plan that runs it beside a collectives entry."""
    root = tmp_path_factory.mktemp("suites")
    (root / "barrier").mkdir()
    (root / "barrier" / "__init__.py").write_text('"""A toy suite: the latency of a barrier across the ranks."""\n')
    for name, text in FILES.items():
        (root / "barrier" / name).write_text(text)
    plan = root / "toy.yaml"
    plan.write_text(yaml.safe_dump(PLAN))
    return root, plan


@pytest.fixture(scope="module")
def two_runs(toy, tmp_path_factory):
    root, plan = toy
    out = tmp_path_factory.mktemp("toy-runs")
    done = [cli("run", "--plan", plan, "--out", out, env={SUITES_PATH_ENV: str(root)}) for _ in range(2)]
    for run in done:
        assert run.returncode == 0, run.stderr
    return done


def test_the_toy_suite_runs_end_to_end_with_an_estimate_and_progress(toy, two_runs):
    root, _ = toy
    first = two_runs[0]
    assert re.search(r"^\[local\] 2 launches, estimated .*00-barrier-default-ws2 \(1 configuration, ~\d+ s\)", first.stderr, re.M)
    assert re.search(r"^\[local\] 00-barrier-default-ws2 1/1 barrier, 2 ranks \(elapsed ", first.stderr, re.M)
    path = bundle_path_from(first.stdout)
    bundle = json.loads(path.read_text())
    (run,) = [r for r in bundle["hosts"][0]["runs"] if r["suite"] == "barrier"]
    assert run["world_size"] == 2 and run["status"] == "ok" and len(run["metrics"]["time_s"]["samples"]) == 5
    assert run["params"] == {"iters": 5}
    validated = cli("validate", path, env={SUITES_PATH_ENV: str(root)})
    assert validated.returncode == 0 and validated.stdout.startswith(f"{path}: ok: bundle"), validated.stderr
    report = (path.parent / "report.md").read_text()
    assert "## Barrier latency" in report and "## Collectives" in report


def test_compare_judges_the_toy_suites_runs_by_their_headline_metric(toy, two_runs, tmp_path):
    root, _ = toy
    first, second = (bundle_path_from(run.stdout) for run in two_runs)
    done = cli("compare", first, second, "--out", tmp_path, env={SUITES_PATH_ENV: str(root)})
    assert done.returncode in (0, 1, 3), done.stderr  # passed, failed or inconclusive: a verdict, whichever it is
    verdict = json.loads((tmp_path / "verdict.json").read_text())
    (toy_run,) = [run for run in verdict["runs"] if run["suite"] == "barrier"]
    assert toy_run["metric"] == "time_s" and toy_run["verdict"] in ("reproduced", "inconclusive", "faster", "slower")
    assert "time_s" in verdict["tolerances"]
    listed = " ".join(cli("compare", "--help", env={SUITES_PATH_ENV: str(root)}).stdout.split())
    assert "time_s for barrier" in listed and "copy_gbps for copy" in listed  # --tolerance names every suite's metric


def test_ddpbench_suites_lists_it_by_its_folders_name_beside_the_others(toy, tmp_path):
    root, _ = toy
    listed = cli("suites", env={SUITES_PATH_ENV: str(root)})
    assert listed.returncode == 0, listed.stderr
    assert "barrier: The latency of a barrier across the ranks." in listed.stdout and "\ncopy: " in listed.stdout
    rows = listed.stdout[listed.stdout.index("barrier: "):].splitlines()[1:6]
    assert [row.split()[:3] for row in rows if row.split()[0] == "iters"] == [["iters", "integer", "20"]]  # its own default
    shutil.copytree(root / "barrier", tmp_path / "latency")  # the same files in another folder: another suite, named by it
    renamed = json.loads(cli("suites", "--json", env={SUITES_PATH_ENV: str(tmp_path)}).stdout)
    assert "latency" in [suite["name"] for suite in renamed] and "barrier" not in [suite["name"] for suite in renamed]


def test_a_suite_that_names_itself_unlike_its_folder_is_one_error_line_for_any_command(toy, tmp_path):
    root, _ = toy
    shutil.copytree(root / "barrier", tmp_path / "latency")
    suite_py = tmp_path / "latency" / "suite.py"
    suite_py.write_text(suite_py.read_text().replace("    Params = Params\n", '    name = "barrier"\n    Params = Params\n'))
    done = cli("compare", "--help", env={SUITES_PATH_ENV: str(tmp_path)})
    assert done.returncode == 2 and done.stderr.startswith("error: ") and len(done.stderr.splitlines()) == 1, done.stderr
    assert "SUITE.name is 'barrier' but its folder is 'latency'" in done.stderr


def test_a_suite_path_that_names_no_folder_is_one_error_line_not_ignored(tmp_path):
    """A typo in DDPBENCH_SUITES_PATH would leave one's own suite unknown without a word."""
    done = cli("suites", env={SUITES_PATH_ENV: f"{tmp_path / 'my-suites'}{os.pathsep}{tmp_path}"})
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [f"error: {SUITES_PATH_ENV} names {tmp_path / 'my-suites'}, which is not a folder; give "
                                        "the folder that holds your suites' folders, or unset it"]


def test_a_schema_that_refers_to_no_harness_class_is_one_error_line(toy, tmp_path):
    root, _ = toy
    shutil.copytree(root / "barrier", tmp_path / "barrier")
    schema = tmp_path / "barrier" / "params.schema.json"
    schema.write_text(schema.read_text().replace("$defs/RepeatedParams", "$defs/RepeatParams"))
    for args in (("suites",), ("validate", toy[1])):
        done = cli(*args, env={SUITES_PATH_ENV: str(tmp_path)})
        assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, (args, done.stderr)
        assert done.stderr.startswith(f"error: {schema}: $defs/params refers to 'urn:ddpbench:schema:harness#/$defs/RepeatParams'")
        assert "urn:ddpbench:schema:harness#/$defs/RepeatedParams" in done.stderr and "Traceback" not in done.stderr


def test_the_pages_suite_passes_every_check_the_page_lists_by_its_command(toy):
    root, _ = toy
    words = shlex.split(CHECKS_COMMAND.search(PAGE.read_text()).group(0))
    env = {**os.environ, "PYTHONPATH": str(REPO), SUITES_PATH_ENV: str(root)}
    argv = [sys.executable if word == ".venv/bin/python" else word for word in words[1:]]
    done = subprocess.run([*argv, "-vv", "-p", "no:cacheprovider"], cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert re.search(r"\[barrier\] PASSED", done.stdout), done.stdout[-4000:]  # the checks judged the toy suite


def test_without_its_report_part_the_report_says_so_and_keeps_the_others(toy, two_runs, tmp_path):
    root, _ = toy
    bare = tmp_path / "suites"
    shutil.copytree(root / "barrier", bare / "barrier")
    (bare / "barrier" / "report.py").unlink()
    done = cli("report", bundle_path_from(two_runs[0].stdout), "--out", tmp_path / "report", env={SUITES_PATH_ENV: str(bare)})
    assert done.returncode == 0, done.stderr
    report = (tmp_path / "report" / "report.md").read_text()
    assert "## Collectives" in report and "## Hosts" in report and "Barrier latency" not in report
    missing = [line for line in report.splitlines() if "barrier" in line and "no report part" in line]
    assert len(missing) == 1 and "its 1 successful run(s) are not shown" in missing[0]


def test_a_suite_nobody_has_is_one_error_line_in_a_plan_a_bundle_and_a_compare(toy, two_runs, tmp_path):
    _, plan = toy  # without the suite path: this ddpbench has no suite "barrier"
    bundle = bundle_path_from(two_runs[0].stdout)
    for args in (("run", "--plan", plan, "--out", tmp_path), ("validate", plan), ("report", bundle, "--out", tmp_path / "r"),
                 ("compare", bundle, bundle, "--out", tmp_path / "v")):
        done = cli(*args)
        assert done.returncode == 2, (args, done.stderr)
        (line,) = done.stderr.strip().splitlines()
        assert line.startswith("error: ") and "unknown suite 'barrier': this ddpbench has collectives, copy, ddp" in line, line
        assert "Traceback" not in done.stderr


def test_the_checks_judge_a_suite_of_ones_own_outside_the_repository(toy, tmp_path):
    """A suite.py that imports the agent's harness (torch) breaks the layers: the architecture test, run
    with the suite path set, names the file as the registry places it."""
    root, _ = toy
    shutil.copytree(root / "barrier", tmp_path / "barrier")
    suite_py = tmp_path / "barrier" / "suite.py"
    suite_py.write_text("from bench.agent.harness import repeat\n" + suite_py.read_text())
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_architecture.py"], cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO), SUITES_PATH_ENV: str(tmp_path)}, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stdout[-3000:]
    assert "bench/suites/barrier/suite.py (suites) imports bench/agent/harness.py (agent)" in done.stdout, done.stdout[-3000:]


def _on_two_h200s(path, out):
    """The toy run's bundle as if two H200s joined by NVLink had measured it (the expected ranges are per
    GPU model: a CPU's figures have none)."""
    bundle = json.loads(path.read_text())
    for host in bundle["hosts"]:
        with_gpus(host["fingerprint"], "h200-nvlink")
        for record in host["runs"] + host["launches"]:
            record["transport"].update(backend="nccl", nccl_used=["P2P"])
    out.write_text(json.dumps(seal(bundle)))
    return out, next(r for r in bundle["hosts"][0]["runs"] if r["suite"] == "barrier")["metrics"]["time_s"]["summary"]["median"]


def test_a_suite_brings_its_expected_ranges_in_its_folder(toy, two_runs, tmp_path):
    """An expected.json beside its suite.py: the report judges its figure within the range, and below
    one its time is slower than; a damaged one is one error line naming the file."""
    root, _ = toy
    folder = tmp_path / "suites"
    shutil.copytree(root / "barrier", folder / "barrier")
    bundle, median = _on_two_h200s(bundle_path_from(two_runs[0].stdout), tmp_path / "h200s.json")
    source = {"toy-barrier": {"title": "a toy barrier's latency on 2x H200", "url": "https://example.org/barrier",
                              "says": "the barrier's time"}}
    for (low, high), verdict in (((median / 2, median * 2), "within"), ((median / 100, median / 50), "below")):
        row = {"figure": "barrier_time_s", "gpu": "NVIDIA H200", "link": "nvlink4", "low": low, "high": high,
               "key": {"ranks": 2, "transport": "nvlink"}, "basis": "cited", "sources": ["toy-barrier"], "derivation": "a test's"}
        (folder / "barrier" / "expected.json").write_text(json.dumps({"sources": source, "ranges": [row]}))
        done = cli("report", bundle, "--out", tmp_path / verdict, env={SUITES_PATH_ENV: str(folder)})
        assert done.returncode == 0, done.stderr
        report = (tmp_path / verdict / "report.md").read_text()
        (line,) = [line for line in report.splitlines() if line.startswith("| local | barrier, 2 ranks |")]
        assert f"| {verdict}" in line and "(NVIDIA H200, nvlink4; toy-barrier) |" in line, line
        assert "- toy-barrier: a toy barrier's latency on 2x H200 (https://example.org/barrier)" in report
    (folder / "barrier" / "expected.json").write_text(json.dumps({"ranges": [{"figure": "barrier_time_s"}]}))
    done = cli("report", bundle, "--out", tmp_path / "damaged", env={SUITES_PATH_ENV: str(folder)})
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"error: {folder / 'barrier' / 'expected.json'}: ranges[0]: ") and "schema/expected.schema.json" in line
