"""The agent zipapp: what it holds, and that it starts without the checkout."""

from __future__ import annotations

import io
import subprocess
import sys
import zipfile

from bench.controller.agent_package import agent_zipapp


def test_agent_zipapp_holds_the_agent_and_nothing_else():
    archive = zipfile.ZipFile(io.BytesIO(agent_zipapp()))
    names = archive.namelist()
    assert names[0] == "__main__.py" and "bench/__init__.py" in names
    assert all(n in ("__main__.py", "bench/__init__.py", "bench/errors.py")
               or n.startswith(("bench/agent/", "bench/common/", "bench/judging/", "bench/suites/", "bench/models/")) for n in names)
    assert {"bench/agent/worker.py", "bench/common/stats.py", "bench/judging/health.py"} <= set(names) and not any("__pycache__" in n for n in names)
    # Every suite's ranks and definition, none of its report part (matplotlib's, the controller's alone).
    assert {"bench/suites/ddp/ranks.py", "bench/suites/ddp/suite.py", "bench/suites/copy/ranks.py"} <= set(names)
    assert not any(n.split("/")[3:4] in (["report.py"], ["report"]) for n in names if n.startswith("bench/suites/"))
    assert agent_zipapp.__wrapped__() == agent_zipapp()  # the same checkout ships the same bytes


def test_agent_zipapp_runs_alone(tmp_path):
    """Without the checkout on the path, the zipapp still starts: it needs nothing else of ours."""
    pyz = tmp_path / "agent.pyz"
    pyz.write_bytes(agent_zipapp())
    done = subprocess.run([sys.executable, "-I", str(pyz), "run", "--help"], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0 and "--stop-on-stdin-eof" in done.stdout


def test_the_image_copies_every_package_the_zipapp_ships():
    """The Dockerfile and .dockerignore name the agent's packages by hand: a package the zipapp ships and the
    image leaves out is an agent that dies on its first import inside the container."""
    from bench.controller.agent_package import AGENT_PACKAGES
    from tests.conftest import REPO

    dockerfile = (REPO / "Dockerfile").read_text()
    ignore = (REPO / ".dockerignore").read_text().splitlines()
    for package in AGENT_PACKAGES:
        assert f"COPY bench/{package} /opt/ddpbench-agent/bench/{package}\n" in dockerfile, package
        assert f"!bench/{package}/" in ignore, package
