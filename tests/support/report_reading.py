"""A report read back as a reader has it: its Markdown tables, by section, and what each figure drew
(NAME.json beside NAME.png and NAME.svg), with a table cell's "median [p5, p95] unit n=N" as numbers.
The tests that set a figure against its table use these."""

from __future__ import annotations

import json
import re
from pathlib import Path

TIME_UNITS = {"s": 1.0, "ms": 1e-3, "µs": 1e-6, "ns": 1e-9}
SPREAD = re.compile(r"^(-?[\d.]+)%? \[(-?[\d.]+|-), (-?[\d.]+|-)\](?: (s|ms|µs|ns))?")


def section(md: str, heading: str) -> str:
    """The text of the section that starts at this heading (any level), up to the next heading of its level or above."""
    lines = md.splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip("#").strip() == heading and line.startswith("#"))
    level = len(lines[start]) - len(lines[start].lstrip("#"))
    end = next((i for i in range(start + 1, len(lines))
                if lines[i].startswith("#") and len(lines[i]) - len(lines[i].lstrip("#")) <= level), len(lines))
    return "\n".join(lines[start:end])


def tables(text: str) -> list[list[dict]]:
    """Every Markdown table in text, each a list of rows keyed by the table's header."""
    found, block = [], []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            block.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
            continue
        if len(block) > 2:
            header = block[0]
            found.append([dict(zip(header, row)) for row in block[2:]])
        block = []
    return found


def table_with(text: str, column: str) -> list[dict]:
    """The one table of text that has this column."""
    (found,) = [table for table in tables(text) if table and column in table[0]]
    return found


def spread(cell: str, seconds: bool = False) -> tuple:
    """(median, low, high) of "20.2 [17.0, 29.3] ms n=12" or "93.8% [93.1, 94.4]"; a time in seconds
    where asked (the cell's unit applied); an end printed "-" is None."""
    found = SPREAD.match(cell)
    assert found, f"not a figure with its spread: {cell!r}"
    scale = TIME_UNITS[found.group(4)] if seconds else 1.0
    return tuple(None if value == "-" else float(value) * scale for value in found.group(1, 2, 3))


def figures(folder: Path) -> dict:
    """stem -> what that figure drew (bench.report.plots.figure_data), for every figure of a report folder."""
    return {path.stem: json.loads(path.read_text()) for path in sorted(folder.glob("*.json"))}


def axis_unit(label: str) -> float:
    """The seconds in one unit of an axis labelled "... (ms)"."""
    return TIME_UNITS[re.search(r"\((s|ms|µs|ns)\)$", label).group(1)]


def close(a: "float | None", b: "float | None", digits: int = 4) -> bool:
    """Whether a drawn value and a printed one agree to the digits the table prints (significant figures)."""
    if a is None or b is None:
        return a is b
    return abs(a - b) <= 0.51 * 10 ** -(digits - 1) * max(abs(a), abs(b)) + 1e-12
