"""Records the schemas allow and numbers no machine gives, each refused before anything runs or taken
with its reason: a plan's precision at the edges of a float, the raw records a resume reads back
(phases, jobs, sampling) against what their launches ran, sampling records that contradict
themselves, a difference a busy machine cannot explain, something other than a file where an output
goes, the agent's switches, a launch stuck in its start-up, and YAML as users write it. Each case
makes its own inputs, from a published bundle or a few lines of YAML; the property tests draw
precision blocks, sampling records, phases and jobs over their whole schema range, extremes included."""

from __future__ import annotations

import copy
import gzip
import json
import math
import os
import socket
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.agent import switches
from bench.agent.estimate import plan_modelled
from bench.agent.launch import timeout_cause
from bench.agent.measure import phases_s
from bench.agent.planning import plan_launches
from bench.bundle import seal
from bench.common import launch_time
from bench.common.host import Capabilities
from bench.common.protocol import Mark
from bench.common.run import Run
from bench.common.sampling import (
    MAX_SAMPLES, TYPICAL_CV, Precision, contradiction, expected_sampling_s, sampling_outcome, samples_needed,
)
from bench.controller import plans
from bench.controller.resume import Previous, load_previous, longest_launch_s
from bench.errors import PlanError, UserError
from tests.conftest import REPO
from tests.support.cli_in_process import ddpbench
from tests.support.schema_strategy import Derived

