"""Where a command runs: this machine (`LocalShell`) or a host over SSH (`ssh.SSHShell`, built on
ssh.process.RemoteProcess). Both have the same methods and give the same `Result`, so that what
is built on a `Shell` (the docker command line, every runtime) runs unchanged on either. This
module does not import fabric and paramiko (a tenth of a second): only what goes over SSH pays
for them."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from bench.common.files import open_anew
from bench.common.protocol import Event
from bench.controller.errors import HostError

HELP_POINTER = re.compile(r"^(Run|See) '.*--help'")


def last_line(text: str) -> str:
    """The line of a command's output most likely to say what went wrong: the last one that is
    not blank, past docker's closing pointers to its --help; "" when there is none."""
    lines = [line.strip() for line in text.splitlines() if line.strip() and not HELP_POINTER.match(line.strip())]
    return lines[-1] if lines else ""


@dataclass(frozen=True)
class Result:
    code: int
    stdout: str
    stderr: str

    def last_error_line(self) -> str:
        """The last line of stderr, else of stdout, else the exit status."""
        return last_line(self.stderr) or last_line(self.stdout) or f"exit status {self.code}"


class CommandNotFound(Exception):
    """The program of a command is not installed where the shell runs it; the message is the
    shell's own words."""


class Shell:
    """run() runs a command to its end; stream() hands each stdout line to on_line while it runs
    (the Result's stdout is then empty) and stop() ends it from another thread. Both raise
    CommandNotFound; run() raises a HostError naming `what` (the program, unless given) and
    timeout_name (the setting) when the command runs past its timeout, and so does an SSH host's
    stream() when it sends nothing for idle_timeout_s. `cwd`: the folder the command runs in.
    `env` goes into every command's environment."""

    where = ""  # for messages: "this machine", "127.0.0.2:22"

    def __init__(self, env: "dict | None" = None) -> None:
        self.env = dict(env or {})

    def run(self, argv: list[str], timeout: "float | None" = None, *, cwd: str = "", what: str = "",
            timeout_name: str = "its time limit") -> Result:
        raise NotImplementedError

    def stream(self, argv: list[str], on_line: Callable[[str], None], *, idle_timeout_s: "float | None" = None,
               timeout_name: str = "", cwd: str = "", what: str = "") -> Result:
        raise NotImplementedError

    def stop(self, reason: str) -> None:
        raise NotImplementedError

    def put(self, data: bytes, path: str) -> None:
        raise NotImplementedError

    def fetch_results(self, out_dir: str, result_dir: Path, progress: Callable[[Event], None]) -> bool:
        """raw.json and launches/*.log of an agent's out_dir into result_dir, whatever state they are in;
        True when they all arrived intact (the host's copy may then go)."""
        raise NotImplementedError

    def docker_endpoint(self) -> str:
        """The Docker engine the docker command talks to, for messages."""
        return self.env.get("DOCKER_HOST") or "unix:///var/run/docker.sock"

    def close(self) -> None:
        pass


class LocalShell(Shell):
    where = "this machine"

    def __init__(self, env: "dict | None" = None) -> None:
        super().__init__(env)
        self._process: "subprocess.Popen | None" = None
        self._lock = threading.Lock()

    def _environment(self) -> dict:
        return {**os.environ, **self.env}

    def docker_endpoint(self) -> str:
        return self._environment().get("DOCKER_HOST") or "unix:///var/run/docker.sock"

    def run(self, argv: list[str], timeout: "float | None" = None, *, cwd: str = "", what: str = "",
            timeout_name: str = "its time limit") -> Result:
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=self._environment(), cwd=cwd or None)
        except FileNotFoundError as err:
            raise CommandNotFound(str(err)) from None
        except subprocess.TimeoutExpired:
            raise HostError(f"{what or argv[0]} did not finish within {timeout:g} s ({timeout_name}) and was ended") from None
        return Result(done.returncode, done.stdout, done.stderr)

    def stream(self, argv: list[str], on_line: Callable[[str], None], *, idle_timeout_s: "float | None" = None,
               timeout_name: str = "", cwd: str = "", what: str = "") -> Result:
        try:
            with self._lock:
                # A session of its own: Ctrl-C reaches the controller, which then ends the command
                # cleanly (the docker client must not pass it on and stop a container mid-launch).
                # stdin is a pipe nobody writes to: it closes when this process dies, whatever kills it.
                self._process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                                 text=True, env=self._environment(), cwd=cwd or None, start_new_session=True)
        except FileNotFoundError as err:
            raise CommandNotFound(str(err)) from None
        stderr: list[str] = []
        drain = threading.Thread(target=lambda: stderr.extend(self._process.stderr), daemon=True)
        drain.start()
        for line in self._process.stdout:
            on_line(line.rstrip("\n"))
        code = self._process.wait()
        drain.join(timeout=10)
        return Result(code, "", "".join(stderr))

    def stop(self, reason: str) -> None:
        with self._lock:
            process = self._process
        if process is not None and process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def put(self, data: bytes, path: str) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open_anew(Path(path), "wb") as out:
            out.write(data)

    def fetch_results(self, out_dir: str, result_dir: Path, progress: Callable[[Event], None]) -> bool:
        return True  # on this machine the agent's out_dir is the result folder itself
