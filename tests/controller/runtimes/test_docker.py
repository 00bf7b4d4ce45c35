"""Runtime docker over SSH: the controller reaches the loopback sshd hosts, and on each one the
docker command line talks to the tests' own dockerd (DOCKER_HOST in the host's env: sshd host and
engine share this machine). The agent runs the CPU suites in the pinned test image; the bundle
must name the image's digest. Faults on some hosts leave the others' results whole."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml

from bench.bundle import read_bundle
from tests.conftest import cli, start_cli
from tests.support.docker_fixtures import CPU_IMAGE, TINY_PLAN, assert_ran_in_cpu_image, docker, failed_launch_logs

NO_ID = "sha256:" + "0" * 64


def write_hosts(folder: Path, loopback, engine, overrides: dict) -> Path:
    """A hosts file of loopback hosts with runtime docker on the tests' engine; overrides: name -> settings."""
    document = loopback.hosts_document(sys.executable, folder / "work", runtime="docker", image=CPU_IMAGE,
                                       env={"DOCKER_HOST": engine.host})
    hosts = [dict(entry, **overrides[entry["name"]]) for entry in document["hosts"] if entry["name"] in overrides]
    path = folder / "hosts.yaml"
    path.write_text(yaml.safe_dump({**document, "hosts": hosts}, sort_keys=False))
    return path


def write_plan(folder: Path, **extra) -> Path:
    plan = yaml.safe_load(TINY_PLAN)
    plan.update(extra)
    path = folder / "plan.yaml"
    path.write_text(yaml.safe_dump(plan))
    return path


def only_bundle(results: Path) -> "tuple[Path, dict]":
    (path,) = results.glob("*/bundle.json")
    return path, read_bundle(path)  # validates schema and sha256


def error_lines(stderr: str) -> dict:
    lines = [l for l in stderr.splitlines() if l.startswith("error: host ")]
    return {l.split()[2].rstrip(":"): l for l in lines}


def containers_left() -> list[str]:
    return docker("ps", "--all", "--quiet", "--filter", "name=ddpbench-").stdout.split()


def test_docker_over_ssh_runs_the_plan_into_a_bundle_naming_the_image(loopback_hosts, docker_engine, docker_cpu_image, tmp_path):
    hosts = write_hosts(tmp_path, loopback_hosts, docker_engine, {"host1": {}, "host2": {}})
    done = cli("run", "--hosts", str(hosts), "--plan", str(write_plan(tmp_path)), "--out", str(tmp_path / "results"), timeout=600)
    assert done.returncode == 0, done.stderr + failed_launch_logs(tmp_path / "results")
    path, bundle = only_bundle(tmp_path / "results")
    assert [h["name"] for h in bundle["hosts"]] == ["host1", "host2"]
    for host in bundle["hosts"]:
        assert_ran_in_cpu_image(host, docker_cpu_image)
        logs = path.parent / "hosts" / host["name"] / "launches"
        # A log a job (its launches share its processes), named by its first launch.
        assert sorted(p.name for p in logs.glob("*.log")) == sorted({f"{l['job']}.log" for l in host["launches"] if l["status"] != "skipped"})
    assert containers_left() == []
    # The work folders on the hosts are gone: nothing but what the next run may reuse.
    assert [p for p in (tmp_path / "work").glob("*/*") if p.name != "images"] == []


