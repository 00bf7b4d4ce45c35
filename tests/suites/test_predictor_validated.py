"""The predictor's validated error as data: bench/suites/ddp/predictor_error.json follows its schema and is what
benchmarks/predictor_error.py --write makes of the published bundles, a column never stands on fewer than 3
launches, a prediction's report row says the error of runs like it (or "unvalidated"), and a damaged file is one
error line. The path of a run is what NCCL said it used."""
from __future__ import annotations

import json

import pytest

from bench.common.run import Run
from bench.errors import UserError
from bench.suites.ddp.predict import predict
from bench.suites.ddp.predict.topology import REPORT_LINKS
from bench.suites.ddp.predict.validated import FILE, MIN_LAUNCHES, UNVALIDATED, read, run_path, table
from benchmarks.predictor_error import document, dump
from tests.conftest import REPO

H100_SEED002 = REPO / "benchmarks" / "results" / "bundles" / "20261125T212254Z-56d161.bundle.json"


def test_the_table_follows_its_schema_and_from_the_published_bundles():
    """A bundle added, or a change of the predictor's model, without writing the table again fails here: its diff
    says how the error moved."""
    read(FILE)
    assert dump(document()) == FILE.read_text(), f"{FILE}: run benchmarks/predictor_error.py --write"


def test_every_column_stands_on_enough_launches_and_cites_bundles_of_its_machine():
    rows, sources = table(), read(FILE)["sources"]
    assert rows  # the 2x H100 bundles give 2 GPUs over NVLink, host memory and sockets
    for row in rows:
        columns = [row[name] for name in ("from_one_gpu", "from_own_steps") if name in row]
        assert columns and all(c["launches"] >= MIN_LAUNCHES and c["least"] <= c["mean"] <= c["most"] for c in columns)
        assert row["sources"] and all(sources[name]["machine"] == row["machine"] for name in row["sources"])
    # one launch each, the 4x H200 smoke plan's 2 emulated nodes are no row
    assert not [row for row in rows if row["gpus"] == 4]


def test_a_prediction_on_a_validated_link_says_its_error_and_elsewhere_unvalidated():
    (host,) = predict([json.loads(H100_SEED002.read_text())], [*REPORT_LINKS, "25,10"], scaling=None)
    said = {p.link: p.like for p in host.links_predicted}
    assert said["nvlink4"].endswith("launches, 2x NVIDIA H100 80GB HBM3, NVLink NV18") and "%" in said["nvlink4"]
    assert said["eth-25g"] == UNVALIDATED and said["25,10"] == UNVALIDATED  # 2 nodes of 1 GPU; a link of the user's own
    # An NVLink and a host-memory path were validated on H100s: never an RTX 3090's bridge or a PCIe x1 box.
    assert said["rtx3090-nvlink-bridge"] == UNVALIDATED and said["pcie4-x1-host"] == UNVALIDATED
    validated = {row["link"] for row in table()}
    assert {link for link, like in said.items() if like != UNVALIDATED} <= validated
    assert all(p.like == "" for p in host.predicted if p.measured is not None)


@pytest.mark.parametrize("transport, world_size, nodes, path", [
    ({"nccl_used": ["P2P"]}, 2, 1, "nvlink"),
    ({"nccl_used": ["SHM"]}, 2, 1, "host_memory"),
    ({"nccl_used": ["NET/Socket"]}, 4, 1, "net_socket"),
    ({"nccl_used": ["NET/Socket", "P2P"], "nodes": {"inside": ["P2P"], "between": ["NET/Socket"]}}, 4, 2, "nvlink+net_socket"),
    ({"nccl_used": ["NET/Socket"], "nodes": {"inside": [], "between": ["NET/Socket"]}}, 2, 2, "net_socket"),
    ({"nccl_used": []}, 2, 1, None),  # gloo: no path NCCL named
    ({"nccl_used": ["P2P", "SHM"]}, 4, 1, None),  # two paths on one node: no one path
])
def test_a_runs_path_is_what_nccl_said_it_used(transport, world_size, nodes, path):
    assert run_path(Run({"transport": transport, "world_size": world_size}), "nvlink", nodes) == path


def test_a_damaged_table_is_one_line_naming_the_file_and_the_field(tmp_path):
    path = tmp_path / "predictor_error.json"
    path.write_text(json.dumps({"sources": {}, "errors": [{"machine": "m", "gpu": "g", "gpus": 1, "nodes": 1, "path": "nvlink",
                                                            "link": "nvlink4", "algorithm": None, "sources": ["x"]}]}))
    with pytest.raises(UserError) as refused:
        read(path)
    said = str(refused.value)
    assert said.startswith(f"{path}: errors[0]") and "benchmarks/predictor_error.py --write" in said and "\n" not in said
