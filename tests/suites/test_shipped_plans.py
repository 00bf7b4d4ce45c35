"""Every shipped plan, and every plan the docs give, proved by price: dry-run on the machines of
benchmarks/plan_durations.py, each launch priced within the plan's timeout_s; and each shipped plan by
smoke: `ddpbench run --smoke` on this CPU end to end (bundle, report, validation), within a minute a plan. One plan, quick,
runs at its product settings, where sampling until clear and the launches' repeats are the subject."""
from __future__ import annotations

import importlib.util
import math
import re
from pathlib import Path

import pytest
import yaml

from benchmarks.plan_durations import MACHINES
from bench import suites
from bench.agent import runner
from bench.bundle import read_bundle
from bench.common import protocol
from bench.common.sampling import LEAST_SAMPLES
from bench.controller.plans import check, load_plan, plan_names, smoke
from bench.models.shapes import TRANSFORMER_PRESETS, UNET_CONFIGS
from tests.conftest import REPO, cli as ddpbench
from tests.test_docs import FENCE, doc_files

HAS_DIFFUSERS = importlib.util.find_spec("diffusers") is not None
# One OpenMP thread per rank: two ranks on two cores, and no spinning threads fighting other tests for them.
HOSTS_YAML = "hosts:\n  - name: local\n    runtime: local\n    env: {OMP_NUM_THREADS: '1'}\n"
SMOKE_LIMIT_S = 60  # what `run --smoke` of a shipped plan may take on this CPU, as the README promises


def planned(plan: dict, machine: str, tmp_path: Path) -> protocol.Planned:
    """The agent's dry run of the plan on the machine's profile, on an idle host as the profiles are."""
    events = []
    raw = runner.run_plan(plan, tmp_path, MACHINES[machine], dry_run=True, progress=events.append)
    assert raw["complete"] and raw["launches"] == [] and not (tmp_path / "launches").exists()  # nothing launched
    (found,) = [event for event in events if isinstance(event, protocol.Planned)]
    return found


def skip_without_diffusers(plan: dict, side: str) -> None:
    if not HAS_DIFFUSERS and any({**e["params"], **e.get(side, {})}.get("model") in UNET_CONFIGS for e in plan["suites"]):
        pytest.skip("diffusers is not installed (the sdxl extra)")


@pytest.fixture(autouse=True)
def idle_cpu(monkeypatch):
    """The profiles are idle machines: no estimate here is stretched by this machine's load now."""
    monkeypatch.setattr(runner, "cpu_slowdown", lambda cores: 1.0)


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("name", plan_names())
def test_shipped_plan_dry_runs_within_its_timeout(name, machine, tmp_path):
    """Each launch priced (sampling included) within the plan's timeout_s: the agent would refuse
    the plan here with a PlanError otherwise."""
    plan = load_plan(name)
    assert plan["description"].strip()
    skip_without_diffusers(plan, "gpu" if MACHINES[machine]["gpus"] else "cpu")
    event = planned(plan, machine, tmp_path)
    assert event.estimates_s, f"{name} runs nothing on {machine}"
    over = {launch: seconds for launch, seconds in event.estimates_s.items() if seconds > plan["timeout_s"]}
    assert not over, f"{name} on {machine}: launches priced past timeout_s {plan['timeout_s']:g} s: {over}"


def plan_examples() -> list:
    """(page, plan) of each yaml block of the docs that is a whole plan (a name and suites)."""
    found = []
    for doc in doc_files(REPO):
        for language, body in FENCE.findall(doc.read_text()):
            plan = yaml.safe_load(body) if language.strip() == "yaml" else None
            if isinstance(plan, dict) and {"name", "suites"} <= set(plan):
                found.append((str(doc.relative_to(REPO)), plan))
    return found


@pytest.mark.parametrize("machine", ["CPU, 2 cores (idle)", "2x H200 (NV18)"])
def test_every_plan_the_docs_give_checks_and_plans_on_a_cpu_and_on_gpus(machine, tmp_path):
    """Offered for any host: each plan of the pages passes the schema and the agent's planning (its
    launches priced within its timeout_s) on the machine profiles of benchmarks/plan_durations.py."""
    examples = plan_examples()
    ours = [(page, plan) for page, plan in examples if all(entry["suite"] in suites.names() for entry in plan["suites"])]
    # The page's own toy suite runs its plan: tests/suites/test_a_new_suite.py.
    assert [page for page, _ in examples if (page, _) not in ours] == ["docs/writing-a-suite.md"] and ours
    for page, plan in ours:
        event = planned(check(plan, page), machine, tmp_path / page.replace("/", "-"))
        assert event.estimates_s and not event.skipped, (page, machine, event.skipped)


def test_validate_takes_the_name_run_takes_and_checks_every_file_a_line_each(tmp_path):
    """`validate quick` as `run --plan quick`; a bad file among good ones is named, and so is the next."""
    from tests.support.cli_in_process import ddpbench as in_process

    bad, missing = tmp_path / "bad.yaml", tmp_path / "missing.yaml"
    bad.write_text("name: bad\nsuites: [{suite: nosuch}]\n")
    done = in_process("validate", "quick", bad, "hosts/local.yaml", missing, "seed001", cwd=REPO)
    assert done.returncode == 2
    assert done.stdout.splitlines() == ["quick: ok: shipped plan", "hosts/local.yaml: ok: hosts file", "seed001: ok: shipped plan"]
    first, second = done.stderr.splitlines()
    assert first.startswith(f"error: {bad}") and "nosuch" in first and second.startswith(f"error: {missing}: "), done.stderr


