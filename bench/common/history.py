"""Launch durations of an earlier run of the same plan on the same machine: the controller finds
them in the results folder and sends {"machine": machine_key, "durations_s": {...}}; the agent
prefers them to the cost model when the machine matches."""

from __future__ import annotations


def machine_key(fingerprint: dict) -> list:
    """What makes two fingerprints the same machine: hostname and GPUs (hashed as in the bundle)."""
    return [(fingerprint.get("host") or {}).get("hostname_sha256"),
            sorted(g.get("uuid_sha256") or g.get("name") or "" for g in fingerprint.get("gpus") or [])]


def earlier_durations(history: "dict | None", fingerprint: dict) -> dict:
    """{launch id: seconds} from `history` ({"machine": machine_key, "durations_s": {...}}) when
    it was measured on this machine, else nothing."""
    if not history or history.get("machine") != machine_key(fingerprint):
        return {}
    return dict(history.get("durations_s") or {})
