"""The expected ranges as data: each suite's expected.json follows schema/expected.schema.json, every
range cites sources that say it (a public figure by its url, this project's measurement by a file of
this repository), a range from published figures is those figures widened by the band, and the ranges
of this project's bundles are what benchmarks/expected_ranges.py makes of them. A damaged file is one
error line."""
from __future__ import annotations

import json

import pytest

from bench import suites
from bench.errors import UserError
from bench.judging.ranges import BAND, FILE, expected, read, source_line
from benchmarks.expected_ranges import documents, dump
from tests.conftest import REPO

ROWS = expected().rows


def test_every_suite_file_follows_the_schema():
    files = [suite.folder / FILE for suite in suites.registry().values() if (suite.folder / FILE).is_file()]
    assert {path.parent.name for path in files} == {"collectives", "copy", "ddp", "fsdp"}
    for path in files:
        read(path)  # raises where the schema refuses it
    assert len(ROWS) >= 185


@pytest.mark.parametrize("row", ROWS, ids=lambda row: f"{row['suite']} {row['gpu']} {row['link']} {row['figure']}")
def test_every_expected_range_cites_sources_that_say_it(row):
    sources = expected().sources
    assert row["sources"] and all(name in sources for name in row["sources"])
    assert 0 < row["low"] < row["high"] and row["derivation"]
    if row["basis"] == "measured":  # this project's measurement: a file of this repository holds it
        paths = [sources[name]["path"] for name in row["sources"] if "path" in sources[name]]
        assert paths and all((REPO / path).is_file() for path in paths)
    else:  # a public figure: a link a reader can follow
        assert all(sources[name].get("url", "").startswith("https://") for name in row["sources"])


@pytest.mark.parametrize("row", [row for row in ROWS if "published" in row], ids=lambda row: f"{row['gpu']} {row['figure']}")
def test_a_range_of_published_figures_is_them_widened_by_the_band(row):
    assert (row["low"], row["high"]) == (pytest.approx(min(row["published"]) * (1 - BAND), abs=1e-4),
                                         pytest.approx(max(row["published"]) * (1 + BAND), abs=1e-4))


def test_this_projects_ranges_follow_from_its_bundles():
    """What benchmarks/expected_ranges.py writes is what each suite's file holds: a bundle edited, added
    or removed without writing them again fails here; the rows written by hand stay as they are."""
    made = documents()
    assert {folder.name for folder in made} == {"collectives", "copy", "ddp", "fsdp"}
    for folder, document in made.items():
        assert dump(document) == (folder / FILE).read_text(), f"{folder / FILE}: run benchmarks/expected_ranges.py --write"
    bundles = {name: source for document in made.values() for name, source in document["sources"].items() if "bundle" in source}
    assert len(bundles) >= 8  # every GPU bundle that gives a range
    for name, source in bundles.items():
        assert source_line(name).startswith(f"{name}: ddpbench bundle {source['bundle']}, plan ")
        assert f"(bundle {source['bundle']} of {source['date']} on {source['machine']}; benchmarks/results/bundles/" in source_line(name)


def test_a_damaged_expected_json_is_one_line_naming_the_file_and_the_field(tmp_path):
    path = tmp_path / FILE
    row = {"figure": "x_gbps", "gpu": "NVIDIA H200", "link": "nvlink4", "low": 1.0, "high": 2.0, "basis": "measured",
           "sources": ["ddpbench-h200x2-nccl-tests"], "derivation": "a test's"}
    path.write_text(json.dumps({"ranges": [row]}))
    with pytest.raises(UserError) as refused:
        read(path)
    said = str(refused.value)
    assert said.startswith(f"{path}: ranges[0]: ") and '"key" is a required property' in said and "\n" not in said
    path.write_text("{")
    with pytest.raises(UserError, match="not valid JSON"):
        read(path)
