"""--resume trusts nothing in its run folder: whatever was planted there since the run (hard links to
files elsewhere, raw files of other names, other plans or other numbers, damaged or huge ones), the
resume writes only into files of its own, seals only what the run's plan measured, and says in one
line each what it leaves out. One real run of tests/plans/resume-tiny.yaml is copied for each case."""

from __future__ import annotations

import copy
import json
import os
import shutil
from pathlib import Path

import pytest

from bench.bundle import read_bundle, seal
from bench.controller.resume import _first_of, load_previous
from tests.conftest import TEST_PLANS, bundle_path_from, cli

COLLECTIVES, DDP = "00-collectives-default-ws2", "01-ddp-default-ws2"


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """The folder of a run that finished (its bundle, report, run.json and the host's raw.json)."""
    done = cli("run", "--plan", TEST_PLANS / "resume-tiny.yaml", "--out", tmp_path_factory.mktemp("finished"), timeout=300)
    assert done.returncode == 0, done.stderr
    return bundle_path_from(done.stdout).parent


@pytest.fixture
def folder(finished, tmp_path) -> Path:
    """A copy of the finished run's folder as kill -9 leaves one: no bundle.json."""
    copied = Path(shutil.copytree(finished, tmp_path / finished.name))
    (copied / "bundle.json").unlink()
    return copied


def host_dir(folder: Path) -> Path:
    return folder / "hosts" / "local"


def raw_of(folder: Path) -> dict:
    return json.loads((host_dir(folder) / "raw.json").read_text())


def write_raw(folder: Path, name: str, raw: dict) -> Path:
    path = host_dir(folder) / name
    path.write_text(json.dumps(raw))
    return path


def without(raw: dict, launch_id: str) -> dict:
    return {**raw, "launches": [l for l in raw["launches"] if l["id"] != launch_id],
            "runs": [r for r in raw["runs"] if r["launch_id"] != launch_id]}


def resume(folder: Path):
    done = cli("run", "--resume", folder, "--out", folder.parent, timeout=300)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def warnings(done, folder: Path) -> list[str]:
    prefix = f"warning: --resume {folder}: "
    return [line[len(prefix):] for line in done.stderr.splitlines() if line.startswith(prefix)]


def test_hard_links_planted_in_the_run_folder_are_replaced_never_written_through(folder, tmp_path):
    """The collectives launch runs again: its log and spec, the host's plan and the report's plots are
    written anew where hard links to files elsewhere stood, and those files keep their content."""
    write_raw(folder, "raw.json", without(raw_of(folder), COLLECTIVES))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    planted = [host_dir(folder) / "launches" / f"{COLLECTIVES}.log", host_dir(folder) / "launches" / f"{COLLECTIVES}.json",
               host_dir(folder) / "plan.json", folder / "busbw.png", folder / "busbw.svg"]
    victims = {}
    for i, path in enumerate(planted):
        victim = elsewhere / f"precious-{i}"
        victim.write_text(f"precious {i}\n")
        path.unlink()
        os.link(victim, path)
        victims[victim] = path
    done = resume(folder)
    assert done.returncode == 0, done.stderr
    for victim, path in victims.items():
        assert victim.read_text() == f"precious {victim.name[-1]}\n", f"{path} was written through to {victim}"
        assert path.stat().st_nlink == 1 and path.read_bytes() != victim.read_bytes()  # the launch's own (a gloo log may be empty)
    host = read_bundle(folder / "bundle.json")["hosts"][0]
    assert [l["id"] for l in host["launches"]] == [COLLECTIVES, DDP]


