"""`ddpbench ARGS` run inside the test's own process: what a user sees of it (the exit status, stdout and
stderr) without an interpreter started per case, which costs about a second of CPU each.

The command runs in a folder of its own (unless the test gives one, a temporary one that holds only
the default hosts file, hosts/local.yaml, as a clone does), and what
a command may change of the process is put back after it, so that no case sees another's: the
working folder, the environment, the umask, every signal handler set from Python, the root logger's
handlers and level, sys.path, and the warnings filters. A thread the command left running fails the
case: it would go on acting in the next.

A subprocess (`cli` of tests/conftest.py) stays where the process itself is the subject: an exit by
signal, Ctrl-C, a resource limit (ulimit -f), its peak memory, what reaches a terminal byte for byte."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path

from bench.cli import main
from bench.suites import SUITES_PATH_ENV

# The statuses of a command that a stop signal ended: in process, only a signal to the test session
# itself ends one so, and then the session stops as it would between two cases.
STOP_STATUSES = {128 + signal.SIGINT, 128 + signal.SIGTERM, 128 + signal.SIGHUP}
# Python's own filters without -W or PYTHONWARNINGS: a warning a user would see is in stderr, as it is
# from `python -m bench` (pytest's would record it instead).
USER_IGNORED_WARNINGS = (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning)
THREAD_GRACE_S = 5
DEFAULT_HOSTS = Path(__file__).resolve().parents[2] / "hosts" / "local.yaml"


def read_at_start(name: str) -> bool:
    """What the interpreter or an import reads once, which a case in process cannot change: such a case
    starts a process."""
    return name.startswith("PYTHON") or name == SUITES_PATH_ENV


class TookTooLong(BaseException):
    """Raised in the command at its time limit: a BaseException, so that no `except Exception` of the
    command's takes it for its own failure."""


@dataclass(frozen=True)
class Done:
    """What the user saw, named as subprocess.CompletedProcess names it."""
    args: tuple
    returncode: int
    stdout: str
    stderr: str


def ddpbench(*args, cwd: "Path | None" = None, env: "dict | None" = None, timeout_s: float = 120) -> Done:
    """`ddpbench ARGS` as bench.cli.main runs it, in `cwd` (else a folder of its own, removed after), with
    `env` over the environment; an exit by SystemExit (argparse's) gives its status. TookTooLong
    ends a command past `timeout_s`."""
    words = tuple(map(str, args))
    fixed = sorted(filter(read_at_start, env or {}))
    if fixed:
        raise ValueError(f"{fixed} are read as the process starts: run this case with tests/conftest.py's cli()")
    sandbox = None if cwd is not None else _sandbox()
    try:
        with _isolated(Path(cwd or sandbox), env or {}, timeout_s, words) as streams:
            try:
                status = main(list(words))
            except SystemExit as exit_:  # argparse's refusal, --help
                status = _exit_status(exit_.code)
        done = Done(words, status, *streams.text())
    finally:
        if sandbox is not None:
            shutil.rmtree(sandbox, ignore_errors=True)
    if done.returncode in STOP_STATUSES:
        raise KeyboardInterrupt(f"a stop signal ended `ddpbench {' '.join(words)[:200]}`: the tests stop here")
    return done


def _exit_status(code) -> int:
    """The status Python's own exit gives a SystemExit's code; text is printed, as Python prints it."""
    if code is None or isinstance(code, int):
        return code or 0
    print(code, file=sys.stderr)
    return 1


def _sandbox() -> str:
    folder = tempfile.mkdtemp(prefix="ddpbench-cwd-")
    os.mkdir(os.path.join(folder, "hosts"))
    shutil.copy(DEFAULT_HOSTS, os.path.join(folder, "hosts"))
    return folder


class _Streams:
    """stdout and stderr as a pipe gives them: UTF-8 bytes, strict on stdout (an unencodable character
    ends the command, as it would), backslash-escaped on stderr, as Python sets its own."""

    def __init__(self) -> None:
        self.stdout = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict", write_through=True)
        self.stderr = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace", write_through=True)
        self.warned: list[warnings.WarningMessage] = []

    def text(self) -> tuple[str, str]:
        shown = "".join(warnings.formatwarning(w.message, w.category, w.filename, w.lineno, w.line) for w in self.warned)
        return self.stdout.buffer.getvalue().decode(), self.stderr.buffer.getvalue().decode() + shown


@contextlib.contextmanager
def _isolated(cwd: Path, env: dict, timeout_s: float, words: tuple):
    streams = _Streams()
    handlers = _signal_handlers()
    environ, path, umask = dict(os.environ), list(sys.path), os.umask(0o022)
    os.umask(umask)  # reading it sets it: put back at once
    root = logging.getLogger()
    root_handlers, root_level = list(root.handlers), root.level
    threads = set(threading.enumerate())
    here = os.getcwd()

    def too_long(signum, frame):
        raise TookTooLong(f"ddpbench {' '.join(words)[:200]} ran past {timeout_s:g} s")

    os.chdir(cwd)
    os.environ.update({name: str(value) for name, value in env.items()})
    signal.signal(signal.SIGALRM, too_long)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        with warnings.catch_warnings(record=True) as warned, contextlib.redirect_stdout(streams.stdout), \
                contextlib.redirect_stderr(streams.stderr), _stdin(io.StringIO()):
            warnings.resetwarnings()
            for category in USER_IGNORED_WARNINGS:
                warnings.simplefilter("ignore", category)
            try:
                yield streams
            finally:
                streams.warned = list(warned)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        os.chdir(here)
        os.environ.clear()
        os.environ.update(environ)
        sys.path[:] = path
        os.umask(umask)
        root.handlers[:], root.level = root_handlers, root_level
        for number, handler in handlers.items():
            if signal.getsignal(number) is not handler:
                signal.signal(number, handler)
    _no_thread_left(threads, words)


@contextlib.contextmanager
def _stdin(stream):
    """No terminal to prompt on, as under a pipe: the command asks nothing."""
    kept, sys.stdin = sys.stdin, stream
    try:
        yield
    finally:
        sys.stdin = kept


def _signal_handlers() -> dict:
    """Every signal's handler set from Python (None is one set outside it, which cannot be put back)."""
    found = {}
    for number in signal.valid_signals():
        with contextlib.suppress(OSError, ValueError):
            handler = signal.getsignal(number)
            if handler is not None:
                found[number] = handler
    return found


def _no_thread_left(before: set, words: tuple) -> None:
    left = [thread for thread in threading.enumerate() if thread not in before]
    for thread in left:
        thread.join(THREAD_GRACE_S / len(left))
    running = [thread.name for thread in left if thread.is_alive()]
    assert not running, f"`ddpbench {' '.join(words)[:200]}` left threads running after it returned: {running}"
