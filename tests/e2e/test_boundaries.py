"""The one boundary that matters: the agent needs only torch and the standard library (and
bench.common, shared with the controller and standard library only, with the suites' definitions
and ranks, the judging and the models), and the controller never imports torch. The suites are the registry's:
with DDPBENCH_SUITES_PATH set, a suite of your own's ranks are held to it too."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from bench import suites
from tests.conftest import REPO


def modules_after_import(*modules: str) -> set[str]:
    code = "import sys, json\n" + "".join(f"import {m}\n" for m in modules) + "print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO).stdout
    return set(json.loads(out))


def test_agent_imports_nothing_of_the_controller():
    loaded = modules_after_import("bench.agent.__main__", "bench.agent.worker", *(suite.ranks_module for suite in suites.registry().values()))
    ours = {m for m in loaded if m.startswith("bench.")}
    # The suites' definitions and ranks, the judging and the models ship with the agent; the suites' report parts never load.
    assert ours and all(m.startswith(("bench.agent", "bench.common", "bench.judging", "bench.suites", "bench.models")) or m == "bench.errors"
                        for m in ours), sorted(ours)
    assert not any(".report" in m for m in ours), sorted(ours)
    assert not loaded & {"jsonschema", "yaml", "fabric", "matplotlib", "rich", "docker"}


def test_controller_never_imports_torch():
    loaded = modules_after_import("bench.cli", "bench.controller.run", "bench.report", "bench.bundle")
    assert "torch" not in loaded


def test_common_needs_only_the_standard_library():
    """bench.common ships in the agent's zipapp: a host's python3 may have torch and nothing else."""
    common = sorted(f"bench.common.{p.stem}" for p in (REPO / "bench" / "common").glob("*.py") if p.stem != "__init__")
    loaded = modules_after_import(*common)
    imported = {m.split(".")[0] for m in loaded - modules_after_import()}
    assert imported - sys.stdlib_module_names == {"bench"}, sorted(imported - sys.stdlib_module_names)
    assert {m for m in loaded if m.startswith("bench.")} <= {"bench.common", *common}
