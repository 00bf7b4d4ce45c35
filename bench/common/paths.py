"""Where the code runs from."""

from __future__ import annotations

from pathlib import Path

# The folder (or zipapp) that holds `bench`: the repository root in a checkout, agent.pyz on a
# host, /opt/ddpbench-agent in the image. Ranks and helper processes get it on PYTHONPATH.
SOURCE_ROOT = Path(__file__).resolve().parents[2]
