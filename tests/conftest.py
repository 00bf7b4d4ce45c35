"""Shared fixtures: the repo, the CLI as a user runs it, and one real CPU bundle per session."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests import tiers
from tests.support import FIXTURES as FIXTURE_ROOT

REPO = Path(__file__).resolve().parents[1]
FIXTURES = FIXTURE_ROOT / "h200x2"  # the 2x H200's captures (tests/fixtures/README.md)
TEST_PLANS = Path(__file__).resolve().parent / "plans"


def cli(*args, cwd: Path = REPO, timeout: float = 600, env: "dict | None" = None,
        preexec_fn: "Callable[[], None] | None" = None) -> subprocess.CompletedProcess:
    """`python -m bench ARGS` in a child process, as a user would run it, with this checkout first on the path."""
    return subprocess.run(_bench_argv(args), cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=_bench_env(env), preexec_fn=preexec_fn)


def start_cli(*args) -> subprocess.Popen:
    """cli() for a test that stops or signals the command while it runs: started, stdout and stderr piped."""
    return subprocess.Popen(_bench_argv(args), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_bench_env(None))


def _bench_argv(args) -> list[str]:
    return [sys.executable, "-m", "bench", *map(str, args)]


def _bench_env(env: "dict | None") -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}


def bundle_path_from(stdout: str) -> Path:
    line = next(l for l in stdout.splitlines() if l.startswith("bundle: "))
    return REPO / line.removeprefix("bundle: ")  # an absolute path stays itself


def _listing(folder: Path) -> set:
    return {str(path.relative_to(folder)) for path in folder.rglob("*")} if folder.is_dir() else set()


@pytest.hookimpl(tryfirst=True)  # before `-m` selects by the marks
def pytest_collection_modifyitems(items) -> None:
    """Every test of a FULL_ONLY file is slow: `make check` leaves it to `make test` (tests/tiers.py)."""
    full_only = {REPO / path for path in tiers.FULL_ONLY}
    for item in items:
        if item.path in full_only:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session", autouse=True)
def results_left_as_found():
    """`make test` leaves the user's results/ (what `make bench` writes) as it found it: a test that runs
    a plan gives it --out in its own temporary folder. Checked once every test has run."""
    results = REPO / "results"
    before = _listing(results)
    yield
    written = sorted(_listing(results) - before)
    assert not written, f"the tests wrote into {results}: {written[:5]}; give each test's `run` an --out of its own"


@pytest.fixture(scope="session")
def quick_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """The default `run` (plan quick, hosts/local.yaml) on this CPU machine, once per session."""
    out = tmp_path_factory.mktemp("quick")
    result = cli("run", "--out", str(out))
    assert result.returncode == 0, result.stderr
    return result, bundle_path_from(result.stdout)


@pytest.fixture(scope="session")
def quick_bundle(quick_run) -> dict:
    return json.loads(quick_run[1].read_text())


@pytest.fixture(scope="session")
def loopback_hosts(tmp_path_factory):
    """Four real sshd hosts (host1..host4 on 127.0.0.2..5), started once for the whole session."""
    from tests.support.loopback_hosts import SSHD, LoopbackHosts

    if not Path(SSHD).exists() or shutil.which("ssh-keygen") is None:
        pytest.fail("sshd and ssh-keygen are missing: `bash tests/system-deps.sh` installs them (openssh-server)")
    hosts = LoopbackHosts(tmp_path_factory.mktemp("sshd"), count=4).start()
    yield hosts
    hosts.stop()


# The Docker engine and images, shared by every module that uses them (started once per session).
from tests.support.docker_fixtures import docker_base_image, docker_cpu_image, docker_engine, docker_registry  # noqa: E402,F401
