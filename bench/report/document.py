"""The report (and verify's verdict) as a list of blocks, rendered alike to Markdown (markdown.py)
and HTML (html.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Heading:
    level: int
    text: str


@dataclass(frozen=True)
class Paragraph:
    text: str
    warning: bool = False  # shown as a call-out: something the reader must not miss
    strong: bool = False  # in bold: the conclusion the reader looks for first


@dataclass(frozen=True)
class Bullets:
    items: list  # of str, one item each


@dataclass(frozen=True)
class Table:
    header: list
    rows: list  # of lists of str, one per header column
    lead: tuple = ()  # the indices of the rows the answer reads: a long table in HTML shows them and folds the rest


@dataclass(frozen=True)
class Plot:
    title: str
    caption: str
    png: Path
    svg: Path

    @property
    def data(self) -> Path:
        """The values the plot drew (bench.report.plots.drawn), beside its PNG and SVG."""
        return self.png.with_suffix(".json")
