"""Text from input (a bundle, a plan, a hosts file, an agent's output) as each place it lands shows
it: one function per format, and every writer of that format goes through it (tests/e2e/
test_escaping.py finds the writes that do not).

Everywhere, a character that would act instead of show is replaced by its escape (\\x1b, \\u202e):
a control character (ESC starts a terminal's colours, window title or screen clear, BEL rings, CR
writes over the line, NUL makes an SVG no XML), a bidirectional override (it turns the text after
it around), an invisible mark or a line separator. Newlines and tabs stay: the formats lay them out.
Then each format escapes what is markup in it: Markdown's links, HTML and block starts, HTML's
tags, matplotlib's math. Standard library only: the controller's every layer prints through it.
"""

from __future__ import annotations

import html as _html
import re

HIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ufff9-\ufffb\ufffe\uffff]")

# Markdown (CommonMark and GitHub's): a backslash before punctuation escapes it, so it is doubled;
# `&` would start an entity (&#x202e; is U+202E again), `<` a tag or an autolink, `*` emphasis, `|`
# a table's cell; a `]` before `(`, `[` or `:` closes a link, an image or a link's definition. A bare
# http(s) address stays as written (GitHub links it, showing where it goes; the report cites its sources so).
_MD_BACKSLASH = re.compile(r"\\(?=[!-/:-@\[-`{-~])")
_MD_LINK_END = re.compile(r"\](?=[(\[:])")
# At a line's start: a heading, quote, table row, list item, rule, setext underline or code fence
# (a line that only looks alike, "-5%" or "1.83 ms", is left as written).
_MD_BLOCK_MARK = re.compile(r"^( {0,3})(?=#{1,6}(?:[ \t]|$)|>|[-+](?:[ \t]|$)|=+[ \t]*$|[-_](?:[ \t]*[-_]){2,}[ \t]*$|`{3}|~{3})",
                            re.MULTILINE)
_MD_ORDERED = re.compile(r"^( {0,3}\d{1,9})([.)])(?=[ \t]|$)", re.MULTILINE)


def _visible(text: str) -> str:
    return HIDDEN.sub(lambda found: found.group().encode("unicode_escape").decode("ascii"), text)


def terminal(text: str) -> str:
    """For a terminal (stdout, stderr, the progress bars): no escape sequence of the input's runs."""
    return _visible(str(text))


def markdown(text: str, *, cell: bool = False) -> str:
    """For report.md and verdict.md: shown as written, no link, HTML, entity, table or block of the
    input's opens. In a table cell (`cell`), a line break is the cell's <br>."""
    text = _MD_BACKSLASH.sub(r"\\\\", _visible(text))
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace("*", r"\*").replace("|", r"\|")
    text = _MD_LINK_END.sub(r"\\]", text)
    if cell:
        return text.replace("\n", "<br>")
    return _MD_ORDERED.sub(r"\1\\\2", _MD_BLOCK_MARK.sub(r"\1\\", text))


def html(text: str) -> str:
    """For report.html: text, never a tag or an attribute's end."""
    return _html.escape(_visible(text))


def plot(text: str) -> str:
    """For a plot's text (PNG and SVG, drawn by matplotlib, which writes the SVG's XML escapes): no
    control character (an SVG with one is no XML) and no $ that matplotlib would read as the start
    of math (a name with two of them failed the report)."""
    return _visible(text).replace("$", r"\$")


def xml(text) -> str:
    """For JUnit XML (ElementTree escapes its markup): no control character, which XML 1.0 cannot hold."""
    return _visible(str(text))


def prometheus(text) -> str:
    """For a label value of Prometheus' text format: no control character, and the backslash, double
    quote and newline the format escapes."""
    return _visible(str(text)).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
