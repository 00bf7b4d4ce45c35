"""`make verify`: make turns every failed recipe into its own exit status 2, so the recipe's last line
names what verify itself said (docs/verify.md)."""

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


def test_make_verify_names_verifys_own_exit_status(tmp_path):
    """A published GPU bundle on this CPU machine: verify says NOT COMPARABLE (4); make can only say 2,
    so its last line names the 4, and the command docs/verify.md gives for scripts returns it."""
    bundle = REPO / "benchmarks" / "results" / "bundles" / "20261125T213922Z-6e20a7.bundle.json"
    venv = _venv(tmp_path)
    done = subprocess.run(["make", "--no-print-directory", "verify", f"VENV={venv}", f"BUNDLE={bundle}",
                           f"OUT={tmp_path / 'results'}"], cwd=REPO, capture_output=True, text=True,
                          timeout=300, env={k: v for k, v in os.environ.items() if not k.startswith("MAKE")})
    assert done.returncode == 2, done.stdout + done.stderr
    # The command make runs is said; the shell that names verify's status is not echoed.
    assert done.stdout.startswith(f"{venv}/bin/python -m bench verify {bundle} --hosts hosts/local.yaml --out {tmp_path / 'results'} \n")
    assert "case $status" not in done.stdout + done.stderr
    assert "\nNOT COMPARABLE: nothing of bundle 20261125T213922Z-6e20a7 can be rerun" in done.stdout
    assert done.stderr.splitlines()[-2].startswith(
        "make verify: ddpbench verify exited 4 (NOT COMPARABLE); make exits 2 for any failure, so a script that needs the status runs ")
    direct = subprocess.run([f"{venv}/bin/python", "-m", "bench", "verify", str(bundle), "--out", str(tmp_path / "results")],
                            cwd=REPO, capture_output=True, text=True, timeout=300)
    assert direct.returncode == 4, direct.stdout + direct.stderr
