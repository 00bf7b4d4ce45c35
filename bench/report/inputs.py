"""The report's inputs: bundle paths and glob patterns in, checked bundles out, each counted once.

A pattern is expanded here rather than by the shell, so that `make report BUNDLES='a/*.json'`
and a quoted glob on the command line both work. A pattern that matches no file is a warning (an
error where nothing matches); a file that is not a valid bundle is named and skipped (or, strict,
stops the report), and so is a valid one the report fails on (a bug of ours): the others' report is
still written.
"""

from __future__ import annotations

import glob
import multiprocessing
import os
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from bench.bundle import read_bundle
from bench.errors import UserError


PARALLEL_FROM = 50  # bundles; fewer are read faster than workers start


@dataclass(frozen=True)
class Loaded:
    path: Path
    bundle: dict


def expand(patterns: list[str], warn: Callable[[str], None]) -> list[Path]:
    """Files named or matched, in the order given (sorted within one pattern), each once; a pattern
    that matches nothing is warned of, and an error where none matches anything."""
    found: dict[Path, None] = {}
    empty = []
    for pattern in patterns:
        if Path(pattern).exists() and not glob.has_magic(pattern):  # a FIFO or folder too: reading names what it is
            found.setdefault(Path(pattern))
            continue
        if not glob.has_magic(pattern):
            raise UserError(f"{pattern}: no such bundle file; check the path")
        matches = sorted(Path(m) for m in glob.glob(pattern, recursive=True) if Path(m).is_file())
        empty += [pattern] if not matches else []
        for match in matches:
            found.setdefault(match)
    if not found:
        said = f"{empty[0]}: the pattern matches no file" if len(empty) == 1 else f"none of the patterns {', '.join(empty)} matches a file"
        raise UserError(f"{said}; check the path (`make bench` writes results/*/bundle.json)")
    for pattern in empty:
        warn(f"warning: {pattern}: the pattern matches no file; going on with the others")
    return list(found)


def _read(path: Path) -> "dict | UserError":
    try:
        return read_bundle(path)
    except UserError as err:
        return err


def _read_all(paths: list[Path]) -> list:
    # Reading is JSON parsing, hashing and validation, all holding the GIL: many bundles are read
    # by one forked process per core (a forked worker starts in milliseconds on Linux).
    workers = min(os.cpu_count() or 1, 8)
    if len(paths) < PARALLEL_FROM or workers < 2 or sys.platform != "linux":
        return [_read(path) for path in paths]
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        return list(pool.map(_read, paths, chunksize=max(1, len(paths) // (4 * workers))))


def load(paths: list[Path], strict: bool, warn: Callable[[str], None]) -> tuple[list[Loaded], list[str]]:
    """Read and check every bundle; skip (warn) or stop (strict) at a bad one; drop duplicates.

    Returns the bundles and, for the report to list, what was wrong with each file skipped. When
    no file is a bundle the one error line names the (first) problem: there is no report to warn in.
    """
    results = _read_all(paths)
    problems = [result for result in results if isinstance(result, UserError)]
    if problems and strict:
        raise UserError(f"{problems[0]} (--strict: the report stops at the first bad bundle)")
    if len(problems) == len(paths):
        if len(paths) == 1:
            raise problems[0]
        raise UserError(f"none of the {len(paths)} files is a valid bundle; the first: {problems[0]}")
    loaded, first_seen = [], {}
    for path, result in zip(paths, results):
        if isinstance(result, UserError):
            warn(f"warning: skipped: {result}")
            continue
        digest = result["sha256"]
        if digest in first_seen:
            warn(f"note: {path} is the same bundle as {first_seen[digest]} (sha256 {digest[:12]}); counted once")
            continue
        first_seen[digest] = path
        loaded.append(Loaded(path, result))
    return loaded, [str(problem) for problem in problems]


def write_without_failing(loaded: list[Loaded], out_dir: Path, write: Callable[[list[dict], list[str], Path], Path],
                          skipped: list[str], strict: bool, warn: Callable[[str], None]) -> tuple[Path, int]:
    """write(bundles, skipped, out_dir) the report; (its path, how many bundles it holds). Where
    writing fails on a bug of ours, the bundles it fails on are found by halving (each trial a
    report in a scratch folder: a few for one bad bundle among hundreds), named and skipped; a
    failure that no single bundle causes is raised as it is."""
    try:
        return write([item.bundle for item in loaded], skipped, out_dir), len(loaded)
    except (UserError, OSError):
        raise
    except Exception as err:
        culprits = _culprits(loaded, write, err)
        if not culprits:
            raise
    path, err = culprits[0]
    if strict:
        raise UserError(f"{path}: the report fails on this bundle ({err!r:.300}), a bug of ddpbench: please report it "
                        "(--strict: the report stops at the first bad bundle)")
    if len(culprits) == len(loaded):
        raise UserError(f"the report fails on every bundle, a bug of ddpbench: please report it; the first: {path} ({err!r:.300})")
    for path, err in culprits:
        warn(f"warning: skipped: {path}: the report fails on this bundle ({err!r:.300}), a bug of ddpbench: please report it")
    failed = {path for path, _ in culprits}
    kept = [item.bundle for item in loaded if item.path not in failed]
    noted = skipped + [f"{path}: valid, but the report fails on it ({err!r:.300}), a bug of ddpbench" for path, err in culprits]
    return write(kept, noted, out_dir), len(kept)


def _culprits(items: list[Loaded], write, error: "Exception | None" = None) -> "list[tuple[Path, Exception]]":
    """The bundles on which writing a report fails alone, each with its error, found by halving the
    ones it fails on together. error: what writing all of `items` gave already (no trial then)."""
    if error is None:
        error = _trial(items, write)
        if error is None:
            return []
    if len(items) == 1:
        return [(items[0].path, error)]
    half = len(items) // 2
    return _culprits(items[:half], write) + _culprits(items[half:], write)


def _trial(items: list[Loaded], write) -> "Exception | None":
    with tempfile.TemporaryDirectory(prefix="ddpbench-report-trial-") as scratch:
        try:
            write([item.bundle for item in items], [], Path(scratch) / "report")
        except (UserError, OSError):
            raise
        except Exception as err:
            return err
    return None