PUBLISHED = REPO / "benchmarks" / "results" / "bundles"
# The plan quick with its precision on one GPU host: 6 launches in 4 jobs, 16 runs, each with its sampling record.
SAMPLED = json.loads(gzip.decompress((PUBLISHED / "20261127T115002Z-3cea74.bundle.json.gz").read_bytes()))
# Two runs of one plan on one 2x H100, run by run comparable.
ORIGINAL, NEW = PUBLISHED / "20261125T213922Z-6e20a7.bundle.json", PUBLISHED / "20261125T214225Z-2c5662.bundle.json"
SHARING, SHARED = "00-collectives-default-ws2", "01-ddp-default-ws2"  # the first launch of a job, and the next in it
ALONE = "01-ddp-default-ws1"  # the one launch of its own job
CPU = Capabilities(gpu_count=0, logical_cpus=2)
PROPERTY = settings(max_examples=40, derandomize=True, database=None, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def one_line_error(done, *parts: str) -> str:
    """The one line a refusal prints (exit status 2, no traceback), holding each of parts."""
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and done.stderr.startswith("error: "), done.stderr
    assert all(part in done.stderr for part in parts), done.stderr
    return done.stderr


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def sealed(bundle: dict) -> dict:
    return seal({key: value for key, value in bundle.items() if key != "sha256"})


# --- A plan's precision ---------------------------------------------------------------------------

TINY_PLAN = """name: tiny
precision: {PRECISION}
suites:
  - suite: ddp
    world_sizes: [2]
    env: {{OMP_NUM_THREADS: 1}}
    params: {{model: tiny, micro_batch: 2, seq_len: 16, steps: 2, warmup_steps: 1, precision: fp32, compile: false}}
"""


@pytest.mark.parametrize("field, value", [("halfwidth_fraction", "5e-324"), ("halfwidth_fraction", "1e-154"),
                                          ("lost_width_fraction", "2.2250738585072014e-308")])
def test_a_precision_no_count_of_samples_shows_is_refused_before_anything_runs(field, value, tmp_path):
    plan = write(tmp_path / "plan.yaml", TINY_PLAN.format(PRECISION=f"{{{field}: {value}}}"))
    one_line_error(ddpbench("validate", plan), f"field precision.{field}: ", "is less than the minimum of 0.0001",
                   "fix the plan")


@pytest.mark.parametrize("halfwidth", [0.0, 5e-324, 2.2250738585072014e-308, 1e-154, 1e-4, 0.5])
def test_the_sampling_arithmetic_holds_at_any_half_width(halfwidth):
    """The samples a target needs and what they cost: at most the samples a bundle keeps, never an overflow."""
    for cv in (0.0, *TYPICAL_CV.values(), 1e300):
        needed = samples_needed(halfwidth, cv)
        assert isinstance(needed, int) and 0 <= needed <= MAX_SAMPLES
        assert needed == MAX_SAMPLES or halfwidth >= 1e-4 or cv == 0.0
        assert 0.0 <= expected_sampling_s(needed, 10, 1.0, 3600.0) <= 3600.0


@PROPERTY
@given(Derived(edges=True).of("plan", "precision"))
def test_any_precision_the_schema_allows_is_refused_or_priced(precision):
    """Refused while the plan is checked or planned (before anything runs), or the agent's estimate of
    every launch is a finite number of seconds."""
    plan = plans.with_defaults(plans.load_plan("quick"))
    plan["precision"] = precision
    try:
        checked = plans.check({key: value for key, value in plan.items()}, "plan")
        launches = plan_launches(checked, CPU)
    except (UserError, PlanError):
        return
    target = Precision.of(checked).target(checked["timeout_s"], 3)
    assert 0 < target.scaled_halfwidth_fraction <= target.halfwidth_fraction and target.budget_s >= 0
    for modelled in plan_modelled([launch for launch in launches if not launch.skipped_reason], CPU).values():
        assert math.isfinite(modelled.seconds) and modelled.seconds >= modelled.sampling_s >= 0


# --- Sampling records -------------------------------------------------------------------------------

def _with_sampling(bundle: dict, **record) -> dict:
    bundle = copy.deepcopy(bundle)
    bundle["hosts"][0]["runs"][3]["sampling"].update(record)
    return sealed(bundle)


@pytest.mark.parametrize("record, says", [
    ({"halfwidth_fraction": 0.5}, "says met with its median's interval +-0.5, wider than its target +-0.02"),
    ({"met": False}, "says met false beside stopped_by 'target': a run meets its target exactly where the target stops it"),
    ({"stopped_by": "budget share"}, "says met true beside stopped_by 'budget share': a run meets its target exactly where"),
], ids=["met_over_its_target", "not_met_stopped_by_target", "met_stopped_by_budget"])
def test_a_sampling_record_that_contradicts_itself_is_refused_by_validate_and_compare(record, says, tmp_path):
    path = write(tmp_path / "bundle.json", json.dumps(_with_sampling(SAMPLED, **record)))
    for done in (ddpbench("validate", path), ddpbench("compare", path, path, "--out", tmp_path / "verdict")):
        one_line_error(done, f"{path}: field hosts[0].runs[3].sampling: {says}", "; ddpbench never writes such a record")


@PROPERTY
@given(Derived(edges=True).of("bundle", "run", "sampling"))
def test_any_sampling_record_is_judged_met_only_where_its_numbers_say_so(record):
    run = {**SAMPLED["hosts"][0]["runs"][0], "sampling": record}
    launch = SAMPLED["hosts"][0]["launches"][0]
    found = contradiction(record)
    outcome = sampling_outcome([Run(run)])
    if found is None:
        assert record["met"] == (record["stopped_by"] == "target")
        assert not record["met"] or record["halfwidth_fraction"] <= record["target_halfwidth_fraction"]
        assert (outcome == "met") == record["met"]
    taken = _resumed().checked(_entry_with(run, launch), "raw.json")
    if found is not None:  # a resume never takes it either
        assert not taken["runs"]


RESUMED_PLAN = plans.check(copy.deepcopy(SAMPLED["plan"]), "plan")


def _resumed() -> Previous:
    """What a resume of the published run takes of a raw file (Previous.checked)."""
    return Previous(Path("unused"), SAMPLED["run_id"], SAMPLED["started_at"], RESUMED_PLAN)


def _entry_with(run: dict, launch: dict) -> dict:
    host = SAMPLED["hosts"][0]
    return {**host, "launches": [launch], "runs": [run]}


# --- What a resume reads back ------------------------------------------------------------------------

@pytest.fixture
def folder(tmp_path) -> Path:
    """A run folder of the published precision run as kill -9 leaves one: run.json and the host's raw.json."""
    found = tmp_path / SAMPLED["run_id"]
    (found / "hosts" / "local").mkdir(parents=True)
    write(found / "run.json", json.dumps({key: SAMPLED[key] for key in ("run_id", "started_at", "plan")}))
    host = SAMPLED["hosts"][0]
    write_raw(found, {"agent_version": SAMPLED["tool"]["version"], "started_at": SAMPLED["started_at"], "complete": True,
                      "fingerprint": host["fingerprint"], "launches": host["launches"], "runs": host["runs"]})
    return found


def write_raw(folder: Path, raw: dict) -> None:
    write(folder / "hosts" / "local" / "raw.json", json.dumps(raw))


def raw_of(folder: Path) -> dict:
    return json.loads((folder / "hosts" / "local" / "raw.json").read_text())


def _launch(raw: dict, launch_id: str) -> dict:
    return next(launch for launch in raw["launches"] if launch["id"] == launch_id)


def _sampling(raw: dict, launch_id: str) -> dict:
    return next(run for run in raw["runs"] if run["launch_id"] == launch_id)["sampling"]


def _phases(launch: dict, **seconds) -> None:
    launch["phases"].update(seconds)
    launch["duration_s"] = sum(launch["phases"].values())


FORGED = {
    "phases_of_1e15_s": (SHARED, lambda raw: _phases(_launch(raw, SHARED), measured_s=1e15),
                         f"launch '{SHARED}' records 1e+15 s, more than a launch can take under the plan's timeout_s of "
                         "600 s (1260 s with its processes' exit); left out of the bundle"),
    "phases_beside_another_duration": (SHARED, lambda raw: _launch(raw, SHARED)["phases"].update(measured_s=1e15),
                                       f"launch '{SHARED}' records phases summing to 1e+15 s, its duration_s is 3.824 s; "
                                       "left out of the bundle"),
    "a_job_that_never_ran": (SHARED, lambda raw: _launch(raw, SHARED).update(job="00-collectives-p2p_off-ws2"),
                             f"launch '{SHARED}' names job '00-collectives-p2p_off-ws2', whose first launch the same file "
                             "does not record; left out of the bundle"),
    "a_job_of_another_size": (ALONE, lambda raw: _launch(raw, ALONE).update(job=SHARING),
                              f"launch '{ALONE}' names job '{SHARING}', whose first launch ran 2 ranks on 1 node(s), not its "
                              "1 on 1; left out of the bundle"),
    "a_job_started_twice": (SHARED, lambda raw: _phases(_launch(raw, SHARED), imports_s=6.0),
                            f"launch '{SHARED}' records the start-up of job '{SHARING}' (imports), which only the job's first "
                            "launch pays; left out of the bundle"),
    "met_over_its_target": (SHARED, lambda raw: _sampling(raw, SHARED).update(halfwidth_fraction=0.9),
                            f"raw.json: a run of launch '{SHARED}': its sampling record says met with its median's interval "
                            "+-0.9, wider than its target +-0.0177; the launch and its runs are left out: it runs again"),
    "no_sampling_record": (SHARED, lambda raw: next(r for r in raw["runs"] if r["launch_id"] == SHARED).pop("sampling"),
                           f"raw.json: a run of launch '{SHARED}' has no sampling record, and the plan's precision asks one of "
                           "every run that succeeded; the launch and its runs are left out: it runs again"),
    "another_target": (SHARED, lambda raw: _sampling(raw, SHARED).update(target_halfwidth_fraction=0.5, halfwidth_fraction=0.1),
                       f"raw.json: a run of launch '{SHARED}' sampled toward +-0.5, the plan's precision asks +-0.0177 or "
                       "+-0.02; the launch and its runs are left out: it runs again"),
    "more_budget_than_the_plan_gives": (SHARED, lambda raw: _sampling(raw, SHARED).update(budget_s=1e15),
                                        f"raw.json: a run of launch '{SHARED}' had 1e+15 s to sample, more than the plan's "
                                        "budget_fraction of timeout_s (150 s); the launch and its runs are left out: it runs again"),
    "sampling_past_its_launch": (SHARED, lambda raw: _sampling(raw, SHARED).update(past_minimum_s=1e15),
                                 f"raw.json: a run of launch '{SHARED}' sampled 1e+15 s past its minimum, in a launch of "
                                 "3.824 s; the launch and its runs are left out: it runs again"),
}


@pytest.mark.parametrize("forged", FORGED, ids=FORGED.keys())
def test_a_resume_leaves_out_a_record_its_launches_cannot_have_made_and_says_why(forged, folder):
    launch_id, forge, says = FORGED[forged]
    raw = raw_of(folder)
    forge(raw)
    write_raw(folder, raw)
    previous = load_previous(folder)
    assert previous.left_out == [f"host local: {says}"]
    kept = previous.entries["local"]
    assert launch_id not in {launch["id"] for launch in kept["launches"]} | {run["launch_id"] for run in kept["runs"]}
    assert len(kept["launches"]) == 5 and not any(math.isinf(launch["duration_s"]) for launch in kept["launches"])


def test_a_resume_of_a_plan_without_precision_leaves_out_runs_that_sampled_toward_one(folder):
    run = json.loads((folder / "run.json").read_text())
    run["plan"].pop("precision")
    write(folder / "run.json", json.dumps(run))
    previous = load_previous(folder)
    assert len(previous.left_out) == 6 and all("records sampling toward a precision target, and the plan asks none"
                                               in line for line in previous.left_out), previous.left_out
    assert previous.entries["local"]["launches"] == []


def test_the_published_records_are_each_taken_by_a_resume(folder):
    previous = load_previous(folder)
    assert previous.left_out == [] and len(previous.entries["local"]["runs"]) == 16


DRAWN = Derived(edges=True)
DURATIONS, PHASES, LAUNCH_IDS = (DRAWN.of("bundle", "launch", "duration_s"), DRAWN.of("bundle", "launch", "phases"),
                                 DRAWN.of("bundle", "launch_id"))


@st.composite
def launch_records(draw) -> dict:
    """The published host's launches, one of them with its duration, phases and job drawn over their schema, and its runs."""
    published = SAMPLED["hosts"][0]
    host = {**published, "launches": [dict(launch) for launch in published["launches"]]}
    launch = draw(st.sampled_from(host["launches"]))
    host["runs"] = [run for run in published["runs"] if run["launch_id"] == launch["id"]]
    launch["duration_s"] = draw(DURATIONS)
    launch["phases"] = draw(PHASES)
    launch["job"] = draw(st.sampled_from([l["id"] for l in host["launches"]]) | LAUNCH_IDS)
    if draw(st.booleans()):  # phases that sum to the duration, as the agent writes them
        launch["duration_s"] = sum(launch["phases"].values())
    return host


@PROPERTY
@given(launch_records())
def test_any_phases_and_job_are_left_out_or_sum_to_a_launch_the_plan_bounds(host):
    kept = _resumed().checked(host, "raw.json")
    for launch in kept["launches"]:
        assert launch["duration_s"] <= longest_launch_s(SAMPLED["plan"]["timeout_s"])
        assert sum(launch["phases"].values()) == pytest.approx(launch["duration_s"], abs=0.011)
        assert launch["job"] in {l["id"] for l in host["launches"]}
    line = launch_time.summary_line("local", kept["launches"])
    assert line is None or "inf" not in line and "nan" not in line


# --- A busy machine ----------------------------------------------------------------------------------

def _slower_on_a_busy_machine(factor: float, share: float) -> dict:
    """The second published run as if its collectives' bandwidths had been `factor` times lower while others took
    `share` of its CPU (what verify judges them by: their times are left, the schema bounds them)."""
    bundle = json.loads(NEW.read_text())
    host = bundle["hosts"][0]
    for run in host["runs"]:
        if run["suite"] == "collectives":
            for name, metric in run["metrics"].items():
                if name.endswith("_gbps"):
                    metric.update(samples=[x / factor for x in metric["samples"]],
                                  **{key: metric[key] / factor for key in ("median", "mean", "stdev", "p5", "p95") if key in metric})
    for launch in host["launches"]:
        launch["cpu_taken_by_others_fraction"] = share
    return sealed(bundle)


def test_a_busy_machine_excuses_no_more_than_the_cpu_others_took(tmp_path):
    """Others took 40% of the new run's CPU: that can make it at most (1 / 0.6)^2 = 2.78 times slower.
    Twice as slow stays inconclusive; 10^18 times slower is slower, and says why the machine cannot explain it."""
    verdicts = {}
    for factor in (2.0, 1e18):
        new = write(tmp_path / f"new-{factor:g}.json", json.dumps(_slower_on_a_busy_machine(factor, 0.4)))
        done = ddpbench("compare", ORIGINAL, new, "--out", tmp_path / f"{factor:g}")
        assert done.returncode in (1, 3), done.stderr
        rows = json.loads((tmp_path / f"{factor:g}" / "verdict.json").read_text())["runs"]
        verdicts[factor] = [row for row in rows if row["metric"] == "busbw_gbps" and row["world_size"] == 2]
    assert verdicts[2.0] and {row["inconclusive_because"] for row in verdicts[2.0]} == {"busy machine"}
    assert verdicts[1e18] and {row["verdict"] for row in verdicts[1e18]} == {"slower"}
    for row in verdicts[1e18]:
        assert row["reason"].startswith("slower beyond its interval, and beyond a busy machine: the new run is at least ")
        assert row["reason"].endswith("times slower, more than the other processes on its machine can explain (they took 40% "
                                      "of its CPU: at most 2.78 times)")


# --- Where a file goes -------------------------------------------------------------------------------

def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _socket(path: Path) -> None:
    with socket.socket(socket.AF_UNIX) as bound:
        bound.bind(str(path))


def _link(path: Path) -> None:
    path.symlink_to(path.parent.parent / "elsewhere")


PLANTED = {"folder": Path.mkdir, "fifo": _fifo, "socket": _socket, "symbolic link": _link}


@pytest.mark.parametrize("kind", PLANTED)
@pytest.mark.parametrize("name", ["answer-throughput-lost.json", "report.md"])
def test_a_report_refuses_anything_but_a_file_where_it_writes_one(kind, name, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    PLANTED[kind](out / name)
    done = ddpbench("report", ORIGINAL, "--out", out)
    one_line_error(done, f"{out / name}: a {kind} ", "remove it or choose another folder")
    assert [path.name for path in out.iterdir()] == [name] and not (tmp_path / "elsewhere").exists()


def test_a_verdict_refuses_a_folder_where_it_writes_a_file(tmp_path):
    (tmp_path / "out" / "verdict.json").mkdir(parents=True)
    one_line_error(ddpbench("compare", ORIGINAL, NEW, "--out", tmp_path / "out"),
                   f"{tmp_path / 'out' / 'verdict.json'}: a folder where the verdict writes a file")


# --- The agent's switches, and a launch stuck in its start-up ----------------------------------------

@pytest.mark.parametrize("value, on", [(None, True), ("", True), ("1", True), ("TRUE", True), ("yes", True), (" on ", True),
                                       ("0", False), ("false", False), ("No", False), ("OFF", False)])
def test_each_switch_takes_the_usual_spellings(value, on):
    for name in switches.SWITCHES:
        assert switches.on(name, {} if value is None else {name: value}) is on


def test_a_switch_of_another_value_is_refused_in_the_hosts_file(tmp_path):
    hosts = write(tmp_path / "hosts.yaml", "hosts:\n  - name: local\n    runtime: local\n    env: {DDPBENCH_TIMELINE: disabled}\n")
    one_line_error(ddpbench("validate", hosts), f"{hosts}: host 'local': env: DDPBENCH_TIMELINE='disabled' is neither on nor off; "
                                                "set it to 1 or 0 (or true/yes/on, false/no/off), or unset it")


@pytest.mark.parametrize("phases, stopped, says", [
    ([], "spawn", "torchrun's start and the ranks' `import torch`"),
    (["imports"], "imports", "the ranks' imports of the agent and its suite"),
    (["imports", "device", "init"], "init", "the process group's start, which waits for every rank"),
])
def test_a_launch_that_timed_out_in_its_start_up_names_the_phase_it_stopped_in(phases, stopped, says):
    """Its rank 0 never said what it was doing (that starts with the suite's set-up): its marks say where it stood,
    as its phases do."""
    marks = [Mark(phase, 100.0 + index) for index, phase in enumerate(phases)]
    spent = phases_s(marks, 99.5, 160.0, first_of_job=True, last_of_job=True)
    assert max(spent, key=spent.get) == f"{stopped}_s"
    cause = timeout_cause(60, None, marks, first_of_job=True)
    assert cause.startswith(f"no result after 60 s (the plan's timeout_s): it stopped in its {stopped} phase ({says}) and "
                            "never got past it; "), cause
    assert timeout_cause(60, None, [Mark("other", 100.0)], first_of_job=False).endswith("a rank hung or a peer died")


# --- YAML as users write it --------------------------------------------------------------------------

def test_numbers_are_read_as_yaml_users_write_them(tmp_path):
    """`OMP_NUM_THREADS: 2` in an env is the text "2"; 5e-3 is a number (YAML 1.2), as 0.005 is."""
    plan = plans.load_plan(str(write(tmp_path / "plan.yaml", TINY_PLAN.format(PRECISION="{halfwidth_fraction: 5e-3}"))))
    assert plan["precision"]["halfwidth_fraction"] == 0.005 and plan["suites"][0]["env"] == {"OMP_NUM_THREADS": "1"}
    hosts = write(tmp_path / "hosts.yaml", "hosts:\n  - name: local\n    runtime: local\n    env: {OMP_NUM_THREADS: 2, NCCL_X: 1e3}\n")
    done = ddpbench("validate", hosts)
    assert done.returncode == 0 and done.stdout == f"{hosts}: ok: hosts file\n", done.stderr
    from bench.controller.hosts import load_hosts
    assert dict(load_hosts(hosts).hosts[0].env) == {"OMP_NUM_THREADS": "2", "NCCL_X": "1e3"}


def test_a_boolean_where_text_belongs_says_to_quote_it(tmp_path):
    hosts = write(tmp_path / "hosts.yaml", "hosts:\n  - name: local\n    runtime: local\n    env: {NCCL_IB_DISABLE: yes}\n")
    one_line_error(ddpbench("validate", hosts), "field hosts[0].env.NCCL_IB_DISABLE: True is not of type 'string'; YAML reads "
                   "true, false, yes, no, on and off unquoted as booleans: write the text in quotes")
