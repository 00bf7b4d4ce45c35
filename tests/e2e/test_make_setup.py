"""`make venv` (the first step of `make bench` and `make setup`) keeps the host's torch; set-up says
each step and how long it takes, and make echoes no recipe text that reads as output (a warning pip
never gave); the tool called from a Python without its packages says where to call it from."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO


def _python(venv) -> str:
    return str(venv / "bin" / "python")


def test_a_venv_python3_keeps_its_torch(tmp_path):
    """python3 is itself a venv with torch (as on rented GPU boxes): the .venv must find that torch,
    which `venv --system-site-packages` alone would not (it looks at the base interpreter)."""
    host = tmp_path / "host-python"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(host)], check=True)
    site_packages = subprocess.run(
        [_python(host), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
    stub = Path(site_packages) / "torch"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text("__version__ = '0.0.0+stub'\n")

    venv = tmp_path / "venv"
    done = subprocess.run(["make", "--no-print-directory", "-C", str(REPO), "venv", f"VENV={venv}", f"PYTHON={_python(host)}"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    # said before it is done, with its time; the recipes' code not echoed
    said, step = done.stdout.splitlines()[:2]
    assert re.fullmatch(rf"make: setting up {re.escape(str(venv))} once \(on this Python's torch, then ddpbench's packages\): "
                        r"about \d+ (s|min) here( \(this CPU [\d.]+x slower than idle: other processes\))?; then venv goes on", said), said
    assert step == f"make: a venv that uses the torch of {_python(host)}"
    assert "venv_pth.py" not in done.stdout and "warning" not in (done.stdout + done.stderr).lower()
    found = subprocess.run([_python(venv), "-c", "import torch; print(torch.__version__, torch.__file__)"],
                           capture_output=True, text=True)
    assert found.returncode == 0, found.stderr
    assert found.stdout.split() == ["0.0.0+stub", str(stub / "__init__.py")]


def _venv_whose_pip(root: Path, exits: int) -> Path:
    """A venv as the Makefile finds it, its python this one with this checkout first on the path, and
    its pip a stand-in that exits so at once: what make says around pip, not pip's own work."""
    venv = root / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("")
    python = venv / "bin" / "python"
    python.write_text(f'#!/bin/sh\nif [ "$1 $2" = "-m pip" ]; then echo "pip $*"; exit {exits}; fi\n'
                      f'PYTHONPATH={REPO} exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    return venv


def _make(*args) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "--no-print-directory", *args], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={k: v for k, v in os.environ.items() if not k.startswith("MAKE")})


def test_installing_says_its_step_and_echoes_no_warning_pip_did_not_give(tmp_path):
    venv = _venv_whose_pip(tmp_path / "ok", 0)
    done = _make(f"VENV={venv}", f"{venv}/.installed")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"make: ddpbench and the packages it needs, into {venv}", "pip -m pip install -e .[sdxl]"]
    assert done.stderr == ""

    # A host without a package index: pip fails, the packages are importable, make bench goes on with one warning line.
    venv = _venv_whose_pip(tmp_path / "no-index", 1)
    done = _make(f"VENV={venv}", f"{venv}/.installed")
    assert done.returncode == 0 and (venv / ".installed").exists(), done.stderr
    assert done.stderr.splitlines() == ["warning: pip could not install ddpbench (no package index?); its packages are importable, "
                                        "so make bench goes on (no ddpbench command, no diffusers unless installed)"]
    assert "pip could not install" not in done.stdout


def test_a_python_without_the_packages_says_so_in_one_line():
    """`python3 -m bench` in a fresh shell (-S: no site-packages, as a bare system Python)."""
    done = subprocess.run([sys.executable, "-S", "-m", "bench", "run"], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(f"error: {sys.executable} lacks ddpbench's packages (no module named ")
    assert ".venv/bin/ddpbench" in done.stderr and done.stderr.count("\n") == 1
