"""Bundles: one JSON document per invocation, validated when written and when read.

The sha256 covers the canonical JSON (sorted keys, no whitespace, ASCII) of the whole
document except the sha256 field, so changing one number anywhere breaks it. Reading is
safe whatever the file holds: I-JSON only (no key twice, integers a double holds), a size
limit, a bound on the memory its parsing may take (estimated from the text before a value
is built), a nesting-depth limit, no text or array longer than the schema lets any field
hold, no code run.
"""

from __future__ import annotations

import codecs
import functools
import hashlib
import json
import re
import zlib
from pathlib import Path
from typing import Callable

from bench import schemas, suites
from bench.common.files import write_text
from bench.common.sampling import contradiction
from bench.errors import UserError
from bench.inputfile import GivenTwice, loads, lone_surrogate, read_input

# MAJOR.MINOR. A minor adds what a reader of the same major may pass over (a field, a kind); a
# major changes what a field means. Bundles before the minor was written say the integer 1 (1.0).
SCHEMA_VERSION = "1.2"
# Reading an older major: MIGRATIONS[m] turns a major-m document into a major-(m+1) one. A major
# with no chain of migrations up to SCHEMA_VERSION's is refused, never guessed at.
MIGRATIONS: "dict[int, Callable[[dict], dict]]" = {}
VERSION_TEXT = re.compile(r"(0|[1-9][0-9]{0,5})\.(0|[1-9][0-9]{0,5})")
# Passes over a newer minor's document, each dropping the fields this schema does not know at one
# depth: a bundle nests deeper than this nowhere.
MAX_UNKNOWN_PASSES = 16
IMPORTED = "ddpbench.imported"  # the kind of a bundle made of another tool's result (`ddpbench import`): no plan
MAX_BUNDLE_BYTES = 256 * 1024 * 1024
MAX_DEPTH = 64
# The Python objects a bundle's text may become, at the most (estimated from the text before one
# is built): with the text held while it is parsed, then a run's canonical text or a copy of it
# while it is hashed or explained, reading any file under MAX_BUNDLE_BYTES takes well under 1 GiB
# (tests/e2e/test_hostile_input.py measures it).
MAX_PARSED_BYTES = 384 * 1024 * 1024
# What a token of the text costs once parsed, at the most (CPython 3.11, measured): each value
# after a comma a float and its slot in a list (32) or a long integer (40); each string (two
# quotes) a str (from 50), or a new key with its pair and memo entry (up to 180); an array an
# empty list (56); an object a dict of one entry and its pairs (up to 240). Real bundles take
# about a quarter of this estimate: their keys repeat.
TOKEN_BYTES = {b",": 48, b'"': 90, b"[": 80, b"{": 240}
# A big bundle is explained by the first problem found in its smallest part that has one (a run,
# a launch, the rest): weighing every problem (in Python) or quoting a big part would take minutes
# and gigabytes.
BIG_BUNDLE_BYTES = 4 * 1024 * 1024
CANONICAL = {"sort_keys": True, "separators": (",", ":"), "ensure_ascii": True, "allow_nan": False}
PIECE_DEPTH = 4  # a run or a launch: its canonical text is made whole, what holds it piece by piece
HASHED_CHARS = 1 << 20


def canonical_pieces(value, depth: int = 0):
    """json.dumps(value, **CANONICAL) in pieces: the containers of the first PIECE_DEPTH levels
    (bundle, hosts, host, runs) piece by piece, each value below them whole. Hashing a bundle then
    never holds its whole canonical text, which for a big one could be larger than its file."""
    if depth >= PIECE_DEPTH or not isinstance(value, (dict, list)):
        yield json.dumps(value, **CANONICAL)
    elif isinstance(value, dict):
        for i, key in enumerate(sorted(value)):
            yield ("{" if i == 0 else ",") + json.dumps(key, **CANONICAL) + ":"
            yield from canonical_pieces(value[key], depth + 1)
        yield "}" if value else "{}"
    else:
        for i, item in enumerate(value):
            yield "[" if i == 0 else ","
            yield from canonical_pieces(item, depth + 1)
        yield "]" if value else "[]"


def digest(document: dict) -> str:
    """sha256 of the canonical JSON of everything but the sha256 field."""
    hashed = hashlib.sha256()
    for piece in canonical_pieces({k: v for k, v in document.items() if k != "sha256"}):
        for start in range(0, len(piece), HASHED_CHARS):
            hashed.update(piece[start:start + HASHED_CHARS].encode())
    return hashed.hexdigest()


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


@functools.lru_cache(maxsize=None)
def _largest(keyword: str) -> int:
    """The largest value of a schema keyword (maxLength, maxItems) across the schemas a bundle uses."""
    found, stack = 0, [schemas.schema(name) for name in ("bundle", "plan", "fingerprint")]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get(keyword), int):
                found = max(found, node[keyword])
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


