"""What each published bundle's report says (benchmarks/results/bundles/): tests/report/published/NAME.report.md,
as the code last rendered it. tests/report/test_published_bundles.py renders every report again and
fails where one says something else; where the change is meant, write them again and let their diff
say, in the commit, what changed:

    .venv/bin/python -m tests.support.published_reports --write
"""

from __future__ import annotations

import argparse
import difflib
import gzip
import sys
import tempfile
from pathlib import Path

from tests.conftest import REPO, cli

BUNDLES = REPO / "benchmarks" / "results" / "bundles"
SAID = REPO / "tests" / "report" / "published"


def published() -> list[Path]:
    return sorted(BUNDLES.glob("*.bundle.json*"))


def stem(bundle: Path) -> str:
    return bundle.name.split(".")[0]


def readable(path: Path, folder: Path) -> Path:
    """The bundle as a plain .json file (a .json.gz decompressed into folder)."""
    if path.suffix != ".gz":
        return path
    plain = folder / path.name.removesuffix(".gz")
    plain.write_bytes(gzip.decompress(path.read_bytes()))
    return plain


def render(bundle: Path, folder: Path) -> str:
    """report.md of one bundle, rendered by `ddpbench report` into folder."""
    done = cli("report", readable(bundle, folder), "--out", folder / "report")
    if done.returncode != 0:
        raise RuntimeError(f"ddpbench report {bundle.name} failed: {done.stderr}")
    return (folder / "report" / "report.md").read_text()


def difference(bundle: Path, text: str) -> "str | None":
    """Where the rendered report departs from what it said, as a unified diff of a few lines; None where it says the same."""
    said = (SAID / f"{stem(bundle)}.report.md").read_text()
    if text == said:
        return None
    lines = difflib.unified_diff(said.splitlines(), text.splitlines(), "said", "now", n=1, lineterm="")
    return "\n".join(list(lines)[:40])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write each report into {SAID.relative_to(REPO)}")
    args = parser.parse_args()
    SAID.mkdir(exist_ok=True)
    changed = 0
    for bundle in published():
        with tempfile.TemporaryDirectory() as folder:
            text = render(bundle, Path(folder))
        found = difference(bundle, text) if (SAID / f"{stem(bundle)}.report.md").exists() else "(new)"
        if found:
            changed += 1
            print(f"{stem(bundle)}: {found}")
            if args.write:
                (SAID / f"{stem(bundle)}.report.md").write_text(text)
    print(f"{changed} of {len(published())} report(s) differ" + (", written" if args.write and changed else ""))
    return 1 if changed and not args.write else 0


if __name__ == "__main__":
    sys.exit(main())
