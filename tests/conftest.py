"""Fixtures shared by the test files: real sshd hosts on loopback addresses."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from loopback_hosts import SSHD, LoopbackHosts


@pytest.fixture(scope="session")
def loopback_hosts(tmp_path_factory) -> LoopbackHosts:
    """Four sshd hosts (host1..host4 on 127.0.0.2..5), started once for the whole session."""
    if not Path(SSHD).exists() or shutil.which("ssh-keygen") is None:
        pytest.fail("sshd and ssh-keygen are missing: `bash tests/system-deps.sh` installs them (openssh-server)")
    hosts = LoopbackHosts(tmp_path_factory.mktemp("sshd"), count=4).start()
    yield hosts
    hosts.stop()
