"""The layers written in ARCHITECTURE.md hold in the code: bench/'s import graph, read from the source,
has no circle, and no module imports a layer above its own. The suites on DDPBENCH_SUITES_PATH are
read as if their folders stood in bench/suites/, where the registry puts them: run with it set, these
checks judge a suite of your own."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from bench import suites
from tests.conftest import REPO

BENCH = REPO / "bench"


def outside_suites() -> dict:
    """name -> folder of each suite on the suite path outside this repository (DDPBENCH_SUITES_PATH's)."""
    return {name: suite.folder for name, suite in suites.registry().items() if not suite.folder.is_relative_to(BENCH)}


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
    parts = module.split(".")
    outside = outside_suites().get(parts[2]) if parts[:2] == ["bench", "suites"] and len(parts) > 2 else None
    base = outside.joinpath(*parts[3:]) if outside else REPO.joinpath(*parts)
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
                package = Path(rel(path)).with_suffix("").parts[:-1]
                module = ".".join([*package[:len(package) - node.level + 1], *filter(None, [node.module])])
            names = [f"{module}.{alias.name}" if module_file(f"{module}.{alias.name}") else module for alias in node.names]
        else:
            continue
        found |= {module_file(name) for name in names if name.split(".")[0] == "bench"} - {None}
    return found


def graph() -> dict:
    files = [*BENCH.rglob("*.py"), *(path for folder in outside_suites().values() for path in folder.rglob("*.py"))]
    return {path: imports(path) for path in sorted(files) if "__pycache__" not in path.parts}


def rel(path: Path) -> str:
    """The file's path in the repository; a suite's outside it, as if its folder stood in bench/suites/."""
    for name, folder in outside_suites().items():
        if path.is_relative_to(folder):
            return f"bench/suites/{name}/{path.relative_to(folder).as_posix()}"
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
    assert [name for name, _ in table] == ["cli", "verify", "report", "docker", "controller", "bundle", "agent", "judging", "suites", "common"]
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


# --- No suite named outside its folder ------------------------------------------------------------
#
# A suite's name N may stand only in bench/suites/N/ and in the registry (bench/suites/__init__.py);
# everything else asks a run's suite through its hooks (bench/suites/base.py). In every other file of
# bench/, N is named by:
# - an import of a module of bench.suites.N;
# - a string (docstrings aside: prose may speak of DDP or of collectives) that is N, holds the module
#   path bench.suites.N or bench/suites/N, names N as a suite in words ("the N suite", "N runs", "N's"),
#   or lists it with another suite's name ("N and M"); suite names are lower case, so "DDP" (the
#   technique) is no suite's name;
# - an identifier the code defines (a function, class, argument, keyword, assigned name or attribute)
#   that has N among its words, whatever their case, unless N is one of COMMON_WORDS: a suite named
#   after a common word, where an identifier with that word means the thing the suite measures.

REGISTRY = BENCH / "suites" / "__init__.py"
# copy: the standard library's module, a copy of a dict or a tensor; collectives: NCCL's collective calls.
COMMON_WORDS = ("copy", "collectives")


def _word(name: str) -> str:
    return rf"(?<![\w-]){re.escape(name)}(?![\w-])"


def _strings_naming(text: str, names: list[str], others: list[str]) -> set[str]:
    """Which of `others` a string names, as the rule above reads it (`names`: every suite's)."""
    found = {name for name in others if text == name or re.search(rf"bench[./]suites[./]{re.escape(name)}(?![\w-])", text)
             or re.search(rf"(?<![\w-]){re.escape(name)}(?:'s\b| suites?\b| runs?\b)", text)}
    listed = {name for name in names if re.search(_word(name), text)}
    return found | (listed & set(others) if len(listed) > 1 else set())


def _docstrings(tree: ast.AST) -> set[int]:
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body
            and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}


def _defined(node: ast.AST) -> "str | None":
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name
    if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Store):
        return node.id if isinstance(node, ast.Name) else node.attr
    if isinstance(node, ast.arg):
        return node.arg
    if isinstance(node, ast.keyword):
        return node.arg
    return None


def suite_names_in(path: Path, names: list[str], where: "str | None" = None) -> list[str]:
    """'line: how' for every place the file (in the repository at `where`, its own path unless said)
    names a suite outside that suite's folder (the rule above)."""
    rel_parts = tuple((where or rel(path)).split("/"))
    own = rel_parts[2] if rel_parts[:2] == ("bench", "suites") and len(rel_parts) > 3 else None
    others = [name for name in names if name != own]
    tree = ast.parse(path.read_text())
    docs, found = _docstrings(tree), []
    for target in imports(path):
        parts = tuple(rel(target).split("/"))
        if parts[:2] == ("bench", "suites") and len(parts) > 3 and parts[2] in others:
            found.append(f"imports {rel(target)}")
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            found += [f"{line}: string {node.value[:60]!r} names {name}" for name in sorted(_strings_naming(node.value, names, others))]
        defined = _defined(node)
        if defined:
            words = defined.lower().split("_")
            found += [f"{line}: {defined} names {name}" for name in others if name in words and name not in COMMON_WORDS]
    return found


