"""`make venv` (the first step of `make bench` and `make setup`) keeps the host's torch; the
tool called from a Python without its packages says where to call it from."""

from __future__ import annotations

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
    done = subprocess.run(["make", "-C", str(REPO), "venv", f"VENV={venv}", f"PYTHON={_python(host)}"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    found = subprocess.run([_python(venv), "-c", "import torch; print(torch.__version__, torch.__file__)"],
                           capture_output=True, text=True)
    assert found.returncode == 0, found.stderr
    assert found.stdout.split() == ["0.0.0+stub", str(stub / "__init__.py")]


def test_a_python_without_the_packages_says_so_in_one_line():
    """`python3 -m bench` in a fresh shell (-S: no site-packages, as a bare system Python)."""
    done = subprocess.run([sys.executable, "-S", "-m", "bench", "run"], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(f"error: {sys.executable} lacks ddpbench's packages (no module named ")
    assert ".venv/bin/ddpbench" in done.stderr and done.stderr.count("\n") == 1