def parsed_bytes(data: bytes) -> int:
    """At the most, the memory the text's values take once parsed (TOKEN_BYTES), its strings included."""
    return len(data) + sum(data.count(token) * cost for token, cost in TOKEN_BYTES.items())


# UTF-8 lead bytes of characters beyond U+FFFF, and of those beyond U+00FF.
BEYOND_BMP, BEYOND_LATIN1 = re.compile(rb"[\xf0-\xf4]"), re.compile(rb"[\xc4-\xef]")


def _width(data: bytes) -> int:
    """The bytes a character Python holds this text in once decoded: 1, 2 or 4, by its widest
    character (ddpbench writes ASCII)."""
    if data.isascii():
        return 1
    start = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    return 4 if BEYOND_BMP.search(data, start) else 2 if BEYOND_LATIN1.search(data, start) else 1


GZIP_MAGIC = b"\x1f\x8b"
# `gzip` writes one member, `cat a.gz b.gz` a few: past this many a file is no bundle (500,000 empty
# members of 20 bytes took minutes to unpack one by one).
MAX_GZIP_MEMBERS = 64
GZIP_CHUNK_BYTES = 1 << 16  # fed to the unpacker at a time: what it keeps past a member's end is at most this


def published_bytes(path: Path, what: str = "bundle") -> bytes:
    """The file's bytes, unpacked where it is gzip (a bundle is published as .json.gz): the size
    limit holds for what it unpacks to, and unpacking stops there (a gzip bomb is never unpacked
    whole); at most MAX_GZIP_MEMBERS members, each fed in chunks (so that no member's end copies the rest)."""
    data = read_input(path, what, MAX_BUNDLE_BYTES)
    if not data.startswith(GZIP_MAGIC):
        return data
    view, at, members, pieces, size = memoryview(data), 0, 0, [], 0
    try:
        while at < len(data):  # a gzip file may hold several members, one after another
            members += 1
            if members > MAX_GZIP_MEMBERS:
                raise UserError(f"{path}: holds more than {MAX_GZIP_MEMBERS} gzip members, and a {what} is one; "
                                f"this is not a ddpbench {what}")
            unpacker = zlib.decompressobj(wbits=31)
            while not unpacker.eof:
                if at >= len(data):
                    raise UserError(f"{path}: the gzip stream ends early (truncated); fetch the {what} again")
                chunk = view[at:at + GZIP_CHUNK_BYTES]
                at += len(chunk)
                while chunk:
                    pieces.append(unpacker.decompress(chunk, MAX_BUNDLE_BYTES + 1 - size))
                    size += len(pieces[-1])
                    if size > MAX_BUNDLE_BYTES:
                        raise UserError(f"{path}: unpacks to more than the {MAX_BUNDLE_BYTES}-byte limit for a {what}; "
                                        f"this is not a ddpbench {what}")
                    chunk = unpacker.unconsumed_tail
            at -= len(unpacker.unused_data)
    except zlib.error as err:
        raise UserError(f"{path}: not a valid gzip file ({err}); fetch the {what} again") from None
    del data, view
    return b"".join(pieces)


def _text(path: Path, data: bytes, what: str = "bundle") -> str:
    """The bytes as text, refused where the text or its parsed values would pass their limits."""
    width = _width(data)
    if len(data) * width > MAX_BUNDLE_BYTES:
        raise UserError(f"{path}: {len(data)} bytes of text with characters Python holds in {width} bytes each is over "
                        f"the {MAX_BUNDLE_BYTES}-byte limit for a {what}; ddpbench writes them as ASCII: get the original")
    estimate = parsed_bytes(data)
    if estimate > MAX_PARSED_BYTES:
        raise UserError(f"{path}: its values would take about {estimate >> 20} MiB once read, over the "
                        f"{MAX_PARSED_BYTES >> 20} MiB a {what} may take; this is not a ddpbench {what}")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise UserError(f"{path}: not UTF-8 text ({err}); this is not a ddpbench {what}") from None