def test_no_suite_is_named_outside_its_folder():
    names = suites.names()
    assert {"collectives", "copy", "ddp", "fsdp"} <= set(names)
    named = [f"{rel(path)}:{where}" for path in graph() if path != REGISTRY for where in suite_names_in(path, names)]
    assert not named, "\n".join(named)


def test_the_suite_name_rule_finds_what_it_looks_for(tmp_path):
    """Each form the rule reads is found, and prose, the technique's name and the copy module are not;
    in the suite's own folder, its name is free."""
    names = ["collectives", "copy", "ddp", "fsdp"]
    text = '''"""The ddp suite's docstring: prose."""
from bench.suites.ddp import predict
import copy
def pick(run, ddp_on_gpu):
    if run["suite"] == "fsdp":
        return copy.deepcopy(run)
    flops_of_ddp, nccl_collectives = 1, []  # the second means NCCL's collectives: a common word
    return f"no collectives runs, {run}" + "busbw for collectives, step time for ddp and fsdp" + "DDP's reducer" + "a peer copy"
'''
    source = tmp_path / "late.py"
    source.write_text(text)
    hits = suite_names_in(source, names, "bench/report/late.py")
    assert any("imports bench/suites/ddp" in hit for hit in hits)
    assert any("string 'fsdp' names fsdp" in hit for hit in hits)
    assert any("ddp_on_gpu names ddp" in hit for hit in hits) and any("flops_of_ddp names ddp" in hit for hit in hits)
    assert any("names collectives" in hit and "no collectives runs" in hit for hit in hits)
    assert sum("busbw for collectives" in hit for hit in hits) == 3  # the list names all three
    assert not any("docstring" in hit or "DDP's" in hit or "peer copy" in hit or "deepcopy" in hit or ": copy" in hit for hit in hits)
    assert len(hits) == 8, hits
    in_ddp = suite_names_in(source, names, "bench/suites/ddp/late.py")
    assert not any("names ddp" in hit for hit in in_ddp) and any("string 'fsdp' names fsdp" in hit for hit in in_ddp)
    assert sum("busbw for collectives" in hit for hit in in_ddp) == 2  # listed beside ddp, its own name


# --- A run is read through its view ---------------------------------------------------------------
# What reads a bundle's runs (the report, verify, every suite's hooks) reads them through
# bench/common/run.py's Run: a run record's field read off the dict by its key is a read past the view.

RUN_READERS = ("bench/report", "bench/verify", "bench/judging", "bench/suites", "bench/common", "bench/cli.py")
RUN_FIELDS = set(json.loads((REPO / "schema" / "bundle.schema.json").read_text())["$defs"]["run"]["properties"])
_RUN_NAMED = re.compile(r"(run|r|\w+_run|baseline|base)$")


def _names_a_run(node: ast.AST) -> bool:
    """run, r, one_gpu_run, baseline; entry.run, entry.baseline; runs[0]."""
    if isinstance(node, ast.Name):
        return bool(_RUN_NAMED.fullmatch(node.id))
    if isinstance(node, ast.Attribute):
        return node.attr in ("run", "baseline")
    return isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id.endswith("runs")


def _field(node: ast.AST) -> "str | None":
    return node.value if isinstance(node, ast.Constant) and node.value in RUN_FIELDS else None


def raw_run_reads(path: Path) -> list[str]:
    """Each `run["field"]` and `run.get("field")` of a run record's field in the file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Subscript) and _names_a_run(node.value) and _field(node.slice):
            found.append(f"{node.lineno}: [{_field(node.slice)!r}]")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and _names_a_run(node.func.value) and node.args and _field(node.args[0])):
            found.append(f"{node.lineno}: .get({_field(node.args[0])!r})")
    return found


def test_runs_are_read_through_their_view():
    view = BENCH / "common" / "run.py"
    files = [path for where in RUN_READERS for path in ([REPO / where] if where.endswith(".py") else (REPO / where).rglob("*.py"))]
    found = [f"{rel(path)}:{hit}" for path in files if path != view for hit in raw_run_reads(path)]
    assert not found, "\n".join(found)


def test_the_run_view_rule_finds_what_it_looks_for(tmp_path):
    source = tmp_path / "reader.py"
    source.write_text('def f(run, entry, runs, launch):\n'
                      '    return (run["world_size"], entry.run.get("derived"), runs[0]["status"], entry.baseline["params"],\n'
                      '            run.params["model"], launch["status"], run["model"], run.record.get("notes"))\n')
    assert raw_run_reads(source) == ["2: ['world_size']", "2: .get('derived')", "2: ['status']", "2: ['params']"]
