"""Text from a bundle as a reader may see it: every character that would act instead of show
(control characters, bidirectional overrides, invisible marks, line separators) replaced by its
escape, e.g. \\x00 or \\u202e. report.md, report.html, the SVGs and the verdict all print through
this: an SVG with a NUL is no XML, U+202E turns the text after it around, and a stray CR ends a
Markdown table row.

Newlines and tabs stay: the renderers lay them out (a table cell's line break, a warning's lines).
"""

from __future__ import annotations

import re

HIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ufff9-\ufffb\ufffe\uffff]")


def visible(text: str) -> str:
    return HIDDEN.sub(lambda found: found.group().encode("unicode_escape").decode("ascii"), text)
