"""The user's pages cannot rot silently: in README.md, SECURITY.md, ARCHITECTURE.md, docs/*.md and every
suite's README.md, each relative link reaches a file (and its heading, where it names one), each path
written as code names a file of the repository, and each command of a shell block names what exists:
`make` targets of the Makefile, `ddpbench` / `python -m bench` subcommands and their options, plans
given by name. Each suite has a README that names every parameter of its params.schema.json (the
harness's it refers to included). docs/writing-a-suite.md's hook table names every hook of
bench/suites/base.py's Suite, each marked required or optional as the class makes it."""

from __future__ import annotations

import argparse
import glob
import inspect
import json
import re
import shlex
import shutil
from pathlib import Path

from bench import suites
from bench.cli import parser
from bench.suites.base import Suite
from bench.suites.params import resolved
from tests.conftest import REPO

SHELL_FENCES = {"sh", "bash", "shell", "console"}
# Paths a reader makes or names for themselves (the venv `make` builds, a run's results), never the repository's.
MADE_HERE = {".venv", "results", "report", "dist", "build", ".cache", ".git"}
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```", re.M | re.S)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*(\.[a-z.]+)?$|\.\.\.|<")


def doc_files(root: Path) -> list[Path]:
    found = [root / name for name in ("README.md", "SECURITY.md", "ARCHITECTURE.md")]
    found += sorted((root / "docs").glob("*.md")) + sorted((root / "bench" / "suites").glob("*/README.md"))
    return [path for path in found if path.is_file()]


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set:
    text = FENCE.sub("", path.read_text())
    return {slug(line.lstrip("#")) for line in text.splitlines() if re.match(r"#{1,6} ", line)}


def link_problems(doc: Path, root: Path) -> list[str]:
    problems = []
    prose = CODE_SPAN.sub("", FENCE.sub("", doc.read_text()))
    for target in LINK.findall(prose):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        linked = (doc.parent / file_part).resolve() if file_part else doc
        if not linked.exists():
            problems.append(f"{doc.relative_to(root)}: link to {target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            problems.append(f"{doc.relative_to(root)}: link to {target}: {linked.name} has no heading #{anchor}")
    return problems


def repo_roots(root: Path) -> set:
    return {path.name for path in root.iterdir() if path.name not in MADE_HERE}


def ignored(root: Path) -> set:
    """The paths .gitignore anchors at the top (/hosts/loopback.yaml): made by a command, not shipped."""
    listed = (root / ".gitignore").read_text().splitlines() if (root / ".gitignore").is_file() else []
    return {line.strip("/") for line in listed if line.startswith("/")}


def path_problem(word: str, root: Path, roots: set) -> "str | None":
    """A word that reads as a path inside the repository (its first part is one of the repository's
    top-level entries) names a file or folder that is there; placeholders (RUN_ID, NAME) are passed by."""
    word = word.strip("'\"(),;:")
    if "/" not in word or word.startswith(("/", "~", "$", "http")):
        return None
    parts = [part for part in word.split("/") if part]
    if not parts or parts[0] not in roots or any(PLACEHOLDER.search(part) for part in parts):
        return None
    if word.rstrip("/") in ignored(root) or glob.glob(str(root / word.rstrip("/"))):
        return None
    return f"names {word}, which is not in the repository"


def make_targets(root: Path) -> set:
    text = (root / "Makefile").read_text()
    return set(re.findall(r"^([A-Za-z0-9_.-]+):(?!=)", text, re.M))


def cli_commands() -> dict:
    """subcommand -> (its option strings, its own subcommands -> their option strings)."""
    def options(sub: argparse.ArgumentParser) -> set:
        return set(sub._option_string_actions)

    def children(parent: argparse.ArgumentParser) -> dict:
        for action in parent._actions:
            if isinstance(action, argparse._SubParsersAction):
                return dict(action.choices)
        return {}

    return {name: (options(sub), {child: options(p) for child, p in children(sub).items()})
            for name, sub in children(parser()).items()}


def shell_lines(doc: Path) -> list[str]:
    """The lines of its shell blocks, and the code spans of its prose that are a command (`make check`)."""
    text = doc.read_text()
    lines = []
    for language, body in FENCE.findall(text):
        if language.strip() in SHELL_FENCES:
            lines += [line for line in body.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    spans = CODE_SPAN.findall(FENCE.sub("", text))
    return lines + [span for span in spans if re.match(r"(make|ddpbench|\.venv/bin/\S+) ", span)]


def commands_of(line: str) -> list[list[str]]:
    """The words of each command of a line, split at `;`, `&&` and `|`."""
    try:
        words = shlex.split(line, comments=True)
    except ValueError:
        words = line.split()
    commands, current = [], []
    for word in words:
        ends = word.endswith(";")
        word = word.rstrip(";")
        if word in ("&&", "||", "|"):
            ends, word = True, ""
        if word:
            current.append(word)
        if ends:
            commands.append(current)
            current = []
    return [command for command in commands + [current] if command]


def command_problems(doc: Path, root: Path, commands: dict) -> list[str]:
    where = doc.relative_to(root)
    targets, plans, roots = make_targets(root), {p.stem for p in (root / "bench" / "plans").glob("*.yaml")}, repo_roots(root)
    problems = []

    def plan(name: str, line: str) -> None:
        if "/" not in name and not name.endswith((".yaml", ".yml")) and not PLACEHOLDER.search(name) and name not in plans:
            problems.append(f"{where}: `{line}`: no plan {name} in bench/plans/")

    for line in shell_lines(doc):
        for words in commands_of(line):
            for i, word in enumerate(words):
                value = word.partition("=")[2] if re.match(r"^[A-Z_]+=", word) else word
                for part in value.split():
                    found = path_problem(part, root, roots)
                    if found:
                        problems.append(f"{where}: `{line}`: {found}")
                if word.startswith("PLAN="):
                    plan(value, line)
                if word == "--plan" and i + 1 < len(words):
                    plan(words[i + 1], line)
            if words[0] == "make":
                for target in (w for w in words[1:] if not w.startswith("-") and "=" not in w):
                    if target not in targets:
                        problems.append(f"{where}: `{line}`: the Makefile has no target {target}")
            problems += cli_problems(f"{where}: `{line}`", words, commands)
    return problems


def cli_problems(where: str, words: list[str], commands: dict) -> list[str]:
    """A `ddpbench` or `python -m bench` command names a subcommand and options that exist."""
    tool = next((i + 1 for i, w in enumerate(words) if w == "ddpbench" or w.endswith("/ddpbench")), None)
    if tool is None:
        tool = next((i + 2 for i, w in enumerate(words[:-1]) if w == "-m" and words[i + 1] == "bench"), None)
    if tool is None or tool >= len(words):
        return []
    name = words[tool]
    if name not in commands:
        return [f"{where}: ddpbench has no subcommand {name}"]
    known, children = commands[name]
    rest, problems = words[tool + 1:], []
    if children and rest and rest[0] in children:
        known = known | children[rest[0]]
    elif children and rest and not rest[0].startswith("-"):
        problems.append(f"{where}: ddpbench {name} has no subcommand {rest[0]}")
    for option in (w.partition("=")[0] for w in rest if w.startswith("--")):
        if option not in known:
            problems.append(f"{where}: ddpbench {name} has no option {option}")
    return problems


def code_path_problems(doc: Path, root: Path) -> list[str]:
    """Paths written as code in the prose (`bench/common/stats.py`) are the repository's."""
    roots = repo_roots(root)
    prose = FENCE.sub("", doc.read_text())
    return [f"{doc.relative_to(root)}: `{span}` {found}" for span in CODE_SPAN.findall(prose)
            if " " not in span and (found := path_problem(span, root, roots))]


def problems_of(root: Path) -> list[str]:
    commands = cli_commands()
    found = []
    for doc in doc_files(root):
        found += link_problems(doc, root) + command_problems(doc, root, commands) + code_path_problems(doc, root)
    return found


def test_every_link_path_and_command_of_the_docs_names_what_exists():
    docs = doc_files(REPO)
    assert len(docs) >= 10, docs
    problems = problems_of(REPO)
    assert problems == [], "\n".join(problems)


def test_the_check_finds_a_broken_link_a_missing_file_and_a_command_that_does_not_exist(tmp_path):
    for name in ("README.md", "Makefile"):
        shutil.copy(REPO / name, tmp_path / name)
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    shutil.copytree(REPO / "bench" / "plans", tmp_path / "bench" / "plans")
    (tmp_path / "hosts").mkdir()
    broken = tmp_path / "docs" / "broken.md"
    broken.write_text(
        "# Broken\n\n[gone](gone.md), [no heading](running.md#no-such-heading), [fine](running.md#stopping-and-resuming)\n"
        "and `bench/plans/gone.yaml` as code.\n\n"
        "```sh\nmake benchmark\n.venv/bin/ddpbench runn --plan quick\n.venv/bin/python -m bench run --plan quik\n"
        "make bench PLAN=nosuch HOSTS=hosts/nosuch.yaml\n.venv/bin/ddpbench report x.json --no-such-option\n"
        ".venv/bin/ddpbench image bild\n.venv/bin/ddpbench run --plan quick --hosts hosts/local.yaml  # only hosts/local.yaml is missing\n```\n")
    found = "\n".join(p for p in problems_of(tmp_path) if p.startswith("docs/broken.md"))
    for expected in ("link to gone.md: no such file", "running.md has no heading #no-such-heading",
                     "`bench/plans/gone.yaml` names bench/plans/gone.yaml", "the Makefile has no target benchmark",
                     "ddpbench has no subcommand runn", "no plan quik", "no plan nosuch", "names hosts/nosuch.yaml",
                     "ddpbench report has no option --no-such-option", "ddpbench image has no subcommand bild",
                     "names hosts/local.yaml"):
        assert expected in found, f"{expected!r} not found in:\n{found}"
    assert "stopping-and-resuming" not in found