def test_only_raw_json_and_raw_nnn_json_are_read_and_each_stranger_is_said(folder):
    """raw.evil.json (every sample x1000), a raw file of a 246-digit number and a damaged raw.001.json
    beside an intact raw.json: the bundle holds raw.json's figures, and each stranger gets its line."""
    raw = raw_of(folder)
    evil = copy.deepcopy(raw)
    for run in evil["runs"]:
        for metric in run["metrics"].values():
            metric["samples"] = [x * 1000 for x in metric["samples"]]
    write_raw(folder, "raw.evil.json", evil)
    long_name = f"raw.{'9' * 246}.json"
    write_raw(folder, long_name, evil)
    (host_dir(folder) / "raw.001.json").write_text("[" * 100_000 + "]" * 100_000)
    done = resume(folder)
    assert done.returncode == 0, done.stderr
    said = warnings(done, folder)
    assert "host local: 'raw.evil.json' is no file ddpbench writes (raw.json, raw.NNN.json); left out" in said
    assert f"host local: '{long_name[:40]}...{long_name[-12:]}' is no file ddpbench writes (raw.json, raw.NNN.json); left out" in said
    (damaged,) = [line for line in said if "raw.001.json" in line]
    assert damaged == (f"host local: {host_dir(folder) / 'raw.001.json'}: nested too deeply to be a raw.json; this is not a "
                       "ddpbench raw.json; its launches run again")
    host = read_bundle(folder / "bundle.json")["hosts"][0]
    assert [r["metrics"] for r in host["runs"]] == [r["metrics"] for r in raw["runs"]]  # raw.json's, not x1000
    assert len(said) == 3, said


def fingerprint_broken(raw: dict) -> dict:
    return {**raw, "fingerprint": {**raw["fingerprint"], "cpu": "a CPU"}}


@pytest.mark.parametrize("damage, says", [
    (lambda path, raw: path.write_text("[" * 100_000 + "]" * 100_000), "nested too deeply to be a raw.json"),
    (lambda path, raw: path.write_text(json.dumps(fingerprint_broken(raw))), "field fingerprint.cpu: 'a CPU' is not of type 'object'"),
    (lambda path, raw: os.truncate(path, 300 << 20), "314572800 bytes is over the 268435456-byte limit for a raw.json"),
    (lambda path, raw: path.write_text(json.dumps(raw)[:5000]), "truncated (the JSON ends early)"),
], ids=["nested_100000_deep", "schema_invalid_fingerprint", "too_large", "cut_short"])
def test_a_raw_json_that_cannot_be_read_is_said_not_silently_dropped(folder, damage, says):
    raw = raw_of(folder)
    damage(host_dir(folder) / "raw.json", raw)
    previous = load_previous(folder)
    (line,) = previous.left_out
    assert line.startswith(f"host local: {host_dir(folder) / 'raw.json'}: ") and says in line and line.endswith("its launches run again")
    assert "local" not in previous.entries  # every launch runs again, as said


def test_a_run_that_disagrees_with_its_launch_or_the_plan_is_left_out_with_its_launch(folder):
    raw = raw_of(folder)
    liar = copy.deepcopy(raw)
    next(r for r in liar["runs"] if r["launch_id"] == DDP)["world_size"] = 1048576  # under launch ...-ws2
    write_raw(folder, "raw.json", liar)
    other_plan = copy.deepcopy(raw)  # a run of world size 1 beside a plan of world size 2
    for launch in other_plan["launches"]:
        launch.update(id=launch["id"].replace("-ws2", "-ws1"), world_size=1)
    for run in other_plan["runs"]:
        run.update(launch_id=run["launch_id"].replace("-ws2", "-ws1"), world_size=1)
    write_raw(folder, "raw.001.json", other_plan)
    previous = load_previous(folder)
    assert previous.left_out == [
        "host local: launch '00-collectives-default-ws1' ran 1 ranks on 1 node(s), the plan's world sizes are 2 per node; left out of the bundle",
        "host local: launch '01-ddp-default-ws1' ran 1 ranks on 1 node(s), the plan's world sizes are 2 per node; left out of the bundle",
        f"host local: raw.json: a run of launch '{DDP}' claims world size 1048576, the launch ran 2; the launch and its runs are "
        "left out: it runs again",
    ]
    entry = previous.entries["local"]
    assert [l["id"] for l in entry["launches"]] == [COLLECTIVES] and {r["launch_id"] for r in entry["runs"]} == {COLLECTIVES}


