"""Another bundle of the same samples: what a comparison that must judge runs needs, since a bundle
compared with itself (one sha256) is SAME BUNDLE and judges nothing."""

from __future__ import annotations

import json
from pathlib import Path

from bench.bundle import seal


def another_bundle_of(bundle: Path, out: Path) -> Path:
    """The bundle with its end time moved to its start, sealed again, written to out/bundle.json."""
    doc = json.loads(bundle.read_text())
    doc["finished_at"] = doc["started_at"]
    out.mkdir(parents=True, exist_ok=True)
    path = out / "bundle.json"
    path.write_text(json.dumps(seal(doc)))
    return path
