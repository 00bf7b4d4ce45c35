"""The user's pages cannot rot silently: in README.md, SECURITY.md, ARCHITECTURE.md, docs/*.md and every
suite's README.md, each relative link reaches a file (and its heading, where it names one), each path
written as code names a file of the repository, and each command of a shell block names what exists:
`make` targets of the Makefile, `ddpbench` / `python -m bench` subcommands and their options, plans
given by name. Each suite has a README that names every parameter of its params.schema.json (the
harness's it refers to included). docs/writing-a-suite.md's hook table names every hook of
bench/suites/base.py's Suite, each marked required or optional as the class makes it. Each command
example is run as written, here or by the test named, or says why not (EXAMPLES); every argument of
every command says in its --help what it is."""

from __future__ import annotations

import argparse
import glob
import inspect
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

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


# --- Every command example, as written --------------------------------------------------------------

# Each command of the docs' shell blocks, and of their prose that runs a script with `python`, and how
# the tests hold it as written: "here" (a test below runs it so, in a folder laid out as a clone's
# with a run's results), the test file that runs it, or why no test runs it.
NOT_RUN = "not run: "
EXAMPLES = {
    "make bench": NOT_RUN + "a plan's minutes and the set-up of .venv; tests/agent/test_estimate.py runs `ddpbench run` of quick",
    "make test": NOT_RUN + "the whole suite, this test's own",
    "make bench PLAN=seed002": NOT_RUN + "a GPU host's minutes; tests/suites/test_shipped_plans.py prices and smoke-runs it",
    ".venv/bin/ddpbench predict benchmarks/results/bundles/20261125T213922Z-6e20a7.bundle.json --link nvlink4+ib-ndr --gpus 16 "
    "--gpus-per-node 8": "tests/suites/test_predict_examples.py",
    "make bench HOSTS=hosts/vast.yaml PLAN=quick": NOT_RUN + "a rented GPU host; hosts/vast.yaml is validated here",
    ".venv/bin/ddpbench validate hosts/vast.yaml": "here",
    "make bench HOSTS=hosts/two-boxes.yaml PLAN=benchmarks/plans/two-nodes.yaml": NOT_RUN + "two GPU boxes; "
    "tests/controller/test_two_nodes.py runs that plan over two SSH hosts",
    "make test-hosts": NOT_RUN + "sshd as root; tests/controller/test_ssh.py starts the same hosts",
    "make bench HOSTS=hosts/loopback.yaml": NOT_RUN + "sshd as root; tests/controller/test_ssh.py runs plans on those hosts",
    "make test-hosts-stop": NOT_RUN + "sshd as root; tests/controller/test_ssh.py stops its hosts",
    "make image": NOT_RUN + "Docker and a registry; tests/docker/test_image.py builds the CPU image",
    "make image LOCK=cuda-sdxl": NOT_RUN + "Docker and a registry, and CUDA's image",
    "make image IMAGE=registry.example.com/me/ddpbench:0.1.0": NOT_RUN + "Docker and a registry",
    "make image-lock": NOT_RUN + "Docker Hub",
    "make image-requirements": NOT_RUN + "PyPI",
    "make image-save": NOT_RUN + "Docker, and an image built",
    "make image-load IMAGE_TARBALL=dist/ddpbench-0.1.0.tar": NOT_RUN + "Docker, and a saved image",
    "make bench HOSTS=hosts/docker.yaml": NOT_RUN + "Docker with GPUs; tests/controller/runtimes/test_docker.py runs the runtime",
    "make report BUNDLES='results/*/bundle.json downloaded/*.json' OUT=report/": "here",
    ".venv/bin/ddpbench report 'results/*/bundle.json' --out report/ --group-by hardware": "here",
    "python benchmarks/normal_coverage.py results/*/bundle.json": "here",
    ".venv/bin/ddpbench predict results/RUN_ID/bundle.json": "tests/suites/test_predict_examples.py",
    ".venv/bin/ddpbench predict BUNDLE --link pcie4-x4-host --link nvlink4 --gpus 2": "tests/suites/test_predict_examples.py",
    ".venv/bin/ddpbench predict BUNDLE --link 12.5,20": "tests/suites/test_predict_examples.py",
    ".venv/bin/ddpbench predict BUNDLE --scaling strong": "tests/suites/test_predict_examples.py",
    "make bench PLAN=collectives-sweep HOSTS=hosts/local.yaml OUT=results": NOT_RUN + "every transport's sweep: minutes; "
    "tests/suites/test_shipped_plans.py prices and smoke-runs it",
    ".venv/bin/ddpbench run --plan seed001 --hosts hosts/local.yaml": NOT_RUN + "200 steps of GPT-2: minutes; "
    "tests/suites/test_shipped_plans.py smoke-runs it",
    ".venv/bin/ddpbench run --plan seed001 --dry-run": "here",
    ".venv/bin/ddpbench run --plan seed001 --smoke": "tests/suites/test_shipped_plans.py",
    ".venv/bin/ddpbench run --hosts hosts/local.yaml --resume results/RUN_ID": "tests/controller/test_run.py",
    "make bench HOSTS=hosts/hpc-example.yaml PLAN=seed002": NOT_RUN + "a Slurm cluster; tests/controller/runtimes/test_slurm.py "
    "runs plans on one",
    "make verify BUNDLE=their/bundle.json HOSTS=hosts/local.yaml": "tests/e2e/test_make_verify.py",
    ".venv/bin/ddpbench verify their/bundle.json --hosts hosts/local.yaml --tolerance busbw_gbps=0.1": "tests/verify/test_verify.py",
    ".venv/bin/ddpbench compare their/bundle.json results/RUN_ID/bundle.json": "tests/verify/test_compare_out.py",
    '.venv/bin/python -m bench verify their/bundle.json --hosts hosts/local.yaml; echo "verify: $?"': "tests/e2e/test_make_verify.py",
    ".venv/bin/ddpbench sign results/RUN_ID/bundle.json --key ~/.ssh/id_ed25519": "tests/verify/test_verify.py",
    "DDPBENCH_SUITES_PATH=/path/to/my-suites .venv/bin/ddpbench suites": "tests/suites/test_a_new_suite.py",
    "DDPBENCH_SUITES_PATH=/path/to/my-suites .venv/bin/ddpbench run --plan toy.yaml": "tests/suites/test_a_new_suite.py",
    "DDPBENCH_SUITES_PATH=/path/to/my-suites .venv/bin/python -m pytest -q tests/suites/test_suite_contract.py tests/test_docs.py "
    "tests/test_architecture.py tests/e2e/test_boundaries.py": "tests/suites/test_a_new_suite.py",
    "python benchmarks/controller_overhead.py": NOT_RUN + "sshd as root; its imports from a Python outside the venv run here",
    "python benchmarks/expected_ranges.py": "here",
    "python benchmarks/p2p_gate.py": NOT_RUN + "GPUs; its imports from a Python outside the venv run here",
    "python3 benchmarks/launch_costs.py --write BUNDLE...": NOT_RUN + "it rewrites bench/common/launch_costs.py; its imports "
    "from a Python outside the venv run here",
    "python benchmarks/plan_durations.py": "here",
    "python benchmarks/slurm_overhead.py": NOT_RUN + "a Slurm cluster; its imports from a Python outside the venv run here",
}
RUN_HERE_SLOWLY = {  # seconds of CPU each: `make test` runs them, `make check` leaves them
    "make report BUNDLES='results/*/bundle.json downloaded/*.json' OUT=report/",
    ".venv/bin/ddpbench report 'results/*/bundle.json' --out report/ --group-by hardware",
    "python benchmarks/normal_coverage.py results/*/bundle.json",
    ".venv/bin/ddpbench run --plan seed001 --dry-run",
    "python benchmarks/expected_ranges.py",
    "python benchmarks/plan_durations.py",
}
A_RUN = "20261125T213922Z-6e20a7"  # the README's 2x H100 bundle, as a run's results/RUN_ID/bundle.json


