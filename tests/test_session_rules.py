"""The rules every test session keeps (tests/conftest.py): a test reads only what a clone of the
repository has, a signal stops the session through its fixtures' teardown, and a process the session
started and left running is ended and named. `make test`'s whole stop, with every daemon, is
tests/e2e/test_stopping_make_test.py's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from tests.conftest import REPO
from tests.support.outside_reads import OutsideReads
from tests.support.session_processes import MARK, end, started_by, still_running


def child_pytest(test_file, *args) -> list:
    """pytest on one file outside the repository, with the repository's tests/conftest.py as a plugin."""
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest",
            "--rootdir", str(test_file.parent), *args, str(test_file)]


def test_a_file_beside_the_repository_is_found_where_it_exists(tmp_path):
    repo, shared = tmp_path / "clone" / "ddpbench", tmp_path / "clone" / "shared"
    (repo / "tests").mkdir(parents=True)
    (shared / "fixtures").mkdir(parents=True)
    (shared / "fixtures" / "nvml.json").write_text("{}")
    (repo / "tests" / "nvml.json").write_text("{}")
    reads = OutsideReads((f"{repo}/",))

    reads.hook("open", (f"{repo}/../shared/fixtures/nvml.json", "r", 0))
    reads.hook("os.scandir", (shared,))
    reads.hook("subprocess.Popen", ("ddpbench", ["ddpbench", "report", str(shared / "fixtures")], None, None))
    assert reads.take() == [f"{shared}/fixtures/nvml.json (open)", f"{shared} (os.scandir)",
                            f"{shared}/fixtures (subprocess.Popen)"]

    reads.hook("open", (str(repo / "tests" / "nvml.json"), "r", 0))  # the repository's own
    reads.hook("open", (f"{repo}/../shared/missing.json", "r", 0))  # named, not there: nothing read
    reads.hook("open", (3, "r", 0))  # a descriptor: its path was seen when it was opened
    reads.hook("subprocess.Popen", ("cat", ["cat", "--", "shared/fixtures/nvml.json"], str(repo), None))
    assert reads.take() == []


def test_a_test_that_reads_outside_fails_and_names_the_file(tmp_path):
    (tmp_path / "test_reads.py").write_text(
        "import os\n"
        "def test_lists_the_root():\n    os.listdir('/')\n"
        "def test_reads_its_own_folder(tmp_path):\n    (tmp_path / 'x').write_text('1')\n    assert (tmp_path / 'x').read_text() == '1'\n")
    done = subprocess.run(child_pytest(tmp_path / "test_reads.py"), cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed, 1 passed" in done.stdout
    assert ("this test's call opened what a clone of the repository does not have: / (os.listdir); "
            "put what a test reads in tests/fixtures/") in done.stdout


def test_sigterm_stops_the_tests_through_their_teardown_and_a_second_waits_for_it(tmp_path):
    """The fixture's daemon (a sleep in a session of its own) is ended by its teardown, which a
    second SIGTERM, come while it runs, does not cut short."""
    pid_file, tearing_down = tmp_path / "daemon.pid", tmp_path / "tearing-down"
    (tmp_path / "test_stopped.py").write_text(f"""
import os, signal, subprocess, time, pytest

@pytest.fixture
def daemon():
    process = subprocess.Popen(["sleep", "600"], start_new_session=True)
    open({str(pid_file)!r}, "w").write(str(process.pid))
    yield
    open({str(tearing_down)!r}, "w").close()
    time.sleep(2)
    process.terminate()
    process.wait()

def test_waits(daemon):
    time.sleep(600)
""")
    pytest_run = subprocess.Popen(child_pytest(tmp_path / "test_stopped.py"), cwd=REPO, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(pid_file.exists, pytest_run)
        pytest_run.send_signal(signal.SIGTERM)
        wait_for(tearing_down.exists, pytest_run)
        pytest_run.send_signal(signal.SIGTERM)
        said = pytest_run.communicate(timeout=120)[0]
    finally:
        pytest_run.kill()
        pytest_run.wait()
    assert pytest_run.returncode == 2, said  # pytest's "interrupted"
    assert "KeyboardInterrupt: SIGTERM: the tests stop here, and the fixtures end the daemons they started" in said
    assert "SIGTERM: stopping already; the fixtures are ending the daemons the tests started" in said
    assert not os.path.exists(f"/proc/{pid_file.read_text()}")


def wait_for(ready, process: subprocess.Popen, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        assert process.poll() is None, process.communicate()[0]
        assert time.monotonic() < deadline, "the child pytest did not get there in time"
        time.sleep(0.05)


def test_a_process_left_running_is_found_below_the_session_or_by_its_mark_and_ended():
    """A child of a shell that exited (an orphan init adopted) keeps the mark; a child of this process
    is found below it whatever its environment."""
    mark = f"{os.getpid()}-left"
    shell = subprocess.run(["sh", "-c", "sleep 600 >/dev/null 2>&1 & echo $!"], env={**os.environ, MARK: mark},
                           capture_output=True, text=True, check=True)
    orphan = int(shell.stdout)
    child = subprocess.Popen(["sleep", "600"], env={})
    try:
        found = started_by(os.getpid(), MARK, mark)
        assert {orphan, child.pid} <= {process.pid for process in found}
        left = [process for process in found if process.pid in (orphan, child.pid)]
        end(left)
        assert child.wait(timeout=20) == -signal.SIGTERM
        assert still_running(left, grace_s=5) == []
    finally:
        child.kill()
        child.wait()


def test_a_session_that_leaves_a_process_running_fails_and_names_it(tmp_path):
    (tmp_path / "test_leaves.py").write_text(
        "import subprocess\n"
        "def test_starts_and_forgets():\n    subprocess.Popen(['sleep', '600'], start_new_session=True)\n")
    done = subprocess.run(child_pytest(tmp_path / "test_leaves.py"), cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 passed" in done.stdout
    assert "error: processes the tests started still ran after every fixture's teardown, ended now: sleep 600 (pid " in done.stdout
