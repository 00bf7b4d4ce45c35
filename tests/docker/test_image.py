"""The pinned image against a real Docker engine: the Dockerfile builds on a debootstrapped base,
the agent in it runs the CPU suites, the controller merges its results into a bundle that names
the image; compose brings the same plan up; faults give one line that names the fix."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml

from bench.bundle import read_bundle
from bench.controller.shell import LocalShell
from bench.docker import image
from bench.docker.compose import compose_command
from bench.controller.docker_engine import Docker
from tests.conftest import REPO, cli, start_cli
from tests.support.docker_fixtures import CPU_IMAGE, TINY_PLAN, assert_ran_in_cpu_image, docker, failed_launch_logs

NO_ID = "sha256:" + "0" * 64


def one_error_line(done: subprocess.CompletedProcess) -> str:
    lines = done.stderr.strip().splitlines()
    assert "Traceback" not in done.stderr, done.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    return lines[0]


def write_hosts(folder: Path, **host) -> Path:
    entry = {"name": "box", "runtime": "docker", **host}
    path = folder / "hosts.yaml"
    path.write_text(json.dumps({"hosts": [entry]}))  # JSON is YAML
    return path


def write_plan(folder: Path) -> Path:
    path = folder / "tiny.yaml"
    path.write_text(TINY_PLAN)
    return path


def only_bundle(results: Path) -> dict:
    (path,) = results.glob("*/bundle.json")
    return read_bundle(path)


# --- the files themselves -------------------------------------------------------------------------

def test_dockerfile_passes_hadolint():
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
    done = subprocess.run([hadolint, "--failure-threshold", "warning", str(REPO / "Dockerfile")],
                          capture_output=True, text=True)
    assert done.returncode == 0 and not done.stdout.strip(), done.stdout + done.stderr


def test_locks_pin_every_package_with_hashes():
    def requirements(lock: str) -> dict:
        text = (image.LOCKS_DIR / f"{lock}.lock").read_text()
        entries = re.findall(r"^([A-Za-z0-9_.-]+)==(\S+) \\\n((?:\s+--hash=sha256:[0-9a-f]{64}(?: \\)?\n)+)", text, re.MULTILINE)
        named = re.findall(r"^([A-Za-z0-9_.-]+)\S*", text, re.MULTILINE)
        assert len(entries) == len(named), f"{lock}.lock: a requirement without an exact pin or a hash"
        return {name: version for name, version, _ in entries}

    for lock in ("cuda", "cuda-sdxl"):
        pins = requirements(lock)
        assert pins["torch"] == "2.11.0" and pins["nvidia-nccl-cu13"] == "2.28.9" and "numpy" in pins
    assert requirements("cuda-sdxl")["diffusers"]
    assert requirements("cpu")["torch"] == "2.13.0+cpu"
    assert image.split_reference(image.dockerfile_base())[:2] == ("nvidia/cuda", "13.0.1-runtime-ubuntu24.04")


def test_compose_files_validate(tmp_path):
    compose = compose_command(LocalShell())
    env = {**os.environ, "IMAGE": "ddpbench:test", "PLAN": str(tmp_path / "plan.json"), "OUT": str(tmp_path)}
    gpus = {}
    for name in ("single-node", "two-node", "cpu"):
        path = REPO / "compose" / f"{name}.yaml"
        done = subprocess.run([*compose, "--file", str(path), "config"], capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stderr
        for service, spec in yaml.safe_load(done.stdout)["services"].items():
            devices = spec.get("deploy", {}).get("resources", {}).get("reservations", {}).get("devices", [{}])
            gpus[f"{name}/{service}"] = (devices[0].get("capabilities"), devices[0].get("count") or devices[0].get("device_ids"))
    assert gpus == {"single-node/agent": (["gpu"], "all"), "two-node/node0": (["gpu"], ["0"]),
                    "two-node/node1": (["gpu"], ["1"]), "cpu/agent": (None, None)}
    unset = {k: v for k, v in env.items() if k != "IMAGE"}
    done = subprocess.run([*compose, "--file", str(REPO / "compose" / "cpu.yaml"), "config"], capture_output=True, text=True, env=unset)
    assert done.returncode != 0 and "set IMAGE to the pinned image" in done.stderr


# --- no engine ------------------------------------------------------------------------------------

def test_no_docker_engine_gives_one_line(tmp_path):
    nobody = {"DOCKER_HOST": f"unix://{tmp_path}/nobody.sock"}
    line = one_error_line(cli("image", "save", "--tag", "ddpbench:any", env=nobody))
    assert f"cannot reach the Docker engine at unix://{tmp_path}/nobody.sock" in line and "DOCKER_HOST" in line

    done = cli("run", "--hosts", str(write_hosts(tmp_path)), "--plan", str(write_plan(tmp_path)),
               "--out", str(tmp_path / "results"), env=nobody)
    assert done.returncode == 1
    assert "error: host box: failed: cannot reach the Docker engine" in done.stderr
    assert only_bundle(tmp_path / "results")["hosts"][0]["status"] == "failed"


# --- the image ------------------------------------------------------------------------------------

def test_image_holds_the_agent_and_its_pin(docker_cpu_image):
    pin = json.loads(docker("run", "--rm", CPU_IMAGE, "cat", "/etc/ddpbench/pin.json").stdout)
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert pin["image"] == CPU_IMAGE and pin["torch"] == "2.13.0+cpu"
    assert pin["base_image"] == "ddpbench-test-base:bookworm"
    assert pin["git_commit"].removesuffix("-dirty") == head
    probe = ("import importlib.util as u, bench.agent; "
             "print(u.find_spec('bench.controller') is None, u.find_spec('bench.docker') is None)")
    assert docker("run", "--rm", CPU_IMAGE, "python", "-c", probe).stdout.split() == ["True", "True"]
    assert "--hash=sha256:" in docker("run", "--rm", CPU_IMAGE, "cat", "/etc/ddpbench/requirements.lock").stdout


def test_docker_runtime_runs_the_plan_into_a_bundle_naming_the_image(docker_cpu_image, tmp_path):
    results = tmp_path / "results"
    done = cli("run", "--hosts", str(write_hosts(tmp_path, image=CPU_IMAGE)), "--plan", str(write_plan(tmp_path)),
               "--out", str(results))
    assert done.returncode == 0, done.stderr + failed_launch_logs(results)
    bundle = only_bundle(results)  # read_bundle validates schema and sha256
    (host,) = bundle["hosts"]
    assert_ran_in_cpu_image(host, docker_cpu_image)
    assert (results / bundle["run_id"] / "report.md").is_file()


def test_compose_cpu_file_runs_the_plan(docker_cpu_image, tmp_path):
    done = cli("image", "compose", "cpu", "--plan", str(write_plan(tmp_path)), "--image", CPU_IMAGE,
               "--out", str(tmp_path / "results"))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    bundle = only_bundle(tmp_path / "results")
    (host,) = bundle["hosts"]
    assert host["name"] == "cpu-agent" and host["status"] == "ok", host["error"]
    assert host["fingerprint"]["container"]["digest"] == docker_cpu_image["Id"]
    assert {run["suite"] for run in host["runs"]} == {"collectives", "ddp"}
    # compose took its container down
    assert docker("ps", "--all", "--quiet", "--filter", "label=com.docker.compose.project").stdout.strip() == ""


def test_container_killed_mid_run_keeps_what_finished(docker_cpu_image, tmp_path):
    results = tmp_path / "results"
    run = start_cli("run", "--hosts", write_hosts(tmp_path, image=CPU_IMAGE), "--plan", write_plan(tmp_path), "--out", results)
    output = {}
    reader = threading.Thread(target=lambda: output.update(zip(("out", "err"), run.communicate())), daemon=True)
    reader.start()
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:  # until the first launch is in raw.json
        raw = next(results.glob("*/hosts/box/raw.json"), None)
        if raw is not None and json.loads(raw.read_text())["launches"]:
            break
        assert run.poll() is None, "the run ended before it could be killed"
        time.sleep(0.5)
    (container,) = docker("ps", "--quiet", "--filter", "name=ddpbench-box-").stdout.split()
    docker("kill", container)
    reader.join(timeout=120)
    assert run.returncode == 1
    assert "was stopped (status 137" in output["err"] and "the launches it finished are kept" in output["err"]
    (host,) = only_bundle(results)["hosts"]
    assert host["status"] == "partial"
    assert host["launches"][0]["status"] == "ok" and host["runs"]


# --- pinning, saving, loading ---------------------------------------------------------------------

def test_image_lock_writes_the_registry_digest(docker_registry, tmp_path):
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(f"ARG BASE_IMAGE={docker_registry.tiny}\nFROM ${{BASE_IMAGE}}\n")
    assert image.lock_base(Docker(LocalShell()), dockerfile) == f"{docker_registry.tiny}@{docker_registry.tiny_digest}"
    assert dockerfile.read_text().splitlines()[0] == f"ARG BASE_IMAGE={docker_registry.tiny}@{docker_registry.tiny_digest}"


def test_image_digest_that_does_not_exist(docker_registry, tmp_path):
    repository = docker_registry.tiny.rsplit(":", 1)[0]
    for reference, expected in (
        (f"{repository}@sha256:{'1' * 64}", "is not in its registry"),
        (NO_ID, "an image id cannot be pulled; load the tarball that holds it"),
    ):
        results = tmp_path / reference[-6:]
        done = cli("run", "--hosts", str(write_hosts(tmp_path, image=reference)), "--plan", str(write_plan(tmp_path)),
                   "--out", str(results))
        assert done.returncode == 1 and "Traceback" not in done.stderr
        assert f"error: host box: failed: image {reference}" in done.stderr and expected in done.stderr


def test_image_save_and_load_round_trip(docker_registry, tmp_path):
    tarball = tmp_path / "tiny.tar"
    done = cli("image", "save", "--tag", docker_registry.tiny, "--out", str(tarball))
    assert done.returncode == 0, done.stderr
    image_id = docker("image", "inspect", "--format", "{{.Id}}", docker_registry.tiny).stdout.strip()
    assert f"id: {image_id}" in done.stdout
    docker("image", "rm", docker_registry.tiny)
    done = cli("image", "load", str(tarball))
    assert done.returncode == 0, done.stderr
    assert f"loaded {docker_registry.tiny}" in done.stdout and f"id: {image_id}" in done.stdout


def test_corrupt_image_tarball(docker_engine, tmp_path):
    garbage = tmp_path / "garbage.tar"
    garbage.write_bytes(b"this is not a docker save archive\n" * 100)
    line = one_error_line(cli("image", "load", str(garbage)))
    assert f"{garbage} on this machine is not a Docker image archive" in line and "make image-save" in line
    # The same tarball named by a host: that host fails with the same line, the run goes on.
    done = cli("run", "--hosts", str(write_hosts(tmp_path, image="ddpbench:absent", image_tarball=str(garbage))),
               "--plan", str(write_plan(tmp_path)), "--out", str(tmp_path / "results"))
    assert done.returncode == 1 and f"error: host box: failed: {garbage} on this machine is not a Docker image archive" in done.stderr