def command_examples(root: Path) -> dict:
    """Each command of the docs' shell blocks (its comment left out), and each `python SCRIPT` of
    their prose -> the pages that give it."""
    found: dict = {}
    for doc in doc_files(root):
        text = doc.read_text()
        lines = [line for language, body in FENCE.findall(text) if language.strip() in SHELL_FENCES for line in body.splitlines()]
        lines += [span for span in CODE_SPAN.findall(FENCE.sub("", text)) if re.match(r"python3? benchmarks/", span)]
        for line in lines:
            command = re.sub(r"\s+#.*$", "", line).strip()
            if command and not command.startswith("#"):
                found.setdefault(command, []).append(str(doc.relative_to(root)))
    return found


def test_every_command_example_is_run_as_written_or_says_why_not():
    found = command_examples(REPO)
    assert sorted(set(found) - set(EXAMPLES)) == [], "commands of the docs no test holds: add each to EXAMPLES"
    assert sorted(set(EXAMPLES) - set(found)) == [], "EXAMPLES holds commands the docs no longer give"
    from tests.tiers import CHECK, FULL_ONLY
    for command, how in EXAMPLES.items():
        if how != "here" and not how.startswith(NOT_RUN):
            assert how in CHECK + FULL_ONLY, f"{command}: {how} is no test file of a tier"
    assert RUN_HERE_SLOWLY <= {command for command, how in EXAMPLES.items() if how == "here"}