def test_a_sealed_bundle_in_the_folder_is_checked_as_a_raw_file_is(folder, finished):
    """A bundle.json resealed with a run of another model: its launch is left out and runs again."""
    bundle = read_bundle(finished / "bundle.json")
    next(r for r in bundle["hosts"][0]["runs"] if r["suite"] == "ddp")["params"]["model"] = "gpt2"
    (folder / "bundle.json").write_text(json.dumps(seal({k: v for k, v in bundle.items() if k != "sha256"})))
    previous = load_previous(folder)
    assert previous.left_out == [f"host local: bundle.json: a run of launch '{DDP}' has model 'gpt2', which the plan's entry "
                                 "does not ask for; the launch and its runs are left out: it runs again"]
    assert [l["id"] for l in previous.entries["local"]["launches"]] == [COLLECTIVES]


def test_the_runs_own_report_after_a_resume_renders_runs_at_the_schemas_edges(folder):
    """Every time of the finished runs the smallest positive double, every other figure 0: valid, so
    sealed; the run's own report is written with it, and no traceback."""
    raw = raw_of(folder)
    for run in raw["runs"]:
        for name, metric in run["metrics"].items():
            metric["samples"] = [5e-324 if name in ("step_time_s", "per_sample_gpu_time_s", "time_s", "time_max_rank_s") else 0.0
                                 ] * len(metric["samples"])
    write_raw(folder, "raw.json", raw)
    done = resume(folder)
    assert done.returncode == 0, done.stderr
    assert f"report: {folder / 'report.md'}" in done.stdout and (folder / "report.html").exists()


def _run_of(raw: dict, launch_id: str) -> dict:
    return next(r for r in raw["runs"] if r["launch_id"] == launch_id)


NODES_2 = {"count": 2, "ranks_per_node": 1, "emulated": True, "proof": "planned"}
FORGED_SETTINGS = {
    "algorithm": (lambda run: run["transport"].update(algorithm="tree"),
                  "claims NCCL algorithm 'tree', the launch asked for NCCL's own algorithm"),
    "protocol": (lambda run: run["transport"].update(protocol="ll128"),
                 "claims NCCL protocol 'll128', the launch asked for NCCL's own protocol"),
    "env": (lambda run: run.update(env={"NCCL_P2P_DISABLE": "1"}),
            "claims env {'NCCL_P2P_DISABLE': '1'}, the plan's entry sets {}"),
    "nodes": (lambda run: run["transport"].update(nodes=NODES_2),
              "claims 2 node(s) of 1 rank(s), the launch ran one node"),
    "gpus": (lambda run: run.update(gpus=[0, 1]), "claims GPUs [0, 1], the launch ran on the first ones"),
    "profiled_in": (lambda run: run.update(profiled_in="00-collectives-default-ws2"),
                    "claims its kernels were profiled by launch '00-collectives-default-ws2', not its entry's first launch"),
    "backend": (lambda run: run["transport"].update(backend="nccl", env={"NCCL_P2P_DISABLE": "1"}),
                "claims backend 'nccl' with preset env {'NCCL_P2P_DISABLE': '1'}, its preset 'default' runs gloo on this host"),
}


@pytest.mark.parametrize("forge", FORGED_SETTINGS, ids=FORGED_SETTINGS.keys())
def test_a_run_claiming_a_setting_its_launch_never_ran_is_left_out_with_its_launch(forge, folder):
    """Each run records what its launch ran (NCCL's algorithm and protocol, its nodes and GPUs, its
    entry's env, its preset's backend): a raw.json whose run claims another is not sealed."""
    change, says = FORGED_SETTINGS[forge]
    raw = raw_of(folder)
    change(_run_of(raw, DDP))
    write_raw(folder, "raw.json", raw)
    previous = load_previous(folder)
    assert previous.left_out == [f"host local: raw.json: a run of launch '{DDP}' {says}; the launch and its runs are left out: "
                                 "it runs again"]
    entry = previous.entries["local"]
    assert [l["id"] for l in entry["launches"]] == [COLLECTIVES] and {r["launch_id"] for r in entry["runs"]} == {COLLECTIVES}