def test_faults_on_some_hosts_leave_the_others_whole(loopback_hosts, docker_engine, docker_cpu_image, tmp_path):
    garbage = tmp_path / "garbage.tar"
    garbage.write_bytes(b"this is not a docker save archive\n" * 1000)
    hosts = write_hosts(tmp_path, loopback_hosts, docker_engine, {
        "host1": {"env": {"DOCKER_HOST": f"unix://{tmp_path}/nobody.sock"}},  # no engine there
        "host2": {"image": "ddpbench:absent", "image_tarball": str(garbage)},
        "host3": {"image": NO_ID},
        "host4": {},
    })
    done = cli("run", "--hosts", str(hosts), "--plan", str(write_plan(tmp_path)), "--out", str(tmp_path / "results"), timeout=600)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    errors = error_lines(done.stderr)
    assert sorted(errors) == ["host1", "host2", "host3"]
    at = {h.name: f"host {h.name} ({h.address}:{h.port})" for h in loopback_hosts.hosts}
    assert f"cannot reach the Docker engine at unix://{tmp_path}/nobody.sock on {at['host1']}" in errors["host1"]
    assert "point DOCKER_HOST at one that runs" in errors["host1"]
    assert f"on {at['host2']} is not a Docker image archive" in errors["host2"] and "make image-save" in errors["host2"]
    assert f"image {NO_ID} is not on {at['host3']} and an image id cannot be pulled" in errors["host3"]
    _, bundle = only_bundle(tmp_path / "results")
    status = {h["name"]: h["status"] for h in bundle["hosts"]}
    assert status == {"host1": "failed", "host2": "failed", "host3": "failed", "host4": "ok"}
    assert bundle["hosts"][3]["fingerprint"]["container"]["digest"] == docker_cpu_image["Id"]
    # The tarball went over once, named by its sha256: a second run finds it there.
    (uploaded,) = (tmp_path / "work" / "host2" / "images").glob("*.tar")
    assert uploaded.read_bytes() == garbage.read_bytes()
    assert containers_left() == []


def test_no_nvidia_runtime_where_the_plan_needs_gpus(loopback_hosts, docker_engine, tmp_path):
    hosts = write_hosts(tmp_path, loopback_hosts, docker_engine, {"host1": {}})
    plan = write_plan(tmp_path, pin={"cuda": "13.0"})
    done = cli("run", "--hosts", str(hosts), "--plan", str(plan), "--out", str(tmp_path / "results"))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    line = error_lines(done.stderr)["host1"]
    assert "has no NVIDIA container runtime" in line and "the plan pins CUDA/NCCL" in line and "NVIDIA Container Toolkit" in line


def test_full_disk_on_the_host_names_it(loopback_hosts, docker_engine, tmp_path):
    """The image tarball does not fit the host's workdir (a 1 MiB tmpfs)."""
    small = tmp_path / "small"
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "ddpbench-full", str(small)], check=True)
    try:
        tarball = tmp_path / "image.tar"
        tarball.write_bytes(os.urandom(3 << 20))
        hosts = write_hosts(tmp_path, loopback_hosts, docker_engine,
                            {"host1": {"image": "ddpbench:absent", "image_tarball": str(tarball), "workdir": str(small)}})
        done = cli("run", "--hosts", str(hosts), "--plan", str(write_plan(tmp_path)), "--out", str(tmp_path / "results"))
    finally:
        subprocess.run(["umount", "--lazy", str(small)], check=True)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    line = error_lines(done.stderr)["host1"]
    assert f"no space left on the host's disk for {tarball} (3 MiB) in {small}/images: 1 MiB free" in line
    assert "free space there or set workdir: to a bigger disk" in line


def test_container_killed_mid_run_keeps_what_finished(loopback_hosts, docker_engine, docker_cpu_image, tmp_path):
    results = tmp_path / "results"
    hosts = write_hosts(tmp_path, loopback_hosts, docker_engine, {"host1": {}})
    run = start_cli("run", "--hosts", hosts, "--plan", write_plan(tmp_path), "--out", results)
    output = {}
    reader = threading.Thread(target=lambda: output.update(zip(("out", "err"), run.communicate())), daemon=True)
    reader.start()
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:  # until the first launch is in raw.json on the host
        raw = next((tmp_path / "work" / "host1").glob("*/out/raw.json"), None)
        try:
            if raw is not None and json.loads(raw.read_text())["launches"]:
                break
        except ValueError:
            pass  # caught mid-write
        assert run.poll() is None, "the run ended before it could be killed"
        time.sleep(0.5)
    (container,) = docker("ps", "--quiet", "--filter", "name=ddpbench-host1-").stdout.split()
    docker("kill", container)
    reader.join(timeout=180)
    assert run.returncode == 1, output.get("err")
    line = error_lines(output["err"])["host1"]
    assert "was stopped (status 137" in line and "the launches it finished are kept" in line
    _, bundle = only_bundle(results)
    (host,) = bundle["hosts"]
    assert host["status"] == "partial"
    assert host["launches"][0]["status"] == "ok" and host["runs"]
    assert containers_left() == []
