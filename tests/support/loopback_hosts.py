"""Real SSH test hosts on this machine: one OpenSSH sshd per loopback address (127.0.0.2, ...).

Each sshd has its own config, host key and pid file in a folder of its own; one user key,
generated for the run, logs in as the current user (root on CI). Used by the tests (in the
foreground, `sshd -D`), by benchmarks/controller_overhead.py, and by `make test-hosts`, which
starts them in the background and writes hosts/loopback.yaml for `make bench`:

    python tests/support/loopback_hosts.py start [--count 2] [--hosts-file hosts/loopback.yaml]
    python tests/support/loopback_hosts.py stop
"""

from __future__ import annotations

import argparse
import getpass
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
REPO = Path(__file__).resolve().parents[2]
DEFAULT_STATE = REPO / ".loopback-hosts"


def free_port(address: str) -> int:
    with socket.socket() as probe:
        probe.bind((address, 0))
        return probe.getsockname()[1]


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "ddpbench-test", "-f", str(path)], check=True)


@dataclass
class LoopbackHost:
    name: str
    address: str
    port: int
    folder: Path
    process: "subprocess.Popen | None" = None

    @property
    def config(self) -> Path:
        return self.folder / "sshd_config"

    @property
    def pid_file(self) -> Path:
        return self.folder / "sshd.pid"

    @property
    def log(self) -> Path:
        return self.folder / "sshd.log"

    def listener_pid(self) -> "int | None":
        if self.process is not None:
            return self.process.pid if self.process.poll() is None else None
        try:
            pid = int(self.pid_file.read_text())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, ValueError):
            return None
        return pid if str(self.config).encode() in cmdline else None  # a stale pid file names someone else


class LoopbackHosts:
    """`count` sshd hosts named host1, host2, ... on 127.0.0.2, 127.0.0.3, ..."""

    def __init__(self, state: Path, count: int, first_octet: int = 2, extra_config: str = "") -> None:
        self.state = state
        self.extra_config = extra_config  # sshd_config lines, e.g. SetEnv for a login node's sessions
        self.user_key = state / "id_ed25519"
        self.host_key = state / "ssh_host_ed25519_key"
        self.known_hosts = state / "known_hosts"
        self.hosts = []
        for index in range(count):
            address = f"127.0.0.{first_octet + index}"
            self.hosts.append(LoopbackHost(f"host{index + 1}", address, 0, state / f"host{index + 1}"))

    def start(self, foreground: bool = True) -> "LoopbackHosts":
        """Every host's sshd, answering; where one fails to (or a signal stops the start), those started are ended."""
        try:
            return self._start(foreground)
        except BaseException:
            self.stop()
            raise

    def _start(self, foreground: bool) -> "LoopbackHosts":
        self.state.mkdir(parents=True, exist_ok=True)
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # sshd's privilege-separation folder
        for key in (self.user_key, self.host_key):
            if not key.exists():
                _keygen(key)
        public_host_key = self.host_key.with_suffix(".pub").read_text().split()[:2]
        known = []
        for host in self.hosts:
            host.folder.mkdir(exist_ok=True)
            host.port = free_port(host.address)
            host.config.write_text(
                f"ListenAddress {host.address}:{host.port}\n"
                f"HostKey {self.host_key}\n"
                f"PidFile {host.pid_file}\n"
                f"AuthorizedKeysFile {self.user_key}.pub\n"
                "StrictModes no\nPermitRootLogin prohibit-password\nUsePAM no\n"
                "PasswordAuthentication no\nKbdInteractiveAuthentication no\n"
                "MaxStartups 100\nMaxSessions 100\nLogLevel VERBOSE\n"
                "Subsystem sftp internal-sftp\n" + self.extra_config
            )
            known.append(f"[{host.address}]:{host.port} {' '.join(public_host_key)}")
            self.start_host(host, foreground)
        self.known_hosts.write_text("\n".join(known) + "\n")
        for host in self.hosts:
            wait_for_ssh(host)
        return self

    def start_host(self, host: LoopbackHost, foreground: bool) -> None:
        with open(host.log, "ab") as log:
            if foreground:  # in a session of its own: a Ctrl-C reaches the tests, whose teardown ends it
                host.process = subprocess.Popen([SSHD, "-D", "-e", "-f", str(host.config)], stdout=log, stderr=log,
                                                start_new_session=True)
            else:
                subprocess.run([SSHD, "-f", str(host.config), "-E", str(host.log)], check=True)

    def restart(self, host: LoopbackHost) -> None:
        """Start a host's sshd again (same address, port and keys) after stop_host()."""
        self.start_host(host, foreground=host.process is not None)
        wait_for_ssh(host)

    def stop(self) -> None:
        for host in self.hosts:
            stop_host(host)

    def __enter__(self) -> "LoopbackHosts":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def hosts_document(self, python: str, workdir: Path, **host_settings) -> dict:
        """A hosts file (as a dict) that reaches every host as the current user with the test key."""
        return {
            "defaults": {
                "runtime": "native", "user": getpass.getuser(), "identity_file": str(self.user_key),
                "known_hosts_file": str(self.known_hosts), "python": python, "connect_timeout_s": 10, **host_settings,
            },
            "hosts": [
                {"name": h.name, "address": h.address, "port": h.port, "workdir": str(workdir / h.name), "labels": ["loopback"]}
                for h in self.hosts
            ],
        }


