"""The one UTC timestamp format of bundles, raw.json and fingerprints (ISO 8601, "Z")."""

from __future__ import annotations

import datetime


def utc_timestamp(microseconds: bool = False) -> str:
    """Now, e.g. "2026-11-23T00:41:24Z"; with microseconds where events within a second must
    still order (raw.json's start and end, compared across hosts)."""
    form = "%Y-%m-%dT%H:%M:%S.%fZ" if microseconds else "%Y-%m-%dT%H:%M:%SZ"
    return datetime.datetime.now(datetime.timezone.utc).strftime(form)
