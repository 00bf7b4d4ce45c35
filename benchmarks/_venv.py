"""The interpreter of the scripts that need the controller's packages: one started by a Python without
them (`python benchmarks/plan_durations.py` in a fresh shell) runs again under the repository's
.venv/bin/python, which `make setup` (or the first `make bench`) builds; without that venv, one
`error:` line says so. Standard library only: it runs before anything else can be imported."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

VENV_PYTHON = Path(__file__).resolve().parents[1] / ".venv" / "bin" / "python"


@contextlib.contextmanager
def imports_of_the_venv():
    """Around a script's imports: where one is missing, the script again under .venv/bin/python."""
    try:
        yield
    except ModuleNotFoundError as missing:
        if (missing.name or "").split(".")[0] in ("bench", "benchmarks", "tests"):
            raise  # a module of this repository: a bug, not the interpreter
        if VENV_PYTHON.exists() and Path(sys.executable).absolute() != VENV_PYTHON:
            os.execv(VENV_PYTHON, [str(VENV_PYTHON), *sys.argv])
        print(f"error: {sys.executable} lacks {missing.name!r}, which {sys.argv[0]} needs; run `make setup`, then "
              f".venv/bin/python {sys.argv[0]}", file=sys.stderr)
        sys.exit(2)