def parameters_of(schema: Path) -> list:
    """The parameters a params.schema.json gives: its own and the harness's it refers to."""
    return list(resolved(json.loads(schema.read_text())["$defs"]["params"], str(schema)).get("properties", {}))


def test_every_suite_has_a_readme_that_names_each_of_its_parameters():
    for name, suite in suites.registry().items():
        readme = suite.folder / "README.md"
        assert readme.is_file(), f"suite {name} has no README.md"
        text = readme.read_text()
        missing = [param for param in parameters_of(suite.folder / "params.schema.json") if f"`{param}`" not in text]
        assert missing == [], f"{readme} does not name {missing}"


def test_the_training_familys_parameters_are_named_where_the_suites_point():
    shared = parameters_of(REPO / "bench" / "suites" / "training" / "training.schema.json")
    text = (REPO / "bench" / "suites" / "ddp" / "README.md").read_text()
    assert "cv_target" in shared and [param for param in shared if f"`{param}`" not in text] == []


def test_the_readme_stays_a_front_door():
    """Under 10 KB: what it answers, the two commands, an output and how to read it, what to read next."""
    size = len((REPO / "README.md").read_bytes())
    text = (REPO / "README.md").read_text()
    assert size < 10 * 1024, f"README.md is {size} bytes"
    for said in ("make bench", "make test", "## Read next"):
        assert said in text


