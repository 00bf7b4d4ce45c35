"""A host over SSH, by job: `connection` (host-key policy, connecting, one-line errors),
`process` (one remote command, ended with its whole process group), `files` (SFTP), and here
`SSHShell`, the `shell.Shell` of a host, through which every runtime runs its commands."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Callable

import paramiko
from fabric import Connection

from bench.common.protocol import Event
from bench.controller.errors import HostError
from bench.controller.inventory import Host
from bench.controller.shell import CommandNotFound, Result, Shell, last_line
from bench.controller.ssh.connection import close, connect, is_open, where
from bench.controller.ssh.files import fetch_results, put_bytes, sftp_of
from bench.controller.ssh.process import RemoteProcess

NOT_FOUND = re.compile(r"not found|No such file or directory", re.IGNORECASE)  # a remote shell's exit 127


class SSHShell(Shell):
    """Commands on a host over an open SSH connection; `env` is set by `env NAME=VALUE` in front
    of each command (sshd passes no environment of the client's)."""

    def __init__(self, connection: Connection, host: Host, env: "dict | None" = None) -> None:
        super().__init__(env)
        self.connection, self.host = connection, host
        self.where = f"host {host.name} ({where(host)})"
        self._process: "RemoteProcess | None" = None
        self._stopped = ""  # the reason stop() gave: a stream that has not started yet never starts
        self._lock = threading.Lock()

    @classmethod
    def connect(cls, host: Host, env: "dict | None" = None) -> "SSHShell":
        return cls(connect(host), host, env)

    def _start(self, argv: list[str], cwd: str, what: str) -> RemoteProcess:
        command = ["env", *(f"{k}={v}" for k, v in self.env.items()), *argv] if self.env else list(argv)
        return RemoteProcess(self.connection, self.host, command, what or argv[0], cwd)

    @staticmethod
    def _found(result: Result, argv: list[str]) -> Result:
        if result.code == 127 and NOT_FOUND.search(result.stderr):
            raise CommandNotFound(last_line(result.stderr) or argv[0])
        return result

    def run(self, argv: list[str], timeout: "float | None" = None, *, cwd: str = "", what: str = "",
            timeout_name: str = "its time limit") -> Result:
        process = self._start(argv, cwd, what)
        return self._found(process.wait(timeout_s=timeout, timeout_name=timeout_name), argv)

    def stream(self, argv: list[str], on_line: Callable[[str], None], *, idle_timeout_s: "float | None" = None,
               timeout_name: str = "", cwd: str = "", what: str = "") -> Result:
        with self._lock:
            if self._stopped:
                raise HostError(f"{what or argv[0]} {self._stopped}")
            self._process = process = self._start(argv, cwd, what)
        return self._found(process.wait(on_line, idle_timeout_s=idle_timeout_s, timeout_name=timeout_name), argv)

    def stop(self, reason: str) -> None:
        with self._lock:
            self._stopped = self._stopped or reason
            process = self._process
        if process is not None:
            process.stop(reason)

    def put(self, data: bytes, path: str) -> None:
        put_bytes(self.connection, self.host, data, path)

    def sftp(self) -> paramiko.SFTPClient:
        return sftp_of(self.connection, self.host)

    def is_open(self) -> bool:
        return is_open(self.connection)

    def fetch_results(self, out_dir: str, result_dir: Path, progress: Callable[[Event], None]) -> bool:
        return fetch_results(self.connection, out_dir, result_dir, progress)

    def close(self) -> None:
        close(self.connection)
