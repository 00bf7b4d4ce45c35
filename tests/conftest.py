"""Shared fixtures: the repo, the CLI as a user runs it, and one real CPU bundle per session."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import hypothesis  # noqa: F401 - imported now: its plugin would at the session's end, past the 5 s an xdist worker has then
import pytest

from tests import tiers
from tests.support import FIXTURES as FIXTURE_ROOT
from tests.support import durations
from tests.support.outside_reads import OutsideReads, allowed_roots
from tests.support.session_processes import MARK, end, mark_this_session, started_by, still_running
from tests.support.stop_signals import StopSignals

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


# For the whole process: an audit hook cannot be removed, and a signal comes when it comes.
OUTSIDE_READS = OutsideReads(allowed_roots(REPO)).install()
STOP_SIGNALS = StopSignals().install()
SESSION = mark_this_session()


def _fail_outside_reads(report, when: str) -> None:
    found = OUTSIDE_READS.take()
    if not found:
        return
    said = (f"{when} opened what a clone of the repository does not have: {', '.join(found)}; put what a test "
            "reads in tests/fixtures/ (tests/support/outside_reads.py says which folders a test may read)")
    if report.failed:
        report.sections.append(("files outside the repository", said))
    else:
        report.outcome, report.longrepr = "failed", said


def pytest_addoption(parser) -> None:
    durations.pytest_addoption(parser)


def pytest_configure(config) -> None:
    """Each test file's wall and CPU seconds, into tests/durations.json (tests/tiers.py)."""
    durations.pytest_configure(config)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A test that opened a file outside the repository fails in the phase (setup, call, teardown) that did."""
    report = yield
    _fail_outside_reads(report, f"this test's {call.when}")
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    report = yield
    _fail_outside_reads(report, "collecting it")
    return report


# What each pytest-xdist worker found left running after its teardown, said by the controller.
WORKERS_LEFT: list = []


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    WORKERS_LEFT.extend(getattr(node, "workeroutput", {}).get("left_running", []))


@pytest.hookimpl(wrapper=True, trylast=True)  # inside the terminal's: its summary comes after
def pytest_sessionfinish(session):
    """Around the teardown of the session's fixtures: a stop signal from here on is set aside (the
    teardown ends the daemons), and a process the session started that still runs after it is
    ended and named. Where the tests ran to their end, a fixture or a test left it: the session
    fails. An interrupted one may have cut a process's parent short (a CLI under test, killed
    with its test): it stays interrupted. A worker hands what it found to the controller."""
    STOP_SIGNALS.tearing_down = True
    result = yield
    left = still_running(started_by(os.getpid(), MARK, SESSION), grace_s=5)
    end(left)
    found = [(str(process), session.exitstatus == pytest.ExitCode.INTERRUPTED) for process in left]
    if durations.is_worker(session.config):
        session.config.workeroutput["left_running"] = found
        return result
    found += WORKERS_LEFT
    if found:
        named = "; ".join(name for name, _ in found)
        interrupted = session.exitstatus == pytest.ExitCode.INTERRUPTED or all(stopped for _, stopped in found)
        session.config.pluginmanager.get_plugin("terminalreporter").write_line(
            f"processes the interrupted tests left running, ended now: {named}" if interrupted else
            f"error: processes the tests started still ran after every fixture's teardown, ended now: {named}; "
            "the fixture or test that started each must end it", red=True)
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
    return result


# Files whose tests share a session fixture that costs minutes run in one pytest-xdist worker, so
# that it is made once: the Docker engine and its images, the default plan's CPU run.
SHARED_SESSION_FIXTURES = {"docker_engine": "docker", "docker_cpu_image": "docker", "docker_registry": "docker",
                           "quick_run": "quick-run"}


@pytest.hookimpl(tryfirst=True)  # before `-m` selects by the marks, and before xdist reads the groups
def pytest_collection_modifyitems(items) -> None:
    """Every test of a FULL_ONLY file is slow: `make check` leaves it to `make test` (tests/tiers.py).
    Under `make test`'s workers (--dist loadgroup) a file's tests stay together, as its module
    fixtures are made once; files sharing a costly session fixture go to one worker."""
    full_only = {REPO / path for path in tiers.FULL_ONLY}
    group_of_file: dict = {}
    for item in items:
        shared = [SHARED_SESSION_FIXTURES[name] for name in item.fixturenames if name in SHARED_SESSION_FIXTURES]
        group_of_file.setdefault(item.path, set()).update(shared)
    for item in items:
        if item.path in full_only:
            item.add_marker(pytest.mark.slow)
        shared = sorted(group_of_file[item.path])
        # the file as the session's root names it: a child session's (tests/test_session_rules.py) lies outside REPO
        item.add_marker(pytest.mark.xdist_group(shared[0] if shared else item.nodeid.split("::")[0]))


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


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory):
    """A real Slurm cluster (tests/support/slurm_cluster.py), started once for the whole session."""
    from tests.support.slurm_cluster import SlurmCluster, missing_daemons

    missing = missing_daemons()
    if missing:
        pytest.fail(f"{', '.join(missing)} missing: `bash tests/system-deps.sh` installs them (slurmctld, slurmd, slurm-client, munge)")
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm")).start()
    yield cluster
    cluster.stop()


# The Docker engine and images, shared by every module that uses them (started once per session).
from tests.support.docker_fixtures import docker_base_image, docker_cpu_image, docker_engine, docker_registry  # noqa: E402,F401
