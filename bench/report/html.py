"""report.html: one self-contained file (styles inline, plots as base64 SVG); it fetches nothing to open."""

from __future__ import annotations

import base64

from bench.common.escape import html as escape
from bench.report.document import Bullets, Heading, Paragraph, Plot, Table

STYLE = """
body { font-family: system-ui, sans-serif; max-width: 1300px; margin: 2em auto; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.85em; display: block; overflow-x: auto; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
tr:nth-child(even) td { background: #fafafa; }
figure { margin: 1.5em 0; }
figure img { width: 800px; max-width: 100%; height: auto; }
figcaption { font-size: 0.9em; color: #555; max-width: 800px; }
details { margin: 0.5em 0 1em; }
summary { cursor: pointer; color: #1f4e8c; }
.warning { border-left: 4px solid #d62728; background: #fff3f3; padding: 0.5em 1em; font-weight: bold; }
"""


def _lines(text: str) -> str:
    return escape(text).replace("\n", "<br>")


def _plot(block: Plot) -> str:
    data = base64.b64encode(block.svg.read_bytes()).decode("ascii")
    return (f'<figure><img alt="{escape(block.title)}" src="data:image/svg+xml;base64,{data}">'
            f"<figcaption>{escape(block.caption)}</figcaption></figure>")


FOLD_ABOVE = 12  # rows: a longer table would push the next figure a screen or more down the page


def _rows(table: Table, rows: list) -> str:
    head = "".join(f"<th>{_lines(h)}</th>" for h in table.header)
    cells = "".join("<tr>" + "".join(f"<td>{_lines(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{cells}</tbody></table>"


def _table(table: Table) -> str:
    """A table; a long one folded (details) under the figure it follows, the rows the answer reads shown above the fold."""
    if len(table.rows) <= FOLD_ABOVE:
        return _rows(table, table.rows)
    lead = [row for i, row in enumerate(table.rows) if i in table.lead]
    rest = [row for i, row in enumerate(table.rows) if i not in table.lead]
    summary = f"the other {len(rest)} rows" if lead else f"the table: {len(rest)} rows"
    return ((_rows(table, lead) if lead else "")
            + f"<details><summary>Show {summary}</summary>{_rows(table, rest)}</details>")


def render(blocks: list, title: str) -> str:
    body = []
    for block in blocks:
        if isinstance(block, Heading):
            body.append(f"<h{block.level}>{escape(block.text)}</h{block.level}>")
        elif isinstance(block, Paragraph):
            text = f"<strong>{_lines(block.text)}</strong>" if block.strong else _lines(block.text)
            body.append(f'<p class="warning">{text}</p>' if block.warning else f"<p>{text}</p>")
        elif isinstance(block, Bullets):
            body.append("<ul>" + "".join(f"<li>{_lines(item)}</li>" for item in block.items) + "</ul>")
        elif isinstance(block, Table):
            body.append(_table(block))
        elif isinstance(block, Plot):
            body.append(_plot(block))
        else:
            raise TypeError(f"not a report block: {block!r}")
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f"<style>{STYLE}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")
