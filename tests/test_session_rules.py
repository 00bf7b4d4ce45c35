"""The rules every test session keeps (tests/conftest.py): a test reads only what a clone of the
repository has, a signal stops the session through its fixtures' teardown, and a process the session
started and left running is ended and named. `make test`'s whole stop, with every daemon, is
tests/e2e/test_stopping_make_test.py's. A CLI command run in process leaves the process as it found it."""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO
from tests.support import cli_in_process
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
    pid_file, running, tearing_down = tmp_path / "daemon.pid", tmp_path / "running", tmp_path / "tearing-down"
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
    open({str(running)!r}, "w").close()
    time.sleep(600)
""")
    pytest_run = subprocess.Popen(child_pytest(tmp_path / "test_stopped.py"), cwd=REPO, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(running.exists, pytest_run)  # the test runs: a signal in its fixture's set-up would stop that instead
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


# --- the CLI in process (tests/support/cli_in_process.py) ----------------------------------------

def test_a_command_in_process_leaves_the_process_as_it_found_it(monkeypatch, tmp_path):
    def meddling(argv):
        os.chdir("/")
        os.environ["DDPBENCH_LEFT"] = "1"
        os.environ.pop("HOME", None)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        logging.getLogger().addHandler(logging.StreamHandler())
        sys.path.append("/nowhere")
        print("out", argv)
        print("err", file=sys.stderr)
        return 3

    before = (os.getcwd(), dict(os.environ), signal.getsignal(signal.SIGTERM), list(logging.getLogger().handlers), list(sys.path))
    monkeypatch.setattr(cli_in_process, "main", meddling)
    done = cli_in_process.ddpbench("validate", tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (3, f"out ['validate', '{tmp_path}']\n", "err\n")
    assert (os.getcwd(), dict(os.environ), signal.getsignal(signal.SIGTERM), list(logging.getLogger().handlers),
            list(sys.path)) == before


def test_a_command_in_process_runs_in_a_folder_of_its_own_that_holds_the_default_hosts_file(monkeypatch):
    seen = []
    monkeypatch.setattr(cli_in_process, "main", lambda argv: seen.append((os.getcwd(), sorted(os.listdir("hosts")))) or 0)
    cli_in_process.ddpbench("run")
    ((folder, hosts),) = seen
    assert hosts == ["local.yaml"] and folder != os.getcwd() and not os.path.exists(folder)


def test_an_argument_argparse_refuses_is_its_usage_and_exit_2():
    done = cli_in_process.ddpbench("run", "--no-such-option")
    assert done.returncode == 2 and done.stderr.splitlines()[-1] == "ddpbench: error: unrecognized arguments: --no-such-option"


def test_a_warning_a_user_would_see_is_in_stderr(monkeypatch):
    import warnings

    def warning(argv):
        warnings.warn("shown", UserWarning)
        warnings.warn("hidden", DeprecationWarning)
        return 0

    monkeypatch.setattr(cli_in_process, "main", warning)
    for _ in range(2):  # shown each time, as each process would
        err = cli_in_process.ddpbench("report").stderr
        assert "UserWarning: shown" in err and "hidden" not in err, err


def test_a_thread_left_running_a_command_past_its_time_and_a_stop_signal_each_end_the_case(monkeypatch):
    import threading

    release = threading.Event()
    monkeypatch.setattr(cli_in_process, "THREAD_GRACE_S", 0.1)
    monkeypatch.setattr(cli_in_process, "main", lambda argv: threading.Thread(target=release.wait, name="left").start() or 0)
    with pytest.raises(AssertionError, match=r"left threads running after it returned: \['left'\]"):
        cli_in_process.ddpbench("run")
    release.set()
    monkeypatch.setattr(cli_in_process, "main", lambda argv: time.sleep(30))
    with pytest.raises(cli_in_process.TookTooLong, match="ran past 0.2 s"):
        cli_in_process.ddpbench("run", timeout_s=0.2)
    monkeypatch.setattr(cli_in_process, "main", lambda argv: 130)  # what main returns on Ctrl-C
    with pytest.raises(KeyboardInterrupt):
        cli_in_process.ddpbench("run")
    with pytest.raises(ValueError, match="DDPBENCH_SUITES_PATH"):
        cli_in_process.ddpbench("suites", env={"DDPBENCH_SUITES_PATH": "/tmp"})


@pytest.mark.slow  # make test's own workers: make check runs in one process
def test_make_tests_workers_run_each_files_tests_in_one_worker(tmp_path):
    """A file's module fixtures are made once, in the worker that runs all its tests (--dist loadgroup,
    tests/conftest.py's groups): were its tests spread over both workers, each would make them."""
    for name in ("test_one.py", "test_two.py"):
        (tmp_path / name).write_text("".join(f"def test_{i}():\n    pass\n" for i in range(8)))
    done = subprocess.run(child_pytest(tmp_path / "test_one.py", "-vv", "-n", "2", "--dist", "loadgroup", str(tmp_path / "test_two.py")),
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    workers: dict = {}
    for worker, name in re.findall(r"\[(gw\d)\] .*?PASSED \S*?(test_\w+\.py)::", done.stdout):
        workers.setdefault(name, set()).add(worker)
    assert sorted(workers) == ["test_one.py", "test_two.py"] and all(len(ran) == 1 for ran in workers.values()), done.stdout
