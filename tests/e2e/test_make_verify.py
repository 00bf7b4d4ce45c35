"""`make verify`: make turns every failed recipe into its own exit status 2, so the recipe's last line
names what verify itself said (README, "Verify a published result")."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import REPO


def _venv(root) -> str:
    """A venv as the Makefile finds it, set up already: its python is this one, with this checkout first on the path."""
    venv = root / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("")
    python = venv / "bin" / "python"
    python.write_text(f"#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} \"$@\"\n")
    python.chmod(0o755)
    (venv / ".installed").touch()  # newer than pyproject.toml: make installs nothing
    return str(venv)


def test_make_verify_names_verifys_own_exit_status(quick_run, tmp_path):
    hosts = tmp_path / "dead.yaml"  # the original's host, unreachable: nothing reruns, so the verdict is FAIL (1)
    hosts.write_text("hosts:\n  - name: local\n    runtime: native\n    address: 127.0.0.1\n    port: 1\n    connect_timeout_s: 5\n")
    done = subprocess.run(["make", "--no-print-directory", "verify", f"VENV={_venv(tmp_path)}", f"BUNDLE={quick_run[1]}",
                           f"HOSTS={hosts}", f"OUT={tmp_path / 'results'}"], cwd=REPO, capture_output=True, text=True,
                          timeout=300, env={k: v for k, v in os.environ.items() if not k.startswith("MAKE")})
    assert done.returncode == 2, done.stdout + done.stderr
    assert "**FAIL: " in done.stdout
    assert ("make verify: ddpbench verify exited 1 (FAIL); make exits 2 for any failure, so a script that needs the "
            "status runs ") in done.stderr
