"""A real Docker engine for the tests, and the images they run.

- `docker_engine`: dockerd started here, its data in a temporary folder and its own socket;
  no bridge and no iptables rules (containers use the host network), stopped at the end.
  DOCKER_HOST points at it for the session, so the code under test finds it as a user's would.
- `docker_base_image`: no registry is reachable, so the base is Debian bookworm with python3,
  debootstrapped from this machine's Debian mirror and `docker import`ed. The tarball is kept in
  .cache/docker-test/ (ignored by git): debootstrap takes a minute or two.
- `docker_cpu_image`: the project's Dockerfile built on that base with the CPU lock; the wheels
  come from a wheelhouse (`pip download` of the lock; torch from /opt/wheels) served to the
  build over HTTP on 127.0.0.1.
- `docker_registry`: Debian's docker-registry on 127.0.0.1, holding a tiny image.
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench.controller.shell import LocalShell
from bench.docker import image
from bench.controller.docker_engine import Docker

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache" / "docker-test"
BASE_PACKAGES = ("python3", "python3-venv")
BASE_TARBALL = CACHE / f"bookworm-minbase-{'-'.join(BASE_PACKAGES)}.tar"
BASE_TAG = "ddpbench-test-base:bookworm"
CPU_IMAGE = "ddpbench-test:cpu"
CPU_LOCK = REPO / "docker" / "requirements" / "cpu.lock"
LOCAL_WHEELS = Path("/opt/wheels")  # the torch CPU build on the CI machines' disk
DATA_ROOT_SIZE = "8g"  # the engine's images and containers: about 2 GiB are used
INSTALL_HINT = "`bash tests/system-deps.sh` installs it (tests/apt-packages.txt)"


TINY_PLAN = """\
name: docker-tiny
timeout_s: 300
suites:
  - suite: collectives
    world_sizes: [all]
    params: {ops: [all_reduce], dtypes: [float32], in_place: [true], begin_bytes: 4096, end_bytes: 16384,
             factor: 4, warmup_iters: 1, iters: 2, repetitions: 2}
  - suite: ddp
    world_sizes: [all]
    params: {model: tiny, micro_batch: 2, seq_len: 32, steps: 3, warmup_steps: 1, precision: fp32, compile: false}
