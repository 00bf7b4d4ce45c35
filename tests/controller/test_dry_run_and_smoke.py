"""`ddpbench run --dry-run` plans and prices a plan on the hosts and launches nothing; `--smoke` runs
every configuration once at its least work, and its bundle is no measurement: compare and verify
refuse it. (tests/suites/test_shipped_plans.py runs both over every shipped plan.)"""
from __future__ import annotations

import json
from pathlib import Path

from bench.agent.planning import plan_launches
from bench.bundle import read_bundle, write_bundle
from bench.cli import main
from bench.common.host import Capabilities
from bench.controller.plans import load_plan, smoke
from tests.conftest import REPO

CPU_HOST = Capabilities(gpu_count=0, gpu_memory_bytes=0, infiniband=False, logical_cpus=2)
PUBLISHED = REPO / "benchmarks" / "results" / "bundles" / "20261125T213922Z-6e20a7.bundle.json"
HOSTS_YAML = "hosts:\n  - name: local\n    runtime: local\n    env: {OMP_NUM_THREADS: '1'}\n"


def hosts_file(tmp_path: Path) -> Path:
    path = tmp_path / "hosts.yaml"
    path.write_text(HOSTS_YAML)
    return path


def test_smoke_plan_runs_each_configuration_once_at_its_least_work():
    full, smoked = load_plan("scaling"), smoke(load_plan("scaling"))
    assert "precision" not in smoked
    for entry in smoked["suites"]:
        for part in (entry, entry["params"], entry.get("cpu", {}), entry.get("gpu", {})):
            assert part.get("launch_repeats", 1) == 1
            assert {part[key] for key in ("repetitions", "iters", "steps") if key in part} <= {1}
            assert {part[key] for key in ("warmup_iters", "warmup_steps", "warmup_max_steps") if key in part} <= {0}
            assert len(part.get("global_batches", [])) <= 1 and part.get("cv_target") is None
    first_round = {l.id for l in plan_launches(full, CPU_HOST) if l.repeat == 1}
    assert {l.id for l in plan_launches(smoked, CPU_HOST)} == first_round


def test_dry_run_lists_each_launch_with_its_estimate_or_why_not_and_launches_nothing(tmp_path, capsys):
    out = tmp_path / "results"
    status = main(["run", "--hosts", str(hosts_file(tmp_path)), "--plan", "seed002", "--smoke", "--dry-run", "--out", str(out)])
    said = capsys.readouterr()
    assert status == 0, said.err
    lines = said.out.splitlines()
    assert lines[0].startswith("host local: 7 launches, estimated ") and lines[0].endswith(" in all")
    assert any(line.startswith("  03-ddp-default-ws2: 1 configuration, ~") for line in lines)
    assert "  04-ddp-default-ws1: not run: the same configuration as launch 03-ddp-default-ws1, which runs it once" in lines
    assert lines[-1] == "dry run: the plan checks on 1 host; nothing was launched"
    assert not out.exists()


def test_dry_run_names_a_launch_the_host_cannot_run_within_timeout_s(tmp_path, capsys):
    plan = tmp_path / "long.yaml"
    plan.write_text(json.dumps({"name": "long", "timeout_s": 1, "suites": [{"suite": "ddp", "world_sizes": [2], "params": {
        "model": "tiny", "micro_batch": 2, "seq_len": 32, "steps": 400, "warmup_steps": 1, "precision": "fp32", "compile": False}}]}))
    status = main(["run", "--hosts", str(hosts_file(tmp_path)), "--plan", str(plan), "--dry-run", "--out", str(tmp_path / "r")])
    said = capsys.readouterr()
    assert status == 1
    assert "longer than the plan's timeout_s 1: raise timeout_s, or trim the entry" in said.err
    assert said.out.strip() == "dry run: the plan fails on 1 of 1 host; nothing was launched"


def test_compare_and_verify_refuse_a_smoke_bundle_in_one_line(tmp_path, capsys):
    smoked = tmp_path / "smoke.json"
    write_bundle(smoked, {**read_bundle(PUBLISHED), "smoke": True})
    fix = "a smoke run's bundle (ddpbench run --smoke), whose figures are no measurements; judge the bundle of a run without --smoke"
    for argv in (["compare", str(PUBLISHED), str(smoked), "--out", str(tmp_path / "c")],
                 ["verify", str(smoked), "--hosts", str(hosts_file(tmp_path)), "--out", str(tmp_path / "v")]):
        assert main(argv) == 2
        said = capsys.readouterr()
        assert said.err == f"error: {smoked}: {fix}\n" and said.out == ""
    assert not (tmp_path / "c").exists() and not (tmp_path / "v").exists()


def test_resume_keeps_the_run_as_it_ran(tmp_path, capsys):
    assert main(["run", "--resume", str(tmp_path), "--smoke"]) == 2
    assert capsys.readouterr().err == f"error: --resume {tmp_path} runs the plan of that run as it ran; leave out --smoke\n"