def wait_for_ssh(host: LoopbackHost, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host.address, host.port), timeout=2) as sock:
                if sock.recv(4).startswith(b"SSH-"):
                    return
        except OSError:
            pass
        if host.process is not None and host.process.poll() is not None:
            break
        time.sleep(0.1)
    raise RuntimeError(f"sshd for {host.name} on {host.address}:{host.port} did not start; see {host.log}")


def session_pids(listener_pid: int) -> list[int]:
    """The per-connection sshd processes a listener forked (they leave its process group)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == listener_pid:
            found.append(int(entry.name))
    return found


def stop_host(host: LoopbackHost, sessions_too: bool = False) -> None:
    """End this host's sshd listener (and with sessions_too its open connections: the host is gone)."""
    pid = host.listener_pid()
    if pid is None:
        return
    children = session_pids(pid) if sessions_too else []
    for target in [pid, *children]:
        try:
            os.kill(target, signal.SIGKILL if sessions_too else signal.SIGTERM)
        except ProcessLookupError:
            pass
    if host.process is not None:
        try:
            host.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            host.process.kill()
            host.process.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description="start or stop loopback sshd test hosts")
    parser.add_argument("action", choices=["start", "stop"])
    parser.add_argument("--count", type=int, default=2)
    parser.add_argument("--state", type=Path, default=DEFAULT_STATE)
    parser.add_argument("--hosts-file", type=Path, default=REPO / "hosts" / "loopback.yaml")
    parser.add_argument("--python", default=sys.executable, help="the hosts' python (with torch)")
    args = parser.parse_args()
    if args.action == "stop":
        for folder in sorted(args.state.glob("host*")):
            stop_host(LoopbackHost(folder.name, "", 0, folder))
        print(f"stopped the loopback hosts in {args.state}")
        return 0
    cluster = LoopbackHosts(args.state, args.count)
    for folder in sorted(args.state.glob("host*")):
        stop_host(LoopbackHost(folder.name, "", 0, folder))
    cluster.start(foreground=False)
    document = cluster.hosts_document(args.python, args.state / "work", accept_new_host_key=False)
    args.hosts_file.write_text(
        "# Generated by `make test-hosts` (tests/support/loopback_hosts.py): sshd hosts on loopback addresses.\n"
        + yaml.safe_dump(document, sort_keys=False)
    )
    names = ", ".join(f"{h.name} ({h.address}:{h.port})" for h in cluster.hosts)
    print(f"started {names}; hosts file: {args.hosts_file}; stop them with `make test-hosts-stop`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
