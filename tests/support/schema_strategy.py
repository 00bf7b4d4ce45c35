"""Hypothesis strategies derived from schema/*.json: any document the schema accepts, drawn from
the schema itself (its types, enums, patterns, bounds, required and optional properties, the
if/then of a run's suite), so that a field the schema allows is a field the property tests try.

hypothesis-jsonschema would do this, but its last release no longer runs with current Hypothesis;
the bundle, fingerprint and hosts schemas use a small part of JSON Schema, which this covers:
$ref, allOf (with if/then/else on a const), oneOf, anyOf, not (of a pattern; in a then or else, of
required fields: they are left out), type, enum, const,
pattern, min/maxLength, minimum, maximum, exclusiveMinimum, items, min/maxItems, uniqueItems,
properties, required, additionalProperties, propertyNames, min/maxProperties.

Sizes are kept small (a few items, short texts) so that a report of each document stays quick;
values are not: any character (control, bidirectional and invisible ones included), any number
within the bounds (0, the bounds themselves and the largest floats included). With `edges`, numbers
are drawn from the edges most: 0, the smallest subnormal and normal doubles, 1, the largest integer
a double holds exactly, the schema's bounds.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Callable

from hypothesis import strategies as st

from bench import schemas

MAX_ITEMS = 3  # of an array, and extra properties of an object, drawn at the most
MAX_TEXT = 24  # characters of a text without a pattern
MAX_EXACT_INT = 2**53 - 1  # I-JSON: the reader refuses larger integers whatever the schema says

ANY_TEXT = st.characters(codec="utf-8")  # every character but lone surrogates (no text)
ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-MAX_EXACT_INT, MAX_EXACT_INT) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(ANY_TEXT, max_size=8),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(ANY_TEXT, max_size=6), inner, max_size=2),
    max_leaves=4,
)
IGNORED = {"$schema", "$id", "$defs", "title", "description", "default"}


EDGES = (0, 5e-324, 2.2250738585072014e-308, 1e-300, 1, 1e15, MAX_EXACT_INT, 2**53)


def edges_within(low, high, exclusive: bool, integer: bool) -> list:
    """The edge values a number between low and high (either None: unbounded) may take."""
    found = {value for value in (*EDGES, low, high) if value is not None}
    found = {int(value) if integer else float(value) for value in found if not integer or float(value).is_integer()}
    return sorted(value for value in found if (low is None or value > low or (value == low and not exclusive))
                  and (high is None or value <= high) and abs(value) <= (MAX_EXACT_INT if integer else 2**53))


class Derived:
    """Strategies for the schemas of this repository, each built once."""

    def __init__(self, overrides: "dict[tuple, st.SearchStrategy] | None" = None, edges: bool = False):
        self.overrides = overrides or {}  # property path (names only) -> the strategy to use there
        self.edges = edges  # numbers drawn from their edges most (EDGES, the bounds)

    def of(self, name: str, definition: str = "", *properties: str) -> st.SearchStrategy:
        """Documents of schema/NAME.schema.json (with its suites composed in), or of one of its $defs, or
        of a property within it (`properties`: the names on the way, e.g. "run", "sampling")."""
        root = schemas.schema(name)
        node = root["$defs"][definition] if definition else root
        for key in properties:
            node = node["properties"][key]
        return self._node(node, root["$id"], ())

    # --- resolution ---------------------------------------------------------------------------

    def _resolve(self, node: dict, name: str) -> tuple[dict, str]:
        """A node with its $ref and allOf merged in (if/then kept aside), and the $id of the schema it lies in."""
        while "$ref" in node:
            ref = node["$ref"]
            target, _, pointer = ref.partition("#")
            target_name = target or name
            found = schemas.documents()[target_name]
            for part in filter(None, pointer.split("/")):
                found = found[part]
            resolved, target_name = self._resolve(found, target_name)
            node = {**resolved, **{k: v for k, v in node.items() if k != "$ref"}}
            name = target_name
        if "allOf" in node:
            merged = {k: v for k, v in node.items() if k != "allOf"}
            conditions = list(merged.pop("conditions", []))
            for part in node["allOf"]:
                if "if" in part:
                    conditions.append(part)
                else:
                    part, _ = self._resolve(part, name)
                    merged = _merge(merged, part)
            node = {**merged, "conditions": conditions}
        if "if" in node:
            node = {**{k: v for k, v in node.items() if k not in ("if", "then", "else")},
                    "conditions": [*node.get("conditions", []), {"if": node["if"], "then": node.get("then", {}),
                                                                 "else": node.get("else", {})}]}
        return node, name

    # --- strategies ---------------------------------------------------------------------------

    def _node(self, node, name: str, path: tuple) -> st.SearchStrategy:
        if path in self.overrides:
            return self.overrides[path]
        if node is True or node == {}:
            return ANY_JSON
        node, name = self._resolve(node, name)
        if "const" in node:
            return st.just(node["const"])
        if "enum" in node:
            return st.sampled_from(node["enum"])
        for key in ("oneOf", "anyOf"):
            if key in node:
                rest = {k: v for k, v in node.items() if k != key}
                return st.one_of([self._node(_merge(rest, option), name, path) for option in node[key]]).filter(
                    _valid_under(node, name))
        types = node.get("type") or ("string" if "pattern" in node else None)
        if isinstance(types, list):
            return st.one_of([self._node({**node, "type": t}, name, path) for t in types])
        return {
            "string": self._string, "integer": self._integer, "number": self._number, "boolean": lambda n, s, p: st.booleans(),
            "null": lambda n, s, p: st.none(), "array": self._array, "object": self._object,
        }.get(types, lambda n, s, p: ANY_JSON)(node, name, path)

    def _string(self, node: dict, name: str, path: tuple) -> st.SearchStrategy:
        low, high = node.get("minLength", 0), node.get("maxLength", 65536)
        if "pattern" in node:
            # JSON Schema's regular expressions are ECMA-262's: \d is an ASCII digit, not any Unicode one.
            pattern = node["pattern"].replace("\\d", "[0-9]")
            found = st.from_regex(pattern, fullmatch=True, alphabet=ANY_TEXT).filter(lambda t: low <= len(t) <= high)
        else:
            found = st.text(ANY_TEXT, min_size=low, max_size=min(high, max(low, MAX_TEXT)))
        if "not" in node and "pattern" in node["not"]:
            found = found.filter(lambda t, avoid=node["not"]["pattern"]: not re.search(avoid, t))
        return found

    def _integer(self, node: dict, name: str, path: tuple) -> st.SearchStrategy:
        low = max(node.get("minimum", -MAX_EXACT_INT), -MAX_EXACT_INT)
        high = min(node.get("maximum", MAX_EXACT_INT), MAX_EXACT_INT)
        drawn = st.integers(int(low), int(high))
        return st.sampled_from(edges_within(low, high, False, True)) | drawn if self.edges else drawn

    def _number(self, node: dict, name: str, path: tuple) -> st.SearchStrategy:
        low = node.get("minimum", node.get("exclusiveMinimum"))
        high = node.get("maximum")
        exclusive = "exclusiveMinimum" in node
        drawn = st.floats(low, high, allow_nan=False, allow_infinity=False, exclude_min=exclusive) | st.integers(
            int(low) + exclusive if low is not None else -MAX_EXACT_INT, int(high) if high is not None else MAX_EXACT_INT)
        return st.sampled_from(edges_within(low, high, exclusive, False)) | drawn if self.edges else drawn

    def _array(self, node: dict, name: str, path: tuple) -> st.SearchStrategy:
        items = self._node(node.get("items", {}), name, path)
        low = node.get("minItems", 0)
        high = min(node.get("maxItems", MAX_ITEMS), max(low, MAX_ITEMS))
        unique = {"unique_by": lambda item: json.dumps(item, sort_keys=True)} if node.get("uniqueItems") else {}
        return st.lists(items, min_size=low, max_size=high, **unique)

    def _object(self, node: dict, name: str, path: tuple) -> st.SearchStrategy:
        properties, required = node.get("properties", {}), set(node.get("required", []))
        conditions = node.get("conditions", [])
        extra = node.get("additionalProperties", node.get("unevaluatedProperties", True))
        most = node.get("maxProperties", len(properties) + MAX_ITEMS)

        @st.composite
        def draw_object(draw) -> dict:
            found = {}
            for key, spec in properties.items():
                if key in required or draw(st.booleans()):
                    found[key] = draw(self._node(spec, name, (*path, key)))
            if extra is not False and len(found) < most:
                names = self._node(node.get("propertyNames", {"type": "string"}), name, (*path, "*")).filter(
                    lambda key: key not in properties)
                values = self._node({} if extra is True else extra, name, (*path, "*"))
                found.update(draw(st.dictionaries(names, values, max_size=min(MAX_ITEMS, most - len(found)))))
            for condition in conditions:  # a run's params follow its suite: drawn again under `then`
                holds = _validator(json.dumps(condition["if"]), name).is_valid(found)
                then, _ = self._resolve(condition["then"] if holds else condition.get("else", {}), name)
                for key in then.get("not", {}).get("required", []):  # a field the branch rules out
                    found.pop(key, None)
                for key, spec in then.get("properties", {}).items():
                    base = properties.get(key, {})
                    found[key] = draw(self._node(_merge(self._resolve(base, name)[0] if base else {}, spec), name, (*path, key)))
                for key in set(then.get("required", [])) - set(found):
                    found[key] = draw(self._node(properties.get(key, {}), name, (*path, key)))
            return found

        return draw_object().filter(lambda found: node.get("minProperties", 0) <= len(found) <= most)


def _merge(a: dict, b: dict) -> dict:
    """Two schemas that must both hold, where they do not contradict (properties and required joined)."""
    merged = {**a, **b}
    if "properties" in a and "properties" in b:
        merged["properties"] = {**a["properties"], **b["properties"]}
    if "required" in a and "required" in b:
        merged["required"] = sorted({*a["required"], *b["required"]})
    if "conditions" in a or "conditions" in b:
        merged["conditions"] = [*a.get("conditions", []), *b.get("conditions", [])]
    return merged


@functools.lru_cache(maxsize=None)
def _validator(text: str, name: str):
    """The validator of a subschema (its JSON text) of the schema whose $id is `name`, its relative $refs made absolute."""
    node = json.loads(text.replace('"$ref": "#', f'"$ref": "{name}#'))
    registry = schemas.jsonschema_rs.Registry(list(schemas.documents().items()))
    return schemas.jsonschema_rs.validator_for(node, registry=registry)


def _valid_under(node: dict, name: str) -> Callable:
    """oneOf/anyOf: a drawn value must hold under the node (exactly one branch, for oneOf)."""
    return _validator(json.dumps({k: v for k, v in node.items() if k != "conditions"}), name).is_valid
