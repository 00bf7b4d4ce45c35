"""The layers written in ARCHITECTURE.md hold in the code: bench/'s import graph, read from the source,
has no circle, and no module imports a layer above its own."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.conftest import REPO

BENCH = REPO / "bench"


def layers() -> list[tuple[str, list[str]]]:
    """(layer, file patterns), from the top layer down, as ARCHITECTURE.md's layer table has them."""
    text = (REPO / "ARCHITECTURE.md").read_text()
    table = text[text.index("| layer | what it is | files |"):].split("\n\n")[0]
    rows = [line.strip("|").split(" | ") for line in table.splitlines()[2:]]
    return [(row[0].strip(), re.findall(r"`([^`]+)`", row[2])) for row in rows]


def _pattern(glob: str) -> re.Pattern:
    return re.compile("".join(".*" if part == "**" else "[^/]*" if part == "*" else re.escape(part)
                              for part in re.split(r"(\*\*|\*)", glob)) + "$")


def layer_of(path: str, table: list) -> "tuple[int, str] | None":
    """(index from the top, name) of the layer whose longest pattern matches the file."""
    found = [(len(glob), index, name) for index, (name, globs) in enumerate(table) for glob in globs if _pattern(glob).match(path)]
    if not found:
        return None
    _, index, name = max(found)
    return index, name


def module_file(module: str) -> "Path | None":
    base = REPO.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def imports(path: Path) -> set[Path]:
    """The bench files this file imports, wherever the import stands (a function, a TYPE_CHECKING block)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module
            if node.level:  # relative: counted from the file's package
                package = path.relative_to(REPO).with_suffix("").parts[:-1]
                module = ".".join([*package[:len(package) - node.level + 1], *filter(None, [node.module])])
            names = [f"{module}.{alias.name}" if module_file(f"{module}.{alias.name}") else module for alias in node.names]
        else:
            continue
        found |= {module_file(name) for name in names if name.split(".")[0] == "bench"} - {None}
    return found


def graph() -> dict:
    return {path: imports(path) for path in sorted(BENCH.rglob("*.py")) if "__pycache__" not in path.parts}


def rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def circles(edges: dict) -> list[list[Path]]:
    """Tarjan's strongly connected components of more than one file (or a file importing itself)."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in edges.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in edges.get(node, ()):
                found.append(component)

    for node in edges:
        if node not in index:
            visit(node)
    return found


def test_the_layer_table_is_read_and_covers_every_file():
    table = layers()
    assert [name for name, _ in table] == ["cli", "verify", "report", "docker", "controller", "bundle", "agent", "suites", "common"]
    unplaced = [rel(path) for path in graph() if layer_of(rel(path), table) is None]
    assert not unplaced, f"files no layer of ARCHITECTURE.md holds: {unplaced}"


def test_no_import_runs_up_the_layers():
    table = layers()
    against = []
    for path, targets in graph().items():
        (mine, name) = layer_of(rel(path), table)
        for target in targets:
            (theirs, their_name) = layer_of(rel(target), table)
            if theirs < mine:
                against.append(f"{rel(path)} ({name}) imports {rel(target)} ({their_name})")
    assert not against, "\n".join(against)


def test_no_circle_of_imports():
    found = circles(graph())
    assert not found, "\n".join(" -> ".join(rel(p) for p in component) for component in found)


def test_the_checks_find_what_they_look_for(tmp_path):
    """The graph reader sees a function's import, and the circle finder a circle of three."""
    source = tmp_path / "late.py"
    source.write_text("def f():\n    from bench.suites import base\n    import bench.common.stats\n")
    assert imports(source) == {BENCH / "suites" / "base.py", BENCH / "common" / "stats.py"}
    assert BENCH / "agent" / "fingerprint" / "health.py" in imports(BENCH / "agent" / "fingerprint" / "nvml.py")  # from . import health
    a, b, c = (Path(name) for name in "abc")
    assert circles({a: {b}, b: {c}, c: {a}}) and not circles({a: {b}, b: {c}, c: set()})
    table = layers()
    assert layer_of("bench/suites/ddp/report/plots.py", table)[1] == "report"
    assert layer_of("bench/suites/ddp/ranks.py", table)[1] == "agent"
    assert layer_of("bench/suites/ddp/suite.py", table)[1] == "suites"
