"""compare writes its verdict where --out says (default results/), never beside the bundles it reads:
two published bundles compared from a read-only folder leave that folder as it was."""

from __future__ import annotations

import json
import shutil
import stat
from pathlib import Path

from tests.conftest import REPO, cli

PUBLISHED = REPO / "benchmarks" / "results" / "bundles"
# Two runs of one plan on one 2x H100: comparable, run by run.
ORIGINAL, NEW = "20261125T213922Z-6e20a7.bundle.json", "20261125T214225Z-2c5662.bundle.json"


def _listing(folder: Path) -> dict:
    return {path.name: (path.stat().st_size, path.stat().st_mtime_ns) for path in folder.iterdir()}


def test_compare_of_bundles_in_a_read_only_folder_writes_only_into_out(tmp_path):
    held = tmp_path / "published"
    held.mkdir()
    for name in (ORIGINAL, NEW):
        shutil.copy(PUBLISHED / name, held / name)
    held.chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    before = _listing(held)
    work = tmp_path / "work"
    work.mkdir()
    try:
        # One launch a side: the small sizes are judged to about 6% (the launch-to-launch floor), so at 10%.
        done = cli("compare", held / ORIGINAL, held / NEW, "--tolerance", "10%", cwd=work)
        # Root ignores the folder's mode: the listing is what shows that nothing was written there.
        assert _listing(held) == before
    finally:
        held.chmod(0o755)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.rstrip().endswith("verdict: results/verdict.md and verdict.json")
    verdict = json.loads((work / "results" / "verdict.json").read_text())
    assert verdict["outcome"] == "passed" and {run["verdict"] for run in verdict["runs"]} == {"reproduced"}

    elsewhere = cli("compare", held / ORIGINAL, held / NEW, "--tolerance", "10%", "--out", tmp_path / "verdicts", cwd=work)
    assert elsewhere.returncode == 0, elsewhere.stderr
    assert sorted(p.name for p in (tmp_path / "verdicts").iterdir()) == ["verdict.json", "verdict.md"]
    assert _listing(held) == before
