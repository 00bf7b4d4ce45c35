"""The agent as one file: a zipapp of what the agent runs and nothing else: `bench/__init__.py`,
`bench/errors.py`, `bench/agent/**`, `bench/common/**` (the standard-library code the agent shares
with the controller), the suites' code but their report parts (`bench/suites/**`: the ranks' part
and what the planner asks of each suite), the judging (`bench/judging/**`: the host's concerns the
agent prints before its first launch, the clocks its counters judge) and the models (`bench/models/**`).

Shipping nothing else proves the agent needs nothing else: a host's python3 with torch runs
`python3 agent.pyz run ...`. The archive is byte-for-byte reproducible (fixed timestamps,
sorted entries), so the same checkout always ships the same file. Suites of your own on
DDPBENCH_SUITES_PATH are not shipped: they run where that folder is (runtime local).
"""

from __future__ import annotations

import functools
import io
import zipfile
from pathlib import Path

from bench.common.paths import SOURCE_ROOT

AGENT_PACKAGES = ("agent", "common", "judging", "suites", "models")
AGENT_FILES = ("__init__.py", "errors.py")
REPORT_PART = "report"  # a suite's part of the report (report.py or report/): matplotlib's, never the agent's
ENTRY = "import sys\n\nfrom bench.agent.__main__ import main\n\nsys.exit(main())\n"
FIXED_TIME = (1980, 1, 1, 0, 0, 0)


def agent_sources() -> list[Path]:
    bench = SOURCE_ROOT / "bench"
    sources = [*(bench / name for name in AGENT_FILES), *(p for package in AGENT_PACKAGES for p in sorted((bench / package).rglob("*.py")))]
    return [p for p in sources if "__pycache__" not in p.parts and not _report_part(p.relative_to(bench))]


def _report_part(path: Path) -> bool:
    """suites/NAME/report.py and suites/NAME/report/..."""
    return path.parts[0] == "suites" and len(path.parts) > 2 and Path(path.parts[2]).stem == REPORT_PART


def _entry(archive: zipfile.ZipFile, name: str, data: bytes) -> None:
    info = zipfile.ZipInfo(name, FIXED_TIME)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    archive.writestr(info, data)


@functools.lru_cache(maxsize=1)
def agent_zipapp() -> bytes:
    """The zipapp's bytes (built once per process)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        _entry(archive, "__main__.py", ENTRY.encode())
        for source in agent_sources():
            _entry(archive, source.relative_to(SOURCE_ROOT).as_posix(), source.read_bytes())
    return buffer.getvalue()