def test_a_resume_seals_what_its_launches_ran_not_what_a_raw_file_claims(folder):
    """Two runs claim settings their launches never ran: the resume says so, runs both launches again,
    and the bundle's runs hold the plan's own setting (no env, one node, no NCCL algorithm)."""
    raw = raw_of(folder)
    _run_of(raw, COLLECTIVES).update(env={"NCCL_ALGO": "Tree"})
    _run_of(raw, DDP)["transport"].update(nodes=NODES_2)
    write_raw(folder, "raw.json", raw)
    done = resume(folder)
    assert done.returncode == 0, done.stderr
    said = warnings(done, folder)
    assert len(said) == 2 and all("the launch and its runs are left out: it runs again" in line for line in said), said
    runs = read_bundle(folder / "bundle.json")["hosts"][0]["runs"]
    assert {r["launch_id"] for r in runs} == {COLLECTIVES, DDP}
    assert all("env" not in r and "nodes" not in r["transport"] and "algorithm" not in r["transport"] for r in runs)


def test_a_sealed_bundle_whose_plan_blinds_the_evidence_is_refused(folder, finished):
    """The plan a resume runs is checked as a plan file is: NCCL_DEBUG=WARN in bundle.json's plan is refused."""
    bundle = read_bundle(finished / "bundle.json")
    bundle["plan"]["suites"][0]["env"] = {"NCCL_DEBUG": "WARN"}
    (folder / "bundle.json").write_text(json.dumps(seal({k: v for k, v in bundle.items() if k != "sha256"})))
    done = resume(folder)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"error: {folder / 'bundle.json'}: plan: field suites[0].env: NCCL_DEBUG=WARN changes NCCL's log")


def test_a_resume_runs_again_a_launch_whose_phases_no_launch_could_take_and_says_why(folder):
    """A raw.json whose DDP launch claims 10^15 s measured: the launch runs again, and the run's last line
    says where the time of the launches it ran or kept went, not 10^15 s."""
    raw = raw_of(folder)
    forged = next(launch for launch in raw["launches"] if launch["id"] == DDP)
    forged["phases"]["measured_s"] = 1e15
    forged["duration_s"] = sum(forged["phases"].values())
    write_raw(folder, "raw.json", raw)
    done = resume(folder)
    assert done.returncode == 0, done.stderr
    assert warnings(done, folder) == [f"host local: launch '{DDP}' records 1e+15 s, more than a launch can take under the "
                                      "plan's timeout_s of 120 s (300 s with its processes' exit); left out of the bundle"]
    (line,) = [line for line in done.stdout.splitlines() + done.stderr.splitlines() if line.startswith("launch time: ")]
    assert "e+" not in line and int(line.split(" s in ")[0].split()[-1]) < 1000, line
    launches = read_bundle(folder / "bundle.json")["hosts"][0]["launches"]
    assert [l["id"] for l in launches] == [COLLECTIVES, DDP] and all(l["duration_s"] < 300 for l in launches)


def test_a_gpu_repeats_kernels_may_come_only_from_its_own_entrys_first_launch():
    assert _first_of("01-ddp-default-ws1", "01-ddp-default-ws1-r2")
    assert not _first_of("01-ddp-default-ws2", "01-ddp-default-ws1-r2")  # another world size
    assert not _first_of("01-ddp-default-ws1-r2", "01-ddp-default-ws1-r3")  # a repeat never profiles for another
    assert not _first_of("01-ddp-default-ws1", "01-ddp-default-ws1")  # a first launch profiles its own