@pytest.fixture
def clone(tmp_path) -> Path:
    """A folder as a clone is after `make bench`: the repository's files (linked), its .venv, a run's
    results; `python` on the PATH is a Python outside the venv, as in a fresh shell."""
    for entry in REPO.iterdir():
        if entry.name not in MADE_HERE | {"Makefile", "pyproject.toml"}:
            (tmp_path / entry.name).symlink_to(entry)
    # make reads them here. Its venv is the repository's, linked: were pyproject.toml newer than the venv's
    # stamp (edited since the last make), make would reinstall ddpbench from this folder into it.
    installed = (REPO / ".venv" / ".installed").stat().st_mtime
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy2(REPO / name, tmp_path / name)
        os.utime(tmp_path / name, (installed - 1, installed - 1))
    (tmp_path / ".venv").symlink_to(REPO / ".venv")
    (tmp_path / "results" / A_RUN).mkdir(parents=True)
    shutil.copy(REPO / "benchmarks" / "results" / "bundles" / f"{A_RUN}.bundle.json", tmp_path / "results" / A_RUN / "bundle.json")
    bare = tmp_path.parent / f"{tmp_path.name}-bin"
    bare.mkdir()
    for name in ("python", "python3"):
        (bare / name).symlink_to(getattr(sys, "_base_executable", sys.executable))
    return tmp_path


def run_as_written(command: str, clone: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "PYTHON", "VIRTUAL_ENV"))}
    env["PATH"] = f"{clone.parent / (clone.name + '-bin')}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(["bash", "-c", command], cwd=clone, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and "Traceback" not in done.stderr, f"`{command}`: {done.stdout}\n{done.stderr}"
    return done


def test_the_cheap_examples_run_as_written():
    """`ddpbench validate` of the hosts file the docs offer (in this process: the tool's own work, without
    an interpreter's start); the rest here are slow."""
    from tests.support.cli_in_process import ddpbench

    done = ddpbench("validate", "hosts/vast.yaml", cwd=REPO)
    assert (done.returncode, done.stdout) == (0, "hosts/vast.yaml: ok: hosts file\n"), done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(RUN_HERE_SLOWLY))
def test_the_examples_run_as_written(command, clone):
    done = run_as_written(command, clone)
    if command.startswith("make report"):  # no downloaded bundles: that pattern is named, the rest reported
        assert "warning: downloaded/*.json: the pattern matches no file; going on with the others" in done.stderr
    if "report" in command:
        assert (clone / "report" / "report.md").is_file() and "from 1 bundle(s)" in done.stdout
    if "normal_coverage" in command:
        assert "plan quick: 1 bundle(s), 9 figure(s)" in done.stdout
    if "plan_durations" in command:
        assert "| seed001 |" in done.stdout


@pytest.mark.slow
def test_every_python_script_the_docs_give_starts_from_a_python_outside_the_venv(clone):
    """Each `python benchmarks/SCRIPT` of the docs imports what it needs there, however it is run."""
    scripts = {re.search(r"benchmarks/\S+\.py", command).group(0) for command in EXAMPLES if re.match(r"python3? ", command)}
    for script in sorted(scripts):
        done = run_as_written(f"python {script} --help", clone)
        assert done.stdout.startswith("usage: "), (script, done.stdout)


def test_every_argument_of_every_command_says_in_its_help_what_it_is():
    """`ddpbench compare --help` names ORIGINAL and NEW and says which is which; so for every argument."""
    def commands(parent: argparse.ArgumentParser, name: str):
        yield name, parent
        for action in parent._actions:
            if isinstance(action, argparse._SubParsersAction):
                for child, sub in action.choices.items():
                    yield from commands(sub, f"{name} {child}")

    unsaid = [f"{name} {action.metavar or action.dest}" for name, command in commands(parser(), "ddpbench")
              for action in command._actions
              if not isinstance(action, argparse._SubParsersAction) and (not action.help or action.help == argparse.SUPPRESS)]
    assert unsaid == []
