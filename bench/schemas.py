"""The JSON Schemas in schema/ are the one source of truth for every file the tool reads or writes."""

from __future__ import annotations

import difflib
import functools
import itertools
import json
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING

import jsonschema_rs

from bench import suites
from bench.common.selection import ENTRY_AXES
from bench.errors import UserError

if TYPE_CHECKING:  # the reference implementation only explains an invalid document; a valid one never imports it
    from jsonschema import Draft202012Validator
    from referencing import Registry

SCHEMA_DIR = Path(__file__).resolve().parent.parent / "schema"
NAMES = ("bundle", "plan", "hosts", "fingerprint", "nccl-tests", "in-toto")
PLAN_ID = "urn:ddpbench:schema:plan"


@functools.lru_cache(maxsize=None)
def schema(name: str) -> dict:
    """schema/NAME.schema.json; the plan's and the bundle's with every suite's parts composed in."""
    document = json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text())
    compose = {"plan": _with_suites_in_plan, "bundle": _with_suites_in_bundle}.get(name)
    return compose(document) if compose else document


def _with_suites_in_plan(plan: dict) -> dict:
    """A suite entry's `suite` is one of the known suites, and each suite's branch checks the entry's
    params, gpu and cpu against that suite's params.schema.json ($defs/params; $defs/entry too)."""
    entry = plan["$defs"]["suite_entry"]
    entry["properties"]["suite"] = {**entry["properties"]["suite"], "enum": suites.names()}
    overrides = {axis: {"$ref": f"{PLAN_ID}#/$defs/{axis}"} for axis in ENTRY_AXES}
    entry["allOf"] = []
    for name, suite in suites.registry().items():
        params = f"{suite.schema['$id']}#/$defs/params"
        then = {"properties": {
            "params": {"$ref": params, "unevaluatedProperties": False},
            "gpu": {"$ref": params, "properties": overrides, "unevaluatedProperties": False,
                    "description": "Overrides on hosts with a GPU: parameters, and the entry's axes there (transports, algorithms, GPUs ...)."},
            "cpu": {"$ref": params, "properties": overrides, "unevaluatedProperties": False,
                    "description": "Overrides on hosts without a GPU: parameters, and the entry's axes there (transports, nodes ...)."},
        }}
        if "entry" in suite.schema.get("$defs", {}):
            then["allOf"] = [{"$ref": f"{suite.schema['$id']}#/$defs/entry"}]
        entry["allOf"].append({"if": {"properties": {"suite": {"const": name}}, "required": ["suite"]}, "then": then})
    return plan


def _with_suites_in_bundle(bundle: dict) -> dict:
    """A run's and a launch's `suite` is one of the known suites; a run's params hold what its suite's
    $defs/run_params says (what the report and compare key on)."""
    defs = bundle["$defs"]
    for part in ("launch", "run"):
        defs[part]["properties"]["suite"] = {**defs[part]["properties"]["suite"], "enum": suites.names()}
    defs["run"]["allOf"] = [
        {"if": {"properties": {"suite": {"const": name}}, "required": ["suite"]},
         "then": {"properties": {"params": {"$ref": f"{suite.schema['$id']}#/$defs/run_params"}}}}
        for name, suite in suites.registry().items() if "run_params" in suite.schema.get("$defs", {})
    ]
    return bundle


def documents() -> dict:
    """$id -> every schema a document may refer to (the files in schema/, each suite's params.schema.json)."""
    return {document["$id"]: document for document in _resources()}


def _resources() -> list:
    """Every schema a document may refer to: the files in schema/ and each suite's params.schema.json."""
    return [schema(name) for name in NAMES] + [suite.schema for suite in suites.registry().values()]


@functools.lru_cache(maxsize=None)
def _registry() -> Registry:
    from referencing import Registry, Resource

    return Registry().with_resources((document["$id"], Resource.from_contents(document)) for document in _resources())


@functools.lru_cache(maxsize=None)
def validator(name: str, definition: str = "") -> Draft202012Validator:
    """The validator of a whole schema, or of one of its $defs."""
    from jsonschema import Draft202012Validator

    if definition:
        return Draft202012Validator({"$ref": f"urn:ddpbench:schema:{name}#/$defs/{definition}"}, registry=_registry())
    return Draft202012Validator(schema(name), registry=_registry())


@functools.lru_cache(maxsize=None)
def fast_validator(name: str, definition: str = "") -> "jsonschema_rs.Validator":
    """A compiled validator of the same schema, about 100x faster, and the one whose verdict is
    final: the reference implementation only explains a document this one refused (the two differ
    at the edges, e.g. `$` in a pattern matches before a trailing newline in Python)."""
    resources = [(contents["$id"], contents) for contents in _resources()]
    root = {"$ref": f"urn:ddpbench:schema:{name}#/$defs/{definition}"} if definition else schema(name)
    return jsonschema_rs.validator_for(root, registry=jsonschema_rs.Registry(resources))


def field_path(path) -> str:
    """`suites[0].params.ops[1]` from a jsonschema path."""
    text = ""
    for part in path:
        if isinstance(part, str) and not part.isprintable():  # a hostile key: shown escaped, never as it is
            part = ascii(part)
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


def first_problem(document, name: str, definition: str = "", thorough: bool = True, at: tuple = ()) -> "str | None":
    """`field X: what is wrong` for the most relevant problem, or None when the document is valid.
    Not thorough: the first problem found, for a document so big that weighing every problem
    (in Python) would take minutes. `at`: where the document lies in a larger one, for the field's name."""
    try:
        if fast_validator(name, definition).is_valid(document):
            # A big document is not copied to look for 2.0 where an integer belongs (its reading is bounded in memory).
            return _integral_float(document, name, definition) if thorough else None
    except UnicodeEncodeError as err:  # a lone UTF-16 surrogate (a \ud800 escape in JSON) is no text the validator takes
        return f"a text value holds {err.object[err.start:err.end]!r}, a lone surrogate that is not text"
    return _explain(document, name, definition, thorough, at)