# Found in the suite's folder by the registry, never given by a suite: no hook.
NOT_HOOKS = {"report_section"}


def suite_hooks() -> dict:
    """Every hook of bench/suites/base.py's Suite -> whether a suite must give it: a class attribute is
    required where Suite declares it without a value, a method where its body raises NotImplementedError."""
    attributes = {name: name not in vars(Suite) for name in Suite.__annotations__}
    methods = {name: "raise NotImplementedError" in inspect.getsource(value) for name, value in vars(Suite).items()
               if inspect.isfunction(value) and not name.startswith("_") and name not in NOT_HOOKS}
    return {**attributes, **methods}


def hook_table_problems(page: str, hooks: dict) -> list[str]:
    """What the page's "Every hook" section misses of the hooks, or marks other than required/optional as they are."""
    section = page.partition("\n## Every hook\n")[2].split("\n## ")[0]
    marked = {}
    for line in section.splitlines():
        found = re.match(r"\| `(\w+)[^|]*\| *(required|optional)\b", line)
        if found:
            marked[found.group(1)] = found.group(2)
    problems = [f"the hook table has no row for {name}" for name in hooks if name not in marked]
    for name, required in hooks.items():
        if name in marked and marked[name] != ("required" if required else "optional"):
            problems.append(f"the hook table marks {name} {marked[name]}, base.py makes it {'required' if required else 'optional'}")
    return problems


def test_the_hook_table_names_every_hook_of_the_suite_class_marked_as_it_is():
    hooks = suite_hooks()
    assert {"Params", "headline_metric", "check_plan", "measured_seconds", "warnings"} <= set(hooks)
    assert hook_table_problems((REPO / "docs" / "writing-a-suite.md").read_text(), hooks) == []


def test_the_hook_table_check_finds_a_missing_row_and_a_wrong_mark():
    page = (REPO / "docs" / "writing-a-suite.md").read_text()
    page = re.sub(r"^\| `planned_value.*\n", "", page, flags=re.M)
    page = re.sub(r"^(\| `headline_metric` \| )required", r"\1optional", page, flags=re.M)
    assert hook_table_problems(page, suite_hooks()) == [
        "the hook table has no row for planned_value",
        "the hook table marks headline_metric optional, base.py makes it required"]
