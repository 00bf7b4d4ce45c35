"""Text from input reaches a terminal, Markdown, HTML or a plot only through its format's one escaping
function (bench/common/escape.py). Read from the source: every print (and what stands in for one)
prints through `terminal`, no module but the renderers writes Markdown or HTML markup, and no
module but escape.py escapes; then the renderers themselves, fed every construct a stranger's text
could open, show each as text."""

from __future__ import annotations

import ast
import re

import pytest

from bench.common import escape
from bench.report import html, markdown
from bench.report.document import Bullets, Heading, Paragraph, Plot, Table
from tests.conftest import REPO

BENCH = REPO / "bench"
# The agent's stdout is the protocol (one JSON object a line, json.dumps escapes every control
# character), read by the controller, which prints it through `terminal`. venv_pth.py prints a line
# of Python (its paths repr()'d) into a .pth file.
NOT_A_TERMINAL = ("bench/agent/", "bench/venv_pth.py")
RENDERERS = {"markdown": "bench/report/markdown.py", "html": "bench/report/html.py"}
ESCAPE = "bench/common/escape.py"


def sources(skip: tuple = ()) -> list[tuple[str, ast.Module]]:
    found = []
    for path in sorted(BENCH.rglob("*.py")):
        name = path.relative_to(REPO).as_posix()
        if not name.startswith(skip) and name not in skip:
            found.append((name, ast.parse(path.read_text())))
    return found


def _is_call_to(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Call) and (
        (isinstance(node.func, ast.Name) and node.func.id == name) or (isinstance(node.func, ast.Attribute) and node.func.attr == name))


def _where(name: str, node: ast.AST) -> str:
    return f"{name}:{node.lineno}"


def test_every_print_goes_through_terminal():
    """print(), a rich console's print(), input()'s prompt: the first argument is terminal(...); print
    is never handed on as a value (a callback that would print unescaped); nothing writes to
    sys.stdout or sys.stderr past print."""
    bypass = []
    for name, tree in sources(NOT_A_TERMINAL):
        for node in ast.walk(tree):
            if _is_call_to(node, "print") or _is_call_to(node, "input"):
                if node.args and not _is_call_to(node.args[0], "terminal"):
                    bypass.append(f"{_where(name, node)}: {ast.unparse(node)[:100]}")
            elif isinstance(node, ast.Name) and node.id == "print" and isinstance(node.ctx, ast.Load):
                parent_calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and n.func is node]
                if not parent_calls:
                    bypass.append(f"{_where(name, node)}: print handed on as a value")
            elif isinstance(node, ast.Attribute) and node.attr == "write" and isinstance(node.value, ast.Attribute) \
                    and node.value.attr in ("stdout", "stderr"):
                bypass.append(f"{_where(name, node)}: {ast.unparse(node)}")
    assert not bypass, "printed without bench.common.escape.terminal:\n" + "\n".join(bypass)


MARKUP = {
    "a Markdown table row": re.compile(r"^\| .* \|$|\|-{3}", re.M),
    "a Markdown link or image": re.compile(r"\]\("),
    "an HTML tag": re.compile(r"</?(a|b|br|code|details|div|em|figure|h[1-6]|i|img|li|p|pre|script|span|strong|style|summary|table|td|th|tr|ul)\b", re.I),
}


def _strings(tree: ast.Module):
    """Every string constant and every f-string's literal parts, with their node."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node, node.value


def test_only_the_renderers_write_markdown_and_html_markup():
    """A report's or verdict's text is blocks (bench/report/document.py); only markdown.py and html.py
    turn them into markup, escaping each text: a table row, a link or a tag written anywhere else
    would carry its text unescaped. Docstrings are prose and do not count."""
    found = []
    for name, tree in sources((*RENDERERS.values(), ESCAPE)):
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
                      and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
        for node, text in _strings(tree):
            if id(node) in docstrings:
                continue
            for what, pattern in MARKUP.items():
                if pattern.search(text):
                    found.append(f"{_where(name, node)}: {what}: {text[:80]!r}")
    assert not found, "markup written outside the renderers:\n" + "\n".join(found)


def test_only_escape_py_escapes():
    """One escaping function per format: no other module escapes HTML, unicode-escapes hidden
    characters or defines an escaping of its own."""
    found = []
    for name, tree in sources((ESCAPE,)):
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                modules = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                if any(module in ("html", "xml.sax.saxutils", "markupsafe") for module in modules):
                    found.append(f"{_where(name, node)}: imports {modules}")
            elif _is_call_to(node, "encode") and node.args and isinstance(node.args[0], ast.Constant) \
                    and node.args[0].value == "unicode_escape":
                found.append(f"{_where(name, node)}: escapes hidden characters itself")
    assert not found, "escaping outside bench/common/escape.py:\n" + "\n".join(found)


def test_the_renderers_use_the_escaping_functions():
    """Each renderer imports its format's function from escape.py (and nothing escapes in its stead)."""
    for function, path in RENDERERS.items():
        tree = ast.parse((REPO / path).read_text())
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                    and node.module == "bench.common.escape" for alias in node.names}
        assert function in imported, path


