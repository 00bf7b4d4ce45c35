"""Reading a YAML file the user wrote, with errors that say where and what to fix.

Strict, since plans and hosts files may come from anyone: plain types only (null, booleans,
integers, finite floats, strings, lists, mappings with string keys); no timestamps, binary, sets
or other tags; a key given twice is refused; aliases may not expand past MAX_NODES values.

Read as users write it: a number with an exponent and no dot (5e-3) is a number, as YAML 1.2
has it (YAML 1.1, PyYAML's, reads it as text); an `env` mapping's numbers are the text written
(`OMP_NUM_THREADS: 2` is "2"), since an environment holds text.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import yaml

from bench.errors import UserError
from bench.inputfile import lone_surrogate, read_input

MAX_NODES = 100_000  # values after alias expansion; the largest shipped plan has a few hundred
STARTING_POINTS = {"hosts file": "hosts/local.yaml", "plan": "bench/plans/quick.yaml"}  # what an empty file could start from


class _Refused(Exception):
    def __init__(self, mark, problem: str) -> None:
        super().__init__(problem)
        self.mark, self.problem = mark, problem


class StrictLoader(yaml.SafeLoader):
    pass


def _refuse_tag(loader, node):
    raise _Refused(node.start_mark, f"the tag {node.tag} is not allowed (only plain strings, numbers, booleans, lists and mappings)")


def _finite_float(loader, node):
    value = yaml.SafeLoader.construct_yaml_float(loader, node)
    if not math.isfinite(value):
        raise _Refused(node.start_mark, f"{node.value!r} is not a finite number")
    return value


NUMBER_TAGS = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")


def _mapping(loader, node, numbers_as_text: bool = False):
    """A mapping with string keys, each once; with numbers_as_text (an `env` mapping: an environment
    holds text), each number as the text written."""
    loader.flatten_mapping(node)
    mapping = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, str):
            raise _Refused(key_node.start_mark, f"the key {key_node.value!r} is not a string")
        if key in mapping:
            raise _Refused(key_node.start_mark, f"the key {key!r} is given twice")
        if numbers_as_text and isinstance(value_node, yaml.ScalarNode) and value_node.tag in NUMBER_TAGS:
            mapping[key] = value_node.value
        elif key == "env" and isinstance(value_node, yaml.MappingNode):
            mapping[key] = _mapping(loader, value_node, numbers_as_text=True)
        else:
            mapping[key] = loader.construct_object(value_node, deep=True)
    return mapping


StrictLoader.yaml_constructors = {
    "tag:yaml.org,2002:null": yaml.SafeLoader.construct_yaml_null,
    "tag:yaml.org,2002:bool": yaml.SafeLoader.construct_yaml_bool,
    "tag:yaml.org,2002:int": yaml.SafeLoader.construct_yaml_int,
    "tag:yaml.org,2002:float": _finite_float,
    "tag:yaml.org,2002:str": yaml.SafeLoader.construct_yaml_str,
    "tag:yaml.org,2002:seq": yaml.SafeLoader.construct_yaml_seq,
    "tag:yaml.org,2002:map": _mapping,
    None: _refuse_tag,
}
StrictLoader.yaml_multi_constructors = {}
# YAML 1.2's floats with an exponent that YAML 1.1 reads as text: 5e-3, 1E6, 2.5e3 (1.1 asks for a dot and a signed exponent).
StrictLoader.add_implicit_resolver("tag:yaml.org,2002:float", re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)[eE][-+]?[0-9]+$"),
                                   list("-+0123456789."))


def expanded_size(value, limit: int) -> int:
    """How many values `value` holds once aliases are expanded, counting no further than limit + 1."""
    count, stack = 0, [value]
    while stack and count <= limit:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return count


def load_yaml(path: Path, what: str):
    data = read_input(path, what)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{path}: not UTF-8 text; give a YAML {what}") from None
    try:
        document = yaml.load(text, Loader=StrictLoader)
    except _Refused as err:
        raise UserError(f"{path}: not allowed at line {err.mark.line + 1}, column {err.mark.column + 1}: {err.problem}; fix the {what}") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or "syntax error"
        raise UserError(f"{path}: not valid YAML{where}: {problem}; fix the {what}'s syntax") from None
    except RecursionError:
        raise UserError(f"{path}: nested too deeply; fix the {what}") from None
    if document is None:
        start = STARTING_POINTS.get(what, " or ".join(STARTING_POINTS.values()))
        raise UserError(f"{path}: empty (no YAML value in it); write the {what} there, starting from a copy of {start}")
    if expanded_size(document, MAX_NODES) > MAX_NODES:
        raise UserError(f"{path}: more than {MAX_NODES} values once its aliases are expanded; this is not a ddpbench {what}")
    surrogate = lone_surrogate(document)
    if surrogate:
        raise UserError(f"{path}: {surrogate}; fix the {what}")
    return document