def test_the_p2p_gate_is_planned_where_gpus_share_a_host_never_on_a_cpu(tmp_path):
    """A CPU has no P2P: its plan announces no gate and runs none (bench/agent/gate.py)."""
    assert planned(load_plan("quick"), "CPU, 2 cores (idle)", tmp_path / "cpu").gate_s == 0
    assert planned(load_plan("quick"), "2x H200 (NV18)", tmp_path / "gpus").gate_s > 0


@pytest.mark.parametrize("name", plan_names())
def test_smoke_of_shipped_plan_is_priced_under_a_minute_on_a_cpu(name, tmp_path):
    event = planned(smoke(load_plan(name)), "CPU, 2 cores (idle)", tmp_path)
    assert sum(event.estimates_s.values()) + event.gate_s < SMOKE_LIMIT_S
    assert not any(re.search(r"-r\d+$", launch) for launch in event.launches)  # one launch each: no repeats


def run_on_cpu(tmp: Path, *args: str):
    hosts = tmp / "hosts.yaml"
    hosts.write_text(HOSTS_YAML)
    done = ddpbench("run", "--hosts", hosts, "--out", tmp / "results", *args)
    bundles = sorted((tmp / "results").glob("*/bundle.json"))
    return done, read_bundle(bundles[-1]) if bundles else None, bundles[-1] if bundles else None


def check_training_runs(bundle: dict) -> None:
    """What a user reads of every DDP run: its work, its tokens where it has them, the gradients its
    all-reduce moved, and the scaling and exposed communication of its N-process runs."""
    runs = bundle["hosts"][0]["runs"]
    has_allreduce = any(r["suite"] == "collectives" and r["params"]["op"] == "all_reduce" for r in runs)
    for run in (r for r in runs if r["suite"] == "ddp"):
        assert run["params"]["train_flops_per_sample"] > 0
        assert ("tokens_per_s" in run["metrics"]) == (run["params"]["model"] in TRANSFORMER_PRESETS)
        if run["world_size"] > 1:
            weight_bytes = 2 if run["params"]["weights_dtype"] == "bfloat16" else 4
            assert run["metrics"]["grad_allreduce_bytes"]["summary"]["median"] == weight_bytes * run["params"]["num_params"]
            assert run["derived"]["scaling_efficiency_fraction"] > 0
            assert math.isfinite(run["derived"]["exposed_comm_s"])
            assert (run["derived"]["predicted_step_time_s"] is not None) == has_allreduce


def check_ran(done, bundle: dict) -> None:
    assert done.returncode == 0, done.stderr
    host = bundle["hosts"][0]
    # Launches a CPU override makes identical to an earlier one are skipped, naming it.
    assert host["status"] == "ok" and all(l["status"] == "ok" or l["error"].startswith("the same configuration as launch")
                                          for l in host["launches"])
    assert host["runs"] and all(r["status"] == "ok" for r in host["runs"])
    check_training_runs(bundle)


@pytest.mark.slow
@pytest.mark.parametrize("name", plan_names())
def test_shipped_plan_smoke_runs_on_cpu(name, tmp_path):
    plan = load_plan(name)
    skip_without_diffusers(plan, "cpu")
    done, bundle, path = run_on_cpu(tmp_path, "--plan", name, "--smoke")
    check_ran(done, bundle)
    assert bundle["smoke"] is True and "smoke run:" in done.stderr
    assert all(l["status"] == "skipped" or l["duration_s"] < SMOKE_LIMIT_S for l in bundle["hosts"][0]["launches"])
    for run in bundle["hosts"][0]["runs"]:  # one sample each, none past it
        assert "sampling" not in run and len(run["metrics"][suites.get(run["suite"]).headline_metric]["samples"]) == 1
    report = path.parent / "report.md"
    assert report.read_text().splitlines()[2].startswith(f"**Smoke run: bundle {bundle['run_id']} ran every configuration once")
    assert (path.parent / "report.html").exists()
    checked = ddpbench("validate", path)
    assert checked.returncode == 0, checked.stderr


@pytest.mark.slow
def test_quick_at_product_settings_samples_every_configuration_in_its_launches(quick_run, quick_bundle):
    """The product's own sampling, on its smallest shipped plan (the session's default run): every
    configuration in the launches its cpu: side asks (launch_repeats 3), each run sampled past its
    minimum until clear or its budget."""
    bundle = quick_bundle
    check_ran(quick_run[0], bundle)
    assert "smoke" not in bundle
    host = bundle["hosts"][0]
    ran = [l["id"] for l in host["launches"] if l["status"] == "ok"]
    for first in (l for l in ran if not l.endswith(("-r2", "-r3"))):
        assert {f"{first}-r2", f"{first}-r3"} <= set(ran)
    assert all(r["sampling"]["samples"] >= LEAST_SAMPLES and r["sampling"]["past_minimum_s"] >= 0 for r in host["runs"])
