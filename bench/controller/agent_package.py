"""The agent as one file: a zipapp of `bench/__init__.py` and `bench/agent/**` only.

Shipping nothing else proves the agent needs nothing else: a host's python3 with torch runs
`python3 agent.pyz run ...`. The archive is byte-for-byte reproducible (fixed timestamps,
sorted entries), so the same checkout always ships the same file.
"""

from __future__ import annotations

import functools
import hashlib
import io
import zipfile
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parents[1]
ENTRY = "import sys\n\nfrom bench.agent.__main__ import main\n\nsys.exit(main())\n"
FIXED_TIME = (1980, 1, 1, 0, 0, 0)


def agent_sources() -> list[Path]:
    sources = [BENCH_DIR / "__init__.py", *sorted((BENCH_DIR / "agent").rglob("*.py"))]
    return [p for p in sources if "__pycache__" not in p.parts]


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
            _entry(archive, source.relative_to(BENCH_DIR.parent).as_posix(), source.read_bytes())
    return buffer.getvalue()


def agent_digest() -> str:
    return hashlib.sha256(agent_zipapp()).hexdigest()


def write_agent_zipapp(path: Path) -> Path:
    path.write_bytes(agent_zipapp())
    return path
