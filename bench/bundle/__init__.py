"""Bundles: one JSON document per invocation, validated when written and when read.

The sha256 covers the canonical JSON (sorted keys, no whitespace, ASCII) of the whole
document except the sha256 field, so changing one number anywhere breaks it. Reading is
safe whatever the file holds: JSON only, a size limit, a nesting-depth limit, no code run.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Callable

from bench import schemas, suites
from bench.common.files import write_text
from bench.errors import UserError
from bench.inputfile import finite_float, lone_surrogate, read_input, reject_constant

SCHEMA_VERSION = 1
# Reading an older bundle: MIGRATIONS[v] turns a version-v document into a version-(v+1) one.
# A version with no chain of migrations up to SCHEMA_VERSION is refused, never guessed at.
MIGRATIONS: "dict[int, Callable[[dict], dict]]" = {}
MAX_BUNDLE_BYTES = 256 * 1024 * 1024
MAX_DEPTH = 64


def canonical_json(document: dict) -> bytes:
    body = {k: v for k, v in document.items() if k != "sha256"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode()


def digest(document: dict) -> str:
    return hashlib.sha256(canonical_json(document)).hexdigest()


def seal(document: dict) -> dict:
    """The document with its sha256 set."""
    return {**document, "sha256": digest(document)}


def write_bundle(path: Path, document: dict) -> dict:
    """Seal, validate and write atomically; returns the sealed document."""
    sealed = seal(document)
    schemas.validator("bundle").validate(sealed)  # a bundle we write that fails is our bug: let it raise
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, json.dumps(sealed, indent=1, allow_nan=False) + "\n")
    return sealed


def agent_raw_problem(raw) -> "str | None":
    """What is wrong with an agent's raw.json against the bundle schema's agent_raw, or None."""
    return schemas.first_problem(raw, "bundle", "agent_raw")


def _depth(value, limit: int) -> int:
    stack, deepest = [(value, 1)], 0
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth > limit:
            return depth
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return deepest


def readable_versions() -> list[int]:
    """SCHEMA_VERSION and every older version with an unbroken chain of migrations up to it."""
    versions = [SCHEMA_VERSION]
    while versions[0] - 1 in MIGRATIONS:
        versions.insert(0, versions[0] - 1)
    return versions


def migrate(document: dict) -> dict:
    """An older (already integrity-checked) document brought up to SCHEMA_VERSION, step by step.

    The result keeps the original's sha256, which then names the bundle as it was published.
    """
    for version in range(document["schema_version"], SCHEMA_VERSION):
        document = MIGRATIONS[version](document)
    return document


def read_bundle(path: Path) -> dict:
    """Load, check size, depth, schema version, sha256 and schema; one UserError per problem."""
    data = read_input(path, "bundle", MAX_BUNDLE_BYTES)
    try:
        document = json.loads(data, parse_constant=reject_constant, parse_float=finite_float)
    except RecursionError:
        raise UserError(f"{path}: nested too deeply to be a bundle; this is not a ddpbench bundle") from None
    except (UnicodeDecodeError, ValueError) as err:
        # A cut can fall anywhere (inside a string, a number, `true`), so the decoder's position
        # does not tell; an object that never closes does.
        truncated = data.lstrip().startswith(b"{") and not data.rstrip().endswith(b"}")
        what = "truncated (the JSON ends early)" if truncated else f"not valid JSON ({err})"
        raise UserError(f"{path}: {what}; fetch the bundle again or rerun `ddpbench run`") from None
    if not isinstance(document, dict):
        raise UserError(f"{path}: a bundle is a JSON object, this is a {type(document).__name__}; check the file")
    if _depth(document, MAX_DEPTH) > MAX_DEPTH:
        raise UserError(f"{path}: nested deeper than {MAX_DEPTH} levels; this is not a ddpbench bundle")
    surrogate = lone_surrogate(document)
    if surrogate:
        raise UserError(f"{path}: {surrogate}; this is not a bundle ddpbench wrote: get the original")
    version = document.get("schema_version")
    if type(version) is not int or version not in readable_versions():
        readable = ", ".join(str(v) for v in readable_versions())
        raise UserError(
            f"{path}: field schema_version: {version!r} is not a version this ddpbench reads ({readable}); "
            "use the ddpbench release that wrote it"
        )
    recorded, actual = document.get("sha256"), digest(document)
    if recorded != actual:
        raise UserError(
            f"{path}: field sha256: recorded {str(recorded)[:16]}... but the content hashes to {actual[:16]}...; "
            "the bundle was changed after it was written: get the original"
        )
    document = migrate(document)
    _check_suites_known(document, path)
    schemas.validate("bundle", document, str(path), "the bundle does not follow schema/bundle.schema.json: get the original")
    return document


def _check_suites_known(document: dict, path: Path) -> None:
    """A run or launch of a suite this ddpbench lacks is named as such, with the suites it has
    (before the schema, whose enum would say less)."""
    hosts = document.get("hosts")
    for h, host in enumerate(hosts if isinstance(hosts, list) else []):
        for part in ("runs", "launches"):
            items = host.get(part) if isinstance(host, dict) else None
            for i, item in enumerate(items if isinstance(items, list) else []):
                if isinstance(item, dict) and isinstance(item.get("suite"), str):
                    suites.get(item["suite"], f"{path}: field hosts[{h}].{part}[{i}].suite",
                               "read it with the ddpbench that wrote it")
