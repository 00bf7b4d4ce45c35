"""The reference figures (bench/common/reference.py): the link table every prediction reads, each
row sourced. A row without a source, a derived figure that no longer follows from its inputs, or a
link the table promises that is missing fails here."""
from __future__ import annotations

import json

import jsonschema
import pytest

from bench.common import reference
from bench.common.links import PCIE_LANE_GBPS
from tests.conftest import REPO

SCHEMA = json.loads((REPO / "schema" / "reference.schema.json").read_text())


def test_the_reference_follows_its_schema():
    jsonschema.Draft202012Validator(SCHEMA).validate(reference.document())


def test_a_row_without_a_source_or_basis_is_refused_by_the_schema():
    row = dict(reference.LINKS[0])
    del row["sources"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(SCHEMA).validate({**reference.document(), "links": [row]})


@pytest.mark.parametrize("row", reference.LINKS, ids=lambda row: row["name"])
def test_every_link_row_cites_sources_that_exist(row):
    assert row["sources"] and all(name in reference.SOURCES for name in row["sources"])
    if row["basis"] == "measured":  # this project's own measurement: a file of this repository says it
        paths = [reference.SOURCES[name]["path"] for name in row["sources"] if "path" in reference.SOURCES[name]]
        assert paths and all((REPO / path).is_file() for path in paths)
        assert row["curve"]


@pytest.mark.parametrize("row", [r for r in reference.LINKS if r["basis"] == "derived"], ids=lambda row: row["name"])
def test_a_derived_bandwidth_is_its_rate_times_its_factor(row):
    assert row["busbw_gbps"] == pytest.approx(row["rate_gbps"] * row["factor"], rel=2e-3)


def test_pcie_rows_take_their_rate_from_the_pci_sig_lane_rate():
    for row in reference.LINKS:
        if row["name"].startswith("pcie"):
            gen, width = row["name"][4], row["name"].split("-")[1][1:]
            assert row["rate_gbps"] == pytest.approx(PCIE_LANE_GBPS[int(gen)] * int(width), rel=1e-3)


def test_the_table_holds_every_link_the_issue_names():
    names = {row["name"] for row in reference.LINKS}
    for gen in (3, 4, 5):
        for width in (1, 4, 8, 16):
            assert {f"pcie{gen}-x{width}-p2p", f"pcie{gen}-x{width}-host"} <= names
    assert {"rtx3090-nvlink-bridge", "nvlink3", "nvlink4", "nvlink5", "ib-hdr", "ib-ndr",
            "eth-10g", "eth-25g", "eth-100g", "socket-loopback"} <= names
    assert len(names) == len(reference.LINKS)  # a name says one row


def test_measured_curves_are_this_projects_nccl_tests_figures():
    """The rows the project measured carry DESIGN.md's table, size by size (nccl-tests on 2x H200)."""
    rows = {row["name"]: row for row in reference.LINKS}
    assert rows["nvlink4"]["curve"][0] == [1 << 20, 67.5] and rows["nvlink4"]["curve"][-1] == [4 << 30, 343.3]
    assert rows["pcie5-x16-host"]["curve"][3] == [64 << 20, 27.1]
    assert rows["socket-loopback"]["curve"][-1] == [4 << 30, 3.01]
