"""Reading a file the user handed us, whoever wrote it: regular files only, never more than a cap.

A FIFO would block a plain open(), /dev/zero would never end, a directory fails late with a
traceback: each is refused in one line before a byte is read.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from bench.errors import UserError

MAX_TEXT_BYTES = 4 * 1024 * 1024  # plans, hosts files, run.json, raw.json, signatures: far above any real one


def read_input(path: Path, what: str, max_bytes: int = MAX_TEXT_BYTES) -> bytes:
    """The bytes of a regular file of at most max_bytes; a UserError naming the path otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise UserError(f"{path}: no such {what}; check the path") from None
    except OSError as err:
        raise UserError(f"{path}: cannot open this {what} ({err.strerror}); give a readable file") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file (a device, FIFO or socket)"
            raise UserError(f"{path}: {kind}; give the path of a {what}")
        if info.st_size > max_bytes:
            raise UserError(f"{path}: {info.st_size} bytes is over the {max_bytes}-byte limit for a {what}; this is not a ddpbench {what}")
        # One read of the size fstat gave (and a byte more, to see a file that grew): a big file is
        # then held once, not once in pieces and again joined.
        chunks = [os.read(fd, info.st_size + 1)]
        size = len(chunks[0])
        while size <= max_bytes and chunks[-1]:
            chunks.append(os.read(fd, min(1 << 20, max_bytes + 1 - size)))
            size += len(chunks[-1])
        if size > max_bytes:  # grew while we read it
            raise UserError(f"{path}: over the {max_bytes}-byte limit for a {what}; this is not a ddpbench {what}")
        return chunks[0] if len(chunks[0]) == size else b"".join(chunks)
    except OSError as err:
        raise UserError(f"{path}: cannot read this {what} ({err.strerror}); give a readable file") from None
    finally:
        os.close(fd)


def read_json_text(path: Path, what: str, max_bytes: int = MAX_TEXT_BYTES):
    """A JSON document from a file, with NaN, Infinity and numbers that overflow to inf refused."""
    data = read_input(path, what, max_bytes)
    try:
        document = loads(data)
    except RecursionError:
        raise UserError(f"{path}: nested too deeply to be a {what}") from None
    except GivenTwice as err:
        raise UserError(f"{path}: {err}; this {what} is damaged") from None
    except (UnicodeDecodeError, ValueError) as err:
        raise UserError(f"{path}: not valid JSON ({err}); this {what} is damaged") from None
    problem = lone_surrogate(document)
    if problem:
        raise UserError(f"{path}: {problem}; this {what} is damaged")
    return document


def read_data_file(path: Path, what: str, schemas: tuple, fix: str):
    """A data file of ddpbench's own (a suite's expected ranges, the predictor's validated error) checked
    against its schema in schema/ (the first of `schemas`, the others the ones it refers to); one line
    naming the file, the field and `fix` where it departs."""
    import jsonschema_rs  # the controller's: the agent, which ships this module, never reads these files

    from bench.common.paths import SOURCE_ROOT

    document = read_json_text(path, what)
    found = [read_json_text(SOURCE_ROOT / "schema" / f"{name}.schema.json", "schema") for name in schemas]
    validator = jsonschema_rs.validator_for(found[0], registry=jsonschema_rs.Registry([(s["$id"], s) for s in found]))
    problem = next(iter(validator.iter_errors(document)), None)
    if problem is not None:
        where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in problem.instance_path).lstrip(".")
        raise UserError(f"{path}: {where or '(top level)'}: {problem.message}; {fix} (schema/{schemas[0]}.schema.json)")
    return document


def loads(text: "str | bytes"):
    """json.loads as I-JSON (RFC 7493) reads: no key given twice in an object (readers differ on
    which one counts, so a seal over one reading would vouch for another), no integer past
    +-(2**53 - 1) (a double holds no more), no NaN or infinity."""
    return json.loads(text, object_pairs_hook=unique_keys, parse_int=exact_int, parse_constant=reject_constant,
                      parse_float=finite_float)


class GivenTwice(ValueError):
    """A JSON object with a key given twice."""


def unique_keys(pairs: list) -> dict:
    document = dict(pairs)
    if len(document) < len(pairs):
        seen: set = set()
        twice = next(key for key, _ in pairs if key in seen or seen.add(key))
        raise GivenTwice(f"the key {twice[:80]!r} is given twice in one object (I-JSON, RFC 7493)")
    return document


MAX_EXACT_INT = 2**53 - 1


def exact_int(text: str) -> int:
    # The length first: converting a long run of digits costs time in its square (Python < 3.11).
    value = int(text) if len(text) <= 17 else None
    if value is None or abs(value) > MAX_EXACT_INT:
        raise ValueError(f"{text[:20]} is past the integers JSON readers agree on (+-2**53 - 1)")
    return value


def reject_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def finite_float(text: str) -> float:
    value = float(text)
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"{text[:20]} is not a finite number")
    return value


def lone_surrogate(document) -> "str | None":
    """The first string (or key) holding a lone UTF-16 surrogate (JSON's \\ud800 escapes allow
    one), which is no text: nothing can print or encode it, and validators disagree on it."""
    stack = [document]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as err:
                return f"{item[max(0, err.start - 20):err.start]!r} is followed by a lone surrogate ({item[err.start]!r}), which is not text"
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None