"""


def failed_launch_logs(results: Path) -> str:
    """The end of every failed launch's log: what an assertion message needs to say why."""
    tails = []
    for raw in results.glob("*/hosts/*/raw.json"):
        for launch in json.loads(raw.read_text())["launches"]:
            log = raw.parent / "launches" / f"{launch['id']}.log"
            if launch["status"] != "ok" and log.is_file():
                tails.append(f"--- {log}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-25:]))
    return "\n".join(tails)


def assert_ran_in_cpu_image(host: dict, image: dict) -> None:
    """A bundle's host ran every suite of TINY_PLAN, ok, in the CPU test image, and says which image."""
    assert host["runtime"] == "docker" and host["status"] == "ok", host["error"]
    container = host["fingerprint"]["container"]
    assert container["digest"] == image["Id"]
    assert container["pin"]["torch"] == "2.13.0+cpu" and container["pin"]["image"] == CPU_IMAGE
    assert {run["suite"] for run in host["runs"]} == {"collectives", "ddp"}
    assert all(launch["status"] == "ok" for launch in host["launches"])


def docker(*args: str, check: bool = True, timeout: float = 300, **kwargs) -> subprocess.CompletedProcess:
    """The docker command line against the session's engine (DOCKER_HOST)."""
    done = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, **kwargs)
    if check and done.returncode != 0:
        pytest.fail(f"docker {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return done


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_until(ready, timeout_s: float, process: subprocess.Popen, log: Path, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"{what} exited with status {process.returncode}: {log.read_text()[-2000:]}")
        if ready():
            return
        time.sleep(0.3)
    pytest.fail(f"{what} did not come up within {timeout_s:g} s: {log.read_text()[-2000:]}")


def _stop(process: subprocess.Popen, grace_s: float = 30) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@dataclass
class Engine:
    host: str  # the DOCKER_HOST value
    root: Path


@pytest.fixture(scope="session")
def docker_engine():
    if shutil.which("dockerd") is None or shutil.which("docker") is None:
        pytest.fail(f"dockerd is not installed: {INSTALL_HINT}")
    # Short: the engine's unix sockets live under it, and their paths are limited to 108 bytes.
    root = Path(tempfile.mkdtemp(prefix="ddpb-dk-", dir="/tmp"))
    host = f"unix://{root}/docker.sock"
    log = root / "dockerd.log"
    previous = os.environ.get("DOCKER_HOST")
    process = None
    try:  # whatever stops the start (a failure, a signal), what was started is ended and unmounted
        # Images in memory: deleting a gigabyte of image layers from this machine's disk takes
        # longer than building them; unmounting a tmpfs takes nothing.
        (root / "data").mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DATA_ROOT_SIZE}", "ddpbench-docker", str(root / "data")], check=True)
        with open(log, "w") as log_file:
            process = subprocess.Popen(
                ["dockerd", "--data-root", str(root / "data"), "--exec-root", str(root / "exec"),
                 "--pidfile", str(root / "dockerd.pid"), "--host", host,
                 # This sandbox allows no iptables rules of ours: no bridge, host networking only.
                 "--bridge=none", "--iptables=false", "--ip-masq=false", "--log-level=warn"],
                stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True,
            )
        os.environ["DOCKER_HOST"] = host
        _wait_until(lambda: subprocess.run(["docker", "version"], capture_output=True).returncode == 0,
                    60, process, log, "dockerd")
        yield Engine(host=host, root=root)
    finally:
        if process is not None:
            for container in docker("ps", "--quiet", check=False).stdout.split():
                docker("kill", container, check=False)
            _stop(process)
        if previous is None:
            os.environ.pop("DOCKER_HOST", None)
        else:
            os.environ["DOCKER_HOST"] = previous
        unmount_below(root)
        shutil.rmtree(root, ignore_errors=True)


def unmount_below(root: Path) -> None:
    """The data tmpfs and whatever a stopped dockerd left mounted under its folders, deepest first."""
    mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    for mount in sorted((m for m in mounts if m.startswith(f"{root}/")), reverse=True):
        subprocess.run(["umount", "--lazy", mount], capture_output=True)


@functools.lru_cache(maxsize=None)
def debian_mirror() -> str:
    """The Debian archive this machine's apt uses (deb822 or one-line sources)."""
    sources = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    pattern = re.compile(r"^(?:URIs:\s*|deb\s+(?:\[[^\]]*\]\s+)?)(\S+/debian)/?\s", re.MULTILINE)
    for path in sources:
        if path.is_file():
            match = pattern.search(path.read_text(errors="replace") + "\n")
            if match:
                return match.group(1)
    return "http://deb.debian.org/debian"


def build_base_tarball(tarball: Path) -> None:
    if shutil.which("debootstrap") is None:
        pytest.fail(f"debootstrap is not installed: {INSTALL_HINT}")
    with tempfile.TemporaryDirectory(prefix="ddpb-bookworm-") as work:
        root = Path(work) / "root"
        done = subprocess.run(
            ["debootstrap", "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}", "bookworm", str(root), debian_mirror()],
            capture_output=True, text=True, timeout=900,
        )
        if done.returncode != 0:
            pytest.fail(f"debootstrap failed ({done.returncode}): {(done.stdout + done.stderr)[-2000:]}")
        for leftover in ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man"):
            shutil.rmtree(root / leftover, ignore_errors=True)
        partial = tarball.with_suffix(".part")
        subprocess.run(["tar", "--numeric-owner", "-C", str(root), "-cf", str(partial), "."], check=True)
        partial.rename(tarball)