def _integral_float(document, name: str, definition: str) -> "str | None":
    """A float such as 2.0 where the schema asks for an integer: JSON Schema counts it as one,
    Python does not (`world_sizes: [2.0]` would pass here and fail in a worker's range()). Each such
    float is nudged off its integer value; if that breaks the document, the type errors name it."""
    nudged, paths = _nudge_integral_floats(document, ())
    if not paths or fast_validator(name, definition).is_valid(nudged):
        return None
    errors = list(validator(name, definition).iter_errors(nudged))
    while errors:  # a oneOf's own errors (world_sizes: an integer or "all") sit in its context
        error = errors.pop(0)
        path = tuple(error.absolute_path)
        if error.validator == "type" and path in paths:
            value = paths[path]
            return f"field {field_path(path)}: {value!r} is not an integer; write {int(value)}"
        errors += error.context
    return None


def _nudge_integral_floats(value, path: tuple) -> tuple:
    """(a copy with every integral float moved to the next float up, {path: the float})."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2 ** 53:
        return math.nextafter(value, math.inf), {path: value}
    if isinstance(value, dict):
        pairs = {key: _nudge_integral_floats(item, (*path, key)) for key, item in value.items()}
        return {key: pair[0] for key, pair in pairs.items()}, {k: v for pair in pairs.values() for k, v in pair[1].items()}
    if isinstance(value, list):
        pairs = [_nudge_integral_floats(item, (*path, index)) for index, item in enumerate(value)]
        return [pair[0] for pair in pairs], {k: v for pair in pairs for k, v in pair[1].items()}
    return value, {}


MAX_WEIGHED_ERRORS = 1000  # a document with a problem in each of a million values is explained from its first thousand


def _explain(document, name: str, definition: str, thorough: bool = True, at: tuple = ()) -> str:
    from jsonschema.exceptions import best_match

    errors = list(itertools.islice(validator(name, definition).iter_errors(document), MAX_WEIGHED_ERRORS)) if thorough else []
    # The deepest error names the field the user got wrong; "unevaluated" errors at a parent
    # are only the echo of a failed subschema.
    error = max(errors, key=lambda e: len(e.absolute_path), default=None)
    error = error and best_match(e for e in errors if len(e.absolute_path) == len(error.absolute_path))
    if error is None:  # only the final validator refuses it (or not thorough): its own words, for its first problem
        try:
            fast_validator(name, definition).validate(document)
        except jsonschema_rs.ValidationError as found:
            error = found
        path, message = error.instance_path, error.message
        refused = re.search(r'does not match "(.*)"$', message, re.DOTALL)
        schema_part = {"description": _pattern_descriptions().get(refused and refused.group(1).replace("\\\\", "\\"))}
        instance = _instance_at(document, path)
    else:
        path, message, schema_part = error.absolute_path, error.message, error.schema if error.validator == "pattern" else {}
        instance = error.instance  # a key that propertyNames refuses is the key, not its object
        if error.validator == "required":  # every field the object lacks, in one line, not one per attempt
            missing = [e.message.split("'")[1] for e in errors if e.validator == "required" and e.schema is error.schema
                       and e.absolute_path == error.absolute_path]
            message = f"{', '.join(map(repr, missing))} {'is a required property' if len(missing) == 1 else 'are required properties'}"
    if schema_part.get("description"):  # the regex means little to a reader
        message = f"{_short(instance)} is not allowed here: {schema_part['description'].rstrip('.')}"
    if isinstance(instance, bool) and getattr(error, "validator", None) == "type" and "string" in error.validator_value:
        message += "; YAML reads true, false, yes, no, on and off unquoted as booleans: write the text in quotes"
    message = message[:1000]  # a message may quote a value of megabytes
    message = " ".join(message.split()) + _did_you_mean(message)
    if len(message) > 300:
        message = message[:297] + "..."
    return f"field {field_path((*at, *path))}: {message}"


def _did_you_mean(message: str) -> str:
    """" (did you mean 'address'?)" where a key was refused as unknown and a known one is spelled alike."""
    unexpected = re.search(r"\((.*) (?:was|were) unexpected\)", message)
    if not unexpected:
        return ""
    guesses = [f"{match[0]!r} for {name!r}" if len(names) > 1 else repr(match[0])
               for names in [re.findall(r"'([^']*)'", unexpected.group(1))]
               for name in names for match in [difflib.get_close_matches(name, _property_names(), n=1, cutoff=0.75)] if match]
    return f" (did you mean {', '.join(guesses)}?)" if guesses else ""


@functools.lru_cache(maxsize=None)
def _property_names() -> list:
    """Every key any schema of ddpbench defines: what a misspelled key is matched against."""
    found, stack = set(), _resources()
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("properties"), dict):
                found.update(node["properties"])
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return sorted(found)


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _instance_at(document, path):
    for part in path:
        document = document[part]
    return document


@functools.lru_cache(maxsize=None)
def _pattern_descriptions() -> dict:
    """pattern -> the description beside it, across every schema (to explain a pattern refused)."""
    found, stack = {}, _resources()
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("pattern"), str) and node.get("description"):
                found[node["pattern"]] = node["description"]
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


def validate(name: str, document, source: str, fix: str) -> None:
    """Raise a UserError naming the source, the field and the fix for the most relevant problem."""
    problem = first_problem(document, name)
    if problem is not None:
        raise UserError(f"{source}: {problem}; {fix}")
