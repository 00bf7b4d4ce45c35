"""`make test` stopped by Ctrl-C (SIGINT to its process group, as a terminal sends it) or by SIGTERM
to make (`kill`, a CI runner's cancel) stops cleanly: pytest tears down its fixtures, and no
process the run started is left running, the daemons above all (sshd, munged, slurmctld, slurmd,
dockerd and its containerd, the registry, chromium), nor the engine's tmpfs mounted.

The run is `make test TESTS=tests/helpers/every_daemon_running.py`: one test that holds every daemon
running. The run's processes are those below make, and those that inherited a variable this test
sets to a value of its own; after make exits, none of those seen before the signal, and none that
carries the variable, may still run."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.support.docker_fixtures import unmount_below
from tests.support.session_processes import end, started_by, still_running

HELPER = "tests/helpers/every_daemon_running.py"
MARK = "DDPBENCH_STOPPED_RUN"
DAEMONS = ("sshd", "munged", "slurmctld", "slurmd", "dockerd", "containerd", "docker-registry", "chromium")
START_S = 300  # the daemons' start on a busy 2-core machine, dockerd's and the registry's image most
STOP_S = 180  # the teardown: Slurm's queue, dockerd's containers, each daemon's grace


def running_daemons(make: subprocess.Popen, token: str) -> dict:
    """Each daemon's name and the command lines of the run's processes that are it."""
    found = {}
    for process in started_by(make.pid, MARK, token):
        name = os.path.basename(process.command.split(" ", 1)[0]).rstrip(":")  # sshd retitles itself "sshd: ..."
        if name in DAEMONS:
            found.setdefault(name, []).append(process.command)
    return found


def mounted_below(folder: str) -> list:
    return [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines() if line.split()[1].startswith(f"{folder}/")]


@pytest.mark.parametrize("stop", ["ctrl-c", "sigterm to make"])
def test_a_stopped_make_test_leaves_nothing_running(stop, tmp_path):
    token = secrets.token_hex(8)
    log = tmp_path / "make-test.log"
    with open(log, "w") as out:
        # A process group of its own with Ctrl-C's default action, as a terminal gives its foreground job
        # (this session may run with SIGINT ignored, as a shell's background job does, and make would inherit it).
        make = subprocess.Popen(["make", "test", f"TESTS={HELPER}"], cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, MARK: token}, start_new_session=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    started, engine_root = [], None
    try:
        deadline = time.monotonic() + START_S
        while set(running_daemons(make, token)) != set(DAEMONS):
            assert make.poll() is None, f"make test ended before its daemons ran:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, \
                f"not every daemon ran within {START_S} s, only {sorted(running_daemons(make, token))}:\n{log.read_text()[-3000:]}"
            time.sleep(0.5)
        dockerd = running_daemons(make, token)["dockerd"][0].split()
        engine_root = str(Path(dockerd[dockerd.index("--data-root") + 1]).parent)  # its tmpfs is mounted below
        time.sleep(1)  # past the last daemon's start: its fixture is the test's, now
        started = started_by(make.pid, MARK, token)  # sshd among them: it writes its title over its environment

        if stop == "ctrl-c":
            os.killpg(make.pid, signal.SIGINT)
        else:
            os.kill(make.pid, signal.SIGTERM)
        status = make.wait(timeout=STOP_S)
        said = log.read_text()

        left = still_running(started + started_by(make.pid, MARK, token), grace_s=5)
        assert left == [], f"left running: {'; '.join(map(str, left))}\n{said[-3000:]}"
        assert mounted_below(engine_root) == [] and not Path(engine_root).exists()
        assert status != 0, said[-3000:]
        signal_name = "SIGINT" if stop == "ctrl-c" else "SIGTERM"
        assert f"KeyboardInterrupt: {signal_name}: the tests stop here" in said, said[-3000:]
        assert "ended now:" not in said, f"the fixtures left processes running:\n{said[-3000:]}"
    finally:
        if make.poll() is None:
            os.killpg(make.pid, signal.SIGKILL)
            make.wait()
        end(started + started_by(make.pid, MARK, token))
        if engine_root is not None:  # what a run that failed this test left mounted
            unmount_below(Path(engine_root))
            shutil.rmtree(engine_root, ignore_errors=True)