@pytest.fixture(scope="session")
def docker_base_image(docker_engine) -> str:
    CACHE.mkdir(parents=True, exist_ok=True)
    if not BASE_TARBALL.is_file():
        build_base_tarball(BASE_TARBALL)
    docker("import", str(BASE_TARBALL), BASE_TAG)
    return BASE_TAG


def make_wheelhouse() -> Path:
    """The CPU lock's wheels for cp311 (the bookworm Python), kept while the lock is unchanged."""
    key = hashlib.sha256(CPU_LOCK.read_bytes()).hexdigest()[:12]
    wheelhouse = CACHE / f"wheelhouse-{key}"
    if (wheelhouse / ".complete").is_file():
        return wheelhouse
    find_links = ["--find-links", str(LOCAL_WHEELS)] if LOCAL_WHEELS.is_dir() else []
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--require-hashes", "--only-binary=:all:",
         "--python-version", "3.11", "--implementation", "cp", "--platform", "manylinux_2_28_x86_64",
         *find_links, "--requirement", str(CPU_LOCK), "--dest", str(wheelhouse)],
        capture_output=True, text=True, timeout=900,
    )
    if done.returncode != 0:
        pytest.fail(f"pip download of {CPU_LOCK.name} failed: {done.stderr.strip()[-2000:]}")
    (wheelhouse / ".complete").touch()
    return wheelhouse


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="session")
def docker_cpu_image(docker_base_image) -> dict:
    """The built image's engine record (Id, RepoTags, ...)."""
    wheelhouse = make_wheelhouse()
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(wheelhouse)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    lines: list[str] = []
    try:
        info = image.build(
            Docker(LocalShell()), lock="cpu", tag=CPU_IMAGE, base_image=docker_base_image,
            build_args={"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": f"http://127.0.0.1:{server.server_port}/"},
            on_line=lines.append,
        )
    except Exception as err:
        pytest.fail(f"building the CPU image failed: {err}\n" + "\n".join(lines[-40:]))
    finally:
        server.shutdown()
    return info


@dataclass
class Registry:
    address: str  # 127.0.0.1:PORT
    tiny: str  # ADDRESS/ddpbench-tiny:1, pushed
    tiny_digest: str  # sha256:... of its manifest


def tiny_image_tar() -> bytes:
    """An image filesystem of one file: enough to push, pull, save and load in a blink."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        data = b"ddpbench test image\n"
        info = tarfile.TarInfo("hello.txt")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.fixture(scope="session")
def docker_registry(docker_engine, tmp_path_factory) -> Registry:
    if shutil.which("docker-registry") is None:
        pytest.fail(f"docker-registry is not installed: {INSTALL_HINT}")
    folder = tmp_path_factory.mktemp("registry")
    address = f"127.0.0.1:{_free_port()}"
    config = folder / "config.yml"
    config.write_text(
        "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n"
        f"    rootdirectory: {folder / 'data'}\nhttp:\n  addr: {address}\n"
    )
    log = folder / "registry.log"

    def answers() -> bool:
        try:
            return urllib.request.urlopen(f"http://{address}/v2/", timeout=2).status == 200
        except OSError:
            return False

    process = None
    try:
        with open(log, "w") as log_file:  # in a session of its own: a Ctrl-C reaches the tests, whose teardown ends it
            process = subprocess.Popen(["docker-registry", "serve", str(config)], stdout=log_file,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        _wait_until(answers, 30, process, log, "docker-registry")
        tiny = f"{address}/ddpbench-tiny:1"
        (folder / "tiny.tar").write_bytes(tiny_image_tar())
        docker("import", str(folder / "tiny.tar"), tiny)
        pushed = docker("push", tiny).stdout
        digest = re.search(r"digest: (sha256:[0-9a-f]{64})", pushed).group(1)
        yield Registry(address=address, tiny=tiny, tiny_digest=digest)
    finally:
        if process is not None:
            _stop(process)
