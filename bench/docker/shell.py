"""Where docker commands run. `LocalShell` is this machine; a remote host gets a shell of the same
shape over SSH, so that everything built on `Shell` runs unchanged there."""

from __future__ import annotations

import os
import re
import subprocess
import threading
from dataclasses import dataclass
from typing import Callable, Protocol

HELP_POINTER = re.compile(r"^(Run|See) '.*--help'")


@dataclass(frozen=True)
class Result:
    code: int
    stdout: str
    stderr: str

    def last_error_line(self) -> str:
        """The line of stderr (else stdout) most likely to say what went wrong: the last one,
        past docker's closing pointers to its --help."""
        for text in (self.stderr, self.stdout):
            lines = [line.strip() for line in text.splitlines() if line.strip() and not HELP_POINTER.match(line.strip())]
            if lines:
                return lines[-1]
        return f"exit status {self.code}"


class CommandNotFound(Exception):
    """The program of a command is not installed where the shell runs it."""


class Shell(Protocol):
    where: str  # for messages: "this machine", "host gpu1"

    def run(self, argv: list[str], timeout: "float | None" = None) -> Result:
        """Run to the end; raises CommandNotFound."""

    def stream(self, argv: list[str], on_line: Callable[[str], None]) -> Result:
        """Run to the end, handing each stdout line to on_line as it comes (the Result's stdout
        is then empty); raises CommandNotFound."""

    def docker_endpoint(self) -> str:
        """The Docker engine the docker command talks to, for messages."""


class LocalShell:
    where = "this machine"

    def __init__(self, env: "dict | None" = None) -> None:
        self._env = env  # None: this process's environment at the time of each call

    def _environment(self) -> dict:
        return dict(os.environ if self._env is None else self._env)

    def run(self, argv: list[str], timeout: "float | None" = None) -> Result:
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=self._environment())
        except FileNotFoundError as err:
            raise CommandNotFound(argv[0]) from err
        return Result(done.returncode, done.stdout, done.stderr)

    def stream(self, argv: list[str], on_line: Callable[[str], None]) -> Result:
        try:
            process = subprocess.Popen(
                argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self._environment(),
                # Its own session: Ctrl-C on the controller must not reach the docker client,
                # which would stop the container mid-launch; cancelling goes through `docker stop`.
                start_new_session=True,
            )
        except FileNotFoundError as err:
            raise CommandNotFound(argv[0]) from err
        stderr: list[str] = []
        drain = threading.Thread(target=lambda: stderr.extend(process.stderr), daemon=True)
        drain.start()
        for line in process.stdout:
            on_line(line.rstrip("\n"))
        code = process.wait()
        drain.join(timeout=10)
        return Result(code, "", "".join(stderr))

    def docker_endpoint(self) -> str:
        return self._environment().get("DOCKER_HOST") or "unix:///var/run/docker.sock"
