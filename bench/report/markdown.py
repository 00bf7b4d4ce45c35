"""report.md: the blocks as GitHub-flavoured Markdown; plots embedded by their PNG beside the file.
Every text of a block is escaped (bench.common.escape.markdown): a block's text may quote a bundle."""

from __future__ import annotations

from bench.common.escape import markdown as escaped
from bench.report.document import Bullets, Heading, Paragraph, Plot, Table


def _row(cells: list) -> str:
    return "| " + " | ".join(escaped(cell, cell=True) for cell in cells) + " |"


def render(blocks: list) -> str:
    out = []
    for block in blocks:
        if isinstance(block, Heading):
            out.append(f"{'#' * block.level} {escaped(block.text)}")
        elif isinstance(block, Paragraph):
            first, *rest = escaped(block.text).split("\n")
            out.append("\n".join([f"> **{first}**" if first else ">", *(f"> {line}" for line in rest)]) if block.warning
                       else "  \n".join(f"**{line}**" if block.strong and line else line for line in [first, *rest]))
        elif isinstance(block, Bullets):
            out.append("\n".join(f"- {escaped(item)}" for item in block.items))
        elif isinstance(block, Table):
            out.append("\n".join([_row(block.header), "|" + "---|" * len(block.header), *map(_row, block.rows)]))
        elif isinstance(block, Plot):
            out.append(f"![{escaped(block.title)}]({block.png.name})\n\n*{escaped(block.caption)}* (Also as [SVG]({block.svg.name}); the values drawn: [JSON]({block.data.name}).)")
        else:
            raise TypeError(f"not a report block: {block!r}")
    return "\n\n".join(out) + "\n"
