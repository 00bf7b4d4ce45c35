"""What every suite on the suite path must be beyond what the registry checks as it loads one (a
`suite.py` defining SUITE, named by its folder): its typed Params and its schema's parameters agree,
the harness's classes and their schema agree, its schema is valid JSON Schema, and its folder holds
what the agent runs. docs/writing-a-suite.md lists these checks with the others; run with
DDPBENCH_SUITES_PATH set, they judge a suite of your own too. `ddpbench suites` lists what they check."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from dataclasses import MISSING, fields

import pytest
from jsonschema import Draft202012Validator

from bench import suites
from bench.errors import UserError
from bench.suites import params
from bench.controller.plans import with_defaults
from tests.conftest import REPO, cli

HARNESS_CLASSES = [value for value in vars(params).values() if isinstance(value, type) and issubclass(value, params.SampledParams)]
SUITES = sorted(suites.registry().items())


def optional_fields(cls) -> set:
    """The fields a plan may leave out, None standing for absent."""
    return {f.name for f in fields(cls) if f.default is not MISSING and f.name not in cls.AGENT_SET}


def schema_optional(definition: dict, required: list) -> set:
    """The properties with neither a default nor a place among the entry's required params."""
    return {key for key, spec in definition["properties"].items() if "default" not in spec and key not in required}


def test_each_harness_class_is_the_schema_definition_of_its_name():
    definitions = params.harness_schema()["$defs"]
    assert sorted(definitions) == sorted(cls.__name__ for cls in HARNESS_CLASSES)
    for cls in HARNESS_CLASSES:
        definition = params.resolved(definitions[cls.__name__], "harness")
        assert {f.name for f in fields(cls)} == set(definition["properties"]), cls.__name__


@pytest.mark.parametrize("name, suite", SUITES, ids=[name for name, _ in SUITES])
def test_the_suites_params_type_its_schemas_parameters(name, suite):
    definition = suite.schema["$defs"]["params"]
    assert {f.name for f in fields(suite.Params)} - set(suite.Params.AGENT_SET) == set(definition["properties"]), \
        f"{name}: its Params' fields and its params.schema.json's properties (the harness's included) differ"
    assert optional_fields(suite.Params) == schema_optional(definition, suite.required_params), \
        f"{name}: a field has a default (None: absent) exactly where the schema has no default and does not require it"
    own = json.loads((suite.folder / "params.schema.json").read_text())["$defs"]["params"]
    if "$ref" in own:
        harness_class = getattr(params, own["$ref"].rpartition("/")[2])
        assert issubclass(suite.Params, harness_class), f"{name}: its schema refers to {harness_class.__name__}, its Params does not extend it"


@pytest.mark.parametrize("name, suite", SUITES, ids=[name for name, _ in SUITES])
def test_the_suites_schema_is_valid_json_schema(name, suite):
    Draft202012Validator.check_schema(json.loads((suite.folder / "params.schema.json").read_text()))
    Draft202012Validator.check_schema(suite.schema)
    assert suite.description and "\n" not in suite.description, f"{name}: its schema's description says what it measures, in a line"


def test_the_harness_schema_is_valid_json_schema():
    Draft202012Validator.check_schema(params.harness_schema())


@pytest.mark.parametrize("name, suite", SUITES, ids=[name for name, _ in SUITES])
def test_the_suites_folder_holds_what_the_agent_runs(name, suite):
    ranks = suite.folder / "ranks.py"
    assert (suite.folder / "__init__.py").is_file() and ranks.is_file(), f"{name}: a suite's folder holds __init__.py and ranks.py"
    defined = {node.name: node for node in ast.parse(ranks.read_text()).body if isinstance(node, ast.FunctionDef)}
    arguments = defined["run"].args if "run" in defined else None
    assert arguments and len(arguments.args) - len(arguments.defaults) <= 3 <= len(arguments.args), \
        f"{name}: ranks.py defines run(ctx, entry_params, emit)"
    assert issubclass(suite.Params, params.SampledParams) and isinstance(suite.headline_metric, str), name


def test_a_reference_to_no_harness_class_is_one_error_naming_the_classes():
    with pytest.raises(UserError) as refused:
        params.resolved({"$ref": "urn:ddpbench:schema:harness#/$defs/SweepParams", "properties": {}}, "mine/params.schema.json")
    assert str(refused.value).startswith("mine/params.schema.json: $defs/params refers to 'urn:ddpbench:schema:harness#/$defs/SweepParams'")
    assert "urn:ddpbench:schema:harness#/$defs/SweptParams" in str(refused.value)


def test_a_suites_own_keys_win_over_the_harness_parameters_key_by_key():
    definition = params.resolved({"$ref": "urn:ddpbench:schema:harness#/$defs/RepeatedParams",
                                  "properties": {"iters": {"default": 7}, "ops": {"type": "array"}}}, "mine")
    assert definition["properties"]["iters"] == {**params.harness_schema()["$defs"]["RepeatedParams"]["properties"]["iters"], "default": 7}
    assert list(definition["properties"])[:2] == ["iters", "ops"] and "cv_target" in definition["properties"]
    assert "$ref" not in definition


def test_a_bare_gpu_host_writes_the_defaults_the_plan_writes():
    """benchmarks/_agent.py fills a plan entry's defaults with json alone (no jsonschema, no yaml on a
    host that has torch and nothing else): the harness's parameters merged in as the plan has them."""
    code = ("import sys, json\nfor name in ('jsonschema', 'jsonschema_rs', 'referencing', 'yaml'):\n    sys.modules[name] = None\n"
            "sys.path.insert(0, 'benchmarks')\nimport _agent\nfrom bench import suites\n"
            "print(json.dumps({name: _agent.plan_entry(name, {})['params'] for name in suites.names()}))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    bare = json.loads(done.stdout)
    planned = with_defaults({"suites": [{"suite": name} for name, _ in SUITES]})["suites"]
    assert bare == {entry["suite"]: entry["params"] for entry in planned}
    assert bare["copy"]["iters"] == 10 and bare["collectives"]["sampling_cap_s"] == 30


def test_ddpbench_suites_lists_every_suite_with_its_parameters_types_and_defaults():
    done = cli("suites")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for name, suite in SUITES:
        (heading,) = [line for line in lines if line.startswith(f"{name}: ")]
        assert heading == f"{name}: {suite.description}"
    copy_rows = lines[lines.index(next(line for line in lines if line.startswith("copy: "))) + 1:]
    assert copy_rows[0].split()[:2] == ["directions", "list"]
    assert any(row.split()[:3] == ["iters", "integer", "10"] for row in copy_rows)  # the suite's own default over the harness's
    collectives_rows = lines[1:lines.index(next(line for line in lines if line.startswith("copy: ")))]
    assert any(row.split()[:3] == ["iters", "integer", "required"] for row in collectives_rows)
    assert any(row.split()[:3] == ["sampling_cap_s", "number", "30"] and "toward cv_target" in row for row in collectives_rows)
    listed = json.loads(cli("suites", "--json").stdout)
    assert [suite["name"] for suite in listed] == [name for name, _ in SUITES]
    for entry, (_, suite) in zip(listed, SUITES):
        assert [param["name"] for param in entry["params"]] == list(suite.schema["$defs"]["params"]["properties"])