HOSTILE = ["[x](javascript:alert(1))", "![p](https://evil.example/t.png)", "[r]\n\n[r]: javascript:alert(1)",
           "<img src=x onerror=alert(1)>", "&#x202e;gpj.exe", "https://evil.example www.evil.example",
           "a\\](javascript:x)", "x\n# heading\n> quote\n- item\n1. item\n---\n```", "| a | b |", "a | b\n--- | ---\nc | d",
           "\x1b]0;title\x07\x1b[2J\x1b[31mred\r\u202eabc", "$x$ and $y$"]


def _unescaped(text: str, pattern: str) -> bool:
    """Whether the pattern matches where no backslash escapes its first character (an even run of them before it)."""
    def backslashes(before: str) -> int:
        return len(before) - len(before.rstrip("\\"))

    return any(backslashes(text[:found.start()]) % 2 == 0 for found in re.finditer(pattern, text))


INLINE = {"tag": r"<(?!br>)[a-zA-Z/!]", "entity": r"&#"}
UNLESS_ESCAPED = {"link": r"\]\(", "reference": r"\]\[", "definition": r"\]:", "table": r"\|"}
BLOCK_START = r"(?m)^ {0,3}(#{1,6}( |$)|>|[-+*]( |$)|\d{1,9}[.)]( |$)|```|~~~|([-_*] *){3,}$|=+ *$)"


def _live_markdown(text: str, inline: bool = False) -> list:
    """What a Markdown reader would make live of the text: links, images, definitions, a table's cells,
    tags (an autolink's too), entities, and (but in a table cell) a block's start; a bare address is
    shown as itself."""
    found = [what for what, pattern in UNLESS_ESCAPED.items() if _unescaped(text, pattern)]
    found += [what for what, pattern in INLINE.items() if re.search(pattern, text)]
    return found + (["block start"] if not inline and re.search(BLOCK_START, text) else [])


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_markdown_shows_every_construct_as_text(text):
    assert not _live_markdown(escape.markdown(text)), (text, escape.markdown(text))
    assert not _live_markdown(escape.markdown(text, cell=True), inline=True), (text, escape.markdown(text, cell=True))
    for shown in (escape.markdown(text), escape.markdown(text, cell=True)):
        assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e]", shown)
    assert "\n" not in escape.markdown(text, cell=True)


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_a_report_of_hostile_text_in_every_block_shows_it_as_text(text, tmp_path):
    """Each block's every text field through both renderers: no live construct, no control character."""
    blocks = [Heading(2, text), Paragraph(text), Paragraph(text, warning=True), Paragraph(text, strong=True), Bullets([text, text]),
              Table([text, "b"], [[text, text], ["-", text]]), Plot(text, text, tmp_path / "p.png", tmp_path / "p.svg")]
    (tmp_path / "p.svg").write_text("<svg/>")
    md = markdown.render(blocks)
    for line in md.splitlines():
        if line.startswith("|"):  # a table row: its cells, between the | that are not escaped
            for cell in re.split(r"(?<!\\)\|", line)[1:-1]:
                assert not _live_markdown(cell, inline=True), (line, cell)
            continue
        body = re.sub(r"^(#+ |> |- )", "", line)  # the renderer's own block marks
        body = body.replace("](p.png)", "").replace("[SVG](p.svg)", "").replace("[JSON](p.json)", "")  # and its own links
        assert not _live_markdown(body), (line, _live_markdown(body))
    page = html.render(blocks, text)
    assert "<img src=x" not in page and "<script" not in page and "\x1b" not in page and "\u202e" not in page


def test_terminal_and_plot_text_hold_no_escape_sequence():
    for text in HOSTILE:
        for shown in (escape.terminal(text), escape.plot(text)):
            assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e]", shown), shown
    assert escape.terminal("\x1b[2J") == "\\x1b[2J" and escape.terminal("a\nb\tc") == "a\nb\tc"
    assert escape.plot("$x$") == r"\$x\$"