def _structure_problem(document) -> "str | None":
    """What no bundle can hold, found in one walk before anything else looks at the document: a
    nesting deeper than MAX_DEPTH, a lone surrogate, a text longer or an array or object larger
    than the schema lets any field be (so that no refusal ever quotes a huge value)."""
    longest, most = _largest("maxLength"), _largest("maxItems")

    def text_problem(path: tuple, text: str) -> "str | None":
        if len(text) > longest:
            return f"{_field(path)}: a text of {len(text)} characters ({text[:20]!r}...), longer than any field of a bundle holds ({longest})"
        surrogate = lone_surrogate(text)
        return surrogate and f"{_field(path)}: {surrogate}"

    stack = [(document, ())]
    while stack:
        item, path = stack.pop()
        if len(item) > most:
            return f"{_field(path)}: {len(item)} items, more than any array or object of a bundle holds ({most})"
        if item and len(path) + 1 >= MAX_DEPTH:
            return f"{_field(path)}: nested deeper than {MAX_DEPTH} levels"
        keyed = isinstance(item, dict)
        for key, value in item.items() if keyed else enumerate(item):
            # Only a long or non-ASCII text can be a problem: the rest is passed over at C speed.
            if keyed and (len(key) > longest or not key.isascii()):
                problem = text_problem((*path, key), key)
                if problem:
                    return problem
            if type(value) is str:
                if len(value) > longest or not value.isascii():
                    problem = text_problem((*path, key), value)
                    if problem:
                        return problem
            elif type(value) in (dict, list):
                stack.append((value, (*path, key)))
    return None


def _field(path: tuple) -> str:
    where = schemas.field_path(path)
    return f"field {where if len(where) <= 200 else where[:197] + '...'}"


def version_of(value) -> "tuple[int, int] | None":
    """(major, minor) of a schema_version: "1.1", or the integer 1 of the bundles before minors (1.0)."""
    if type(value) is int and value >= 0:
        return value, 0
    found = VERSION_TEXT.fullmatch(value) if isinstance(value, str) else None
    return (int(found[1]), int(found[2])) if found else None


def readable_majors() -> list[int]:
    """SCHEMA_VERSION's major and every older one with an unbroken chain of migrations up to it."""
    majors = [version_of(SCHEMA_VERSION)[0]]
    while majors[0] - 1 in MIGRATIONS:
        majors.insert(0, majors[0] - 1)
    return majors


def migrate(document: dict) -> dict:
    """An older major's (already integrity-checked) document brought up to SCHEMA_VERSION's, step by step.

    The result keeps the original's sha256, which then names the bundle as it was published.
    """
    for major in range(version_of(document["schema_version"])[0], version_of(SCHEMA_VERSION)[0]):
        document = MIGRATIONS[major](document)
    return document


def without_unknown_fields(document: dict) -> dict:
    """A newer minor's document as this schema reads it: every field it does not know left out (a
    minor only adds fields that a reader may pass over)."""
    validator = schemas.fast_validator("bundle")
    for _ in range(MAX_UNKNOWN_PASSES):
        unknown = [(list(error.instance_path), error.kind.unexpected) for error in validator.iter_errors(document)
                   if type(error.kind).__name__ in ("AdditionalProperties", "UnevaluatedProperties")]
        if not unknown:
            break
        document = json.loads(json.dumps(document))  # the caller's document stays as it was read
        for path, keys in unknown:
            holder = document
            for part in path:
                holder = holder[part]
            for key in keys:
                holder.pop(key, None)
    return document


def _readable_version(path: Path, value) -> "tuple[int, int]":
    """The document's (major, minor); a UserError where this ddpbench cannot read it."""
    version = version_of(value)
    if version is None:
        raise UserError(f"{path}: field schema_version: {str(value)[:40]!r} is not a MAJOR.MINOR version such as "
                        f"{SCHEMA_VERSION!r}; this is not a ddpbench bundle")
    if version[0] not in readable_majors():
        readable = ", ".join(f"{major}.x" for major in readable_majors())
        raise UserError(f"{path}: field schema_version: {value!r} is major version {version[0]}, which this ddpbench "
                        f"does not read ({readable}); use the ddpbench release that wrote it")
    return version


def read_bundle(path: Path) -> dict:
    """Load (unpacked where it is gzip), check size, structure, schema version, sha256 and schema;
    one UserError per problem."""
    data = published_bytes(path)
    big = len(data) > BIG_BUNDLE_BYTES
    document = _parsed(path, data, "bundle", "fetch the bundle again or rerun `ddpbench run`")
    version = _readable_version(path, document.get("schema_version"))
    recorded, actual = document.get("sha256"), digest(document)
    if recorded != actual:
        raise UserError(
            f"{path}: field sha256: recorded {str(recorded)[:16]}... but the content hashes to {actual[:16]}...; "
            "the bundle was changed after it was written: get the original"
        )
    document = migrate(document)
    if version > version_of(SCHEMA_VERSION):
        document = without_unknown_fields(document)
    _check_suites_known(document, path)
    problem = _problem_of_a_big_bundle(document) if big else schemas.first_problem(document, "bundle")
    if problem:
        raise UserError(f"{path}: {problem}; the bundle does not follow schema/bundle.schema.json: get the original")
    problem = next(filter(None, (timeline_problem(host["runs"], ("hosts", h, "runs")) for h, host in enumerate(document["hosts"]))), None)
    if problem:
        raise UserError(f"{path}: {problem}; ddpbench never writes such a timeline: get the original")
    problem = next(filter(None, (sampling_problem(host["runs"], ("hosts", h, "runs")) for h, host in enumerate(document["hosts"]))), None)
    if problem:
        raise UserError(f"{path}: {problem}; ddpbench never writes such a record: get the original")
    return document


