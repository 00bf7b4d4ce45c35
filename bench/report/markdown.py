"""report.md: the blocks as GitHub-flavoured Markdown; plots embedded by their PNG beside the file."""

from __future__ import annotations

import re

from bench.report.document import Bullets, Heading, Paragraph, Plot, Table
from bench.report.visible import visible


def _inline(text: str) -> str:
    """A line that Markdown shows as written (file paths hold `_` and `*`)."""
    return re.sub(r"([\\`*_\[\]<>])", r"\\\1", visible(text))


def _text(text: str) -> str:
    """Text from a bundle (host names, labels, errors) shown as text: with no `<` left, no HTML
    tag of a stranger's can open (GitHub renders raw HTML in Markdown)."""
    return visible(text).replace("<", "&lt;")


def _cell(text: str) -> str:
    return _text(text).replace("|", "\\|").replace("\n", "<br>")


def render(blocks: list) -> str:
    out = []
    for block in blocks:
        if isinstance(block, Heading):
            out.append(f"{'#' * block.level} {_text(block.text)}")
        elif isinstance(block, Paragraph):
            first, *rest = block.text.split("\n")
            out.append("\n".join([f"> **{_text(first)}**", *(f"> {_inline(line)}" for line in rest)]) if block.warning
                       else "  \n".join(f"**{_text(line)}**" if block.strong else _text(line) for line in [first, *rest]))
        elif isinstance(block, Bullets):
            out.append("\n".join(f"- {_text(item)}" for item in block.items))
        elif isinstance(block, Table):
            out.append("\n".join(
                ["| " + " | ".join(_cell(h) for h in block.header) + " |", "|" + "---|" * len(block.header)]
                + ["| " + " | ".join(_cell(c) for c in row) + " |" for row in block.rows]
            ))
        elif isinstance(block, Plot):
            out.append(f"![{_text(block.title)}]({block.png.name})\n\n*{_text(block.caption)}* (Also as [SVG]({block.svg.name}); the values drawn: [JSON]({block.data.name}).)")
        else:
            raise TypeError(f"not a report block: {block!r}")
    return "\n\n".join(out) + "\n"
