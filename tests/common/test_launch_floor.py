"""The launch-to-launch floor is data (bench/common/launch_floor.json): valid against its schema, what
benchmarks/launch_floor.py writes from the repository's bundles, never zero, and looked up by the
kind of run: the most specific entries pooled, a device's default where none matches, saying so."""

from __future__ import annotations

import importlib.util
import json
import math

import jsonschema
import pytest

from bench.common import launch_floor
from bench.common.launch_floor import Kind, floor_for
from tests.conftest import REPO

SCHEMA = json.loads((REPO / "schema" / "launch_floor.schema.json").read_text())
MiB = 1 << 20


def script():
    spec = importlib.util.spec_from_file_location("launch_floor_script", REPO / "benchmarks" / "launch_floor.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_shipped_floor_follows_its_schema_and_is_never_zero():
    table = launch_floor.table()
    jsonschema.Draft202012Validator(SCHEMA).validate(table)
    assert table["floors"] and all(entry["spread_fraction"] >= script().LEAST for entry in table["floors"])


@pytest.mark.slow
def test_the_shipped_floor_is_what_its_script_writes_from_the_bundles():
    """One source: the file is the script's output over benchmarks/results/bundles/, never edited by hand."""
    writer = script()
    assert writer.document(sorted(writer.BUNDLES.glob("*.json*"))) == launch_floor.table()


def test_a_kind_measured_on_two_machines_pools_their_floors_by_degrees_of_freedom():
    entries = [e for e in launch_floor.table()["floors"]
               if e["match"] == {"device": "gpu", "preset": "default", "nodes": "one", "metric": "busbw_gbps", "size_bytes_below": 64 * MiB}]
    assert len(entries) >= 2
    floor = floor_for(Kind("gpu", "default", "one", "busbw_gbps", 4 * MiB))
    df = sum(e["df"] for e in entries)
    assert floor.df == df and floor.measured
    assert floor.fraction == pytest.approx(math.sqrt(sum(e["df"] * e["spread_fraction"] ** 2 for e in entries) / df))
    assert all(e["source"]["says"] in floor.source for e in entries)
    # From 64 MiB up, the other band's.
    assert floor_for(Kind("gpu", "default", "one", "busbw_gbps", 256 * MiB)).fraction < floor.fraction


def test_a_kind_nobody_measured_takes_its_devices_default_and_says_so():
    floor = floor_for(Kind("gpu", "p2p_off", "one", "busbw_gbps", 4 * MiB))
    default = launch_floor.table()["defaults"]["gpu"]
    assert not floor.measured and floor.fraction == default["spread_fraction"] and floor.df == default["df"]
    assert floor.source == f"GPU p2p_off one node busbw_gbps at 4 MiB: none measured, a default: {default['why']}"
    assert not floor_for(Kind("cpu", "default", "one", "copy_gbps", 4 * MiB)).measured
