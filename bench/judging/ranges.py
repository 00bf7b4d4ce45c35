"""The expected ranges ("is my number normal?") as data: each suite's folder brings its own, in
`expected.json` (schema/expected.schema.json): a row per range, each with the figure it holds
(Suite.figures' name), the GPU model and link it was measured or stated on, its low and high, the
key it holds for, and its sources: a public figure by name (the link table's sources,
bench/common/reference.py SOURCES, or the file's own), or one of this project's bundles with its id,
date and machine (benchmarks/expected_ranges.py writes those rows).

A row holds a figure only where its key is the figure's: the same ranks, nodes, NCCL algorithm,
protocol and env (a key leaves out what is plain: one node, NCCL's own choices, no env), the same
path between the GPUs (transport), a dtype and params the figure has, and a size within its bounds;
and where the row names an NCCL minor version (nccl), the figure's NCCL is of that minor: NCCL's
choice of algorithm moves between versions (its cost model), so a range of one judges no other."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from bench import suites
from bench.common.reference import SOURCES
from bench.errors import UserError
from bench.inputfile import read_data_file

FILE = "expected.json"
# A published figure, or the spread of a few, stands for the figures within BAND of it either way:
# two correct measurements of one GPU and link differ by that much (the copy suite against nvbandwidth
# on one H200: 0.99-1.04 from 64 MiB up; the collectives suite against nccl-tests on 2x H200:
# 0.975-1.065 over P2P and SHM), and verify's default tolerance is the same 5%.
BAND = 0.05
# A key's fields, and the value a row that leaves one out holds for: one node, NCCL's own algorithm
# and protocol, no env, no path between GPUs (one rank, or copies between host and device), no dtype.
PLAIN = {"nodes": 1, "algorithm": None, "protocol": None, "env": {}, "transport": None, "dtype": None}


@dataclass(frozen=True)
class Ranges:
    rows: tuple  # every suite's rows, each with its suite's name under "suite"
    sources: dict  # name -> source: the link table's and every suite's own


@functools.lru_cache(maxsize=None)
def expected() -> Ranges:
    """Every suite's expected ranges (a suite without an expected.json has none)."""
    rows, sources = [], dict(SOURCES)
    for name, suite in suites.registry().items():
        path = suite.folder / FILE
        if not path.is_file():
            continue
        document = read(path)
        for source, said in document.get("sources", {}).items():
            if sources.setdefault(source, said) != said:
                raise UserError(f"{path}: source {source!r} says otherwise than the one of that name elsewhere; "
                                "give it a name of its own")
        rows += [{**row, "suite": name} for row in document["ranges"]]
    for row in rows:
        missing = [source for source in row["sources"] if source not in sources]
        if missing:
            raise UserError(f"{row['suite']}'s {FILE}: a range of {row['figure']} cites {', '.join(missing)}, which no "
                            "source of its file or of the link table names; add the source to its file's sources")
    return Ranges(tuple(rows), sources)


def read(path) -> dict:
    """A suite's expected.json, checked against schema/expected.schema.json."""
    return read_data_file(path, "suite's expected ranges", ("expected", "reference"), "fix the file")


def differs(row_key: dict, key: dict) -> list[str]:
    """The fields of a figure's key a row's key holds otherwise (its size aside); a row without an NCCL
    version holds any (a public figure seldom says it)."""
    found = [name for name in ("ranks", *PLAIN) if not _agrees(row_key.get(name, PLAIN.get(name)), key.get(name, PLAIN.get(name)))]
    if "nccl" in row_key and not _agrees(row_key["nccl"], key.get("nccl")):
        found.append("nccl")
    params = key.get("params") or {}
    return found + [f"params.{name}" for name, want in (row_key.get("params") or {}).items() if params.get(name) != want]


def _agrees(want, have) -> bool:
    """A row's value (or its list of values) against a figure's."""
    return have in want if isinstance(want, list) else have == want


def size_fits(row_key: dict, size: "int | None") -> bool:
    """A size within the row's bounds; a figure without a size only in a row without bounds."""
    if size is None:
        return "size_bytes_min" not in row_key and "size_bytes_max" not in row_key
    return row_key.get("size_bytes_min", 0) <= size <= row_key.get("size_bytes_max", size)


def source_line(name: str) -> str:
    """'nvbandwidth-15: NVIDIA/nvbandwidth issue #15 ... (https://...)', with a bundle's id, date and machine."""
    source = expected().sources[name]
    measured = f"bundle {source['bundle']} of {source['date']} on {source['machine']}; " if "bundle" in source else ""
    return f"{name}: {source['title']} ({measured}{source.get('url') or source['path']})"