def sampling_problem(runs: list, at: tuple) -> "str | None":
    """The first run's sampling record that contradicts itself (bench.common.sampling.contradiction), or None."""
    for i, run in enumerate(runs):
        found = contradiction(run["sampling"]) if run.get("sampling") else None
        if found:
            return f"field {schemas.field_path((*at, i, 'sampling'))}: {found}"
    return None


def timeline_problem(runs: list, at: tuple) -> "str | None":
    """The first run timeline whose arrays disagree (a step's bucket_ready_s, one time per bucket of
    bucket_bytes), which JSON Schema cannot say, or None. `at`: where the runs lie in the document."""
    for i, run in enumerate(runs):
        timeline = run.get("timeline")
        if not timeline:
            continue
        buckets = len(timeline["bucket_bytes"])
        for key in ("steps", "steps_without_allreduce"):
            for k, step in enumerate(timeline.get(key, [])):
                ready = len(step["bucket_ready_s"])
                if ready != buckets:
                    where = schemas.field_path((*at, i, "timeline", key, k, "bucket_ready_s"))
                    return f"field {where}: {ready} ready time(s) for the {buckets} bucket(s) of bucket_bytes"
    return None


def _parsed(path: Path, data: bytes, what: str, fetch_again: str) -> dict:
    """The JSON object the bytes hold, read within the limits above, its structure checked (_structure_problem)."""
    text = _text(path, data, what)
    del data  # the text alone is held while it is parsed
    try:
        document = loads(text)
    except RecursionError:
        raise UserError(f"{path}: nested too deeply to be a {what}; this is not a ddpbench {what}") from None
    except GivenTwice as err:
        raise UserError(f"{path}: {err}; ddpbench never writes one: get the original") from None
    except ValueError as err:
        # A cut can fall anywhere (inside a string, a number, `true`), so the decoder's position
        # does not tell; an object that never closes does.
        truncated = text.lstrip().startswith("{") and not text.rstrip().endswith("}")
        found = "truncated (the JSON ends early)" if truncated else f"not valid JSON ({err})"
        raise UserError(f"{path}: {found}; {fetch_again}") from None
    del text
    if not isinstance(document, dict):
        raise UserError(f"{path}: a {what} is a JSON object, this is a {type(document).__name__}; check the file")
    problem = _structure_problem(document)
    if problem:
        raise UserError(f"{path}: {problem}; this is not a {what} ddpbench wrote: get the original")
    return document


def read_agent_raw(path: Path) -> dict:
    """An agent's raw.json read back from a run folder (--resume), whoever wrote there since: the
    limits a bundle is read within, then the bundle schema's agent_raw; one UserError per problem."""
    document = _parsed(path, read_input(path, "raw.json", MAX_BUNDLE_BYTES), "raw.json", "the agent wrote it whole or not at all")
    problem = agent_raw_problem(document) or timeline_problem(document["runs"], ("runs",))
    if problem:
        raise UserError(f"{path}: {problem}; another agent version, or a damaged file")
    return document


def _problem_of_a_big_bundle(document: dict) -> "str | None":
    """The first problem of a big bundle, explained on the smallest part that holds it: a run, a
    launch, or the bundle without its runs and launches (each valid then)."""
    if schemas.fast_validator("bundle").is_valid(document):
        return None
    hosts = document.get("hosts") if isinstance(document.get("hosts"), list) else []
    limits = {key: spec["maxItems"] for key, spec in schemas.schema("bundle")["$defs"]["host_result"]["properties"].items()
              if key in ("runs", "launches")}
    skeleton = []
    for h, host in enumerate(hosts):
        if not isinstance(host, dict):
            skeleton.append(host)
            continue
        kept = {}
        for key, definition in (("launches", "launch"), ("runs", "run")):
            items = host.get(key)
            if not isinstance(items, list) or len(items) > limits[key]:
                continue
            for i, item in enumerate(items):
                problem = schemas.first_problem(item, "bundle", definition, thorough=False, at=("hosts", h, key, i))
                if problem:
                    return problem
            kept[key] = []
        skeleton.append({**host, **kept})
    return (schemas.first_problem({**document, "hosts": skeleton}, "bundle", thorough=False)
            or schemas.first_problem(document, "bundle", thorough=False))


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
