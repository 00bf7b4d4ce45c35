"""Merging bundles of different schema versions, hosts and runs into one comparison."""

from __future__ import annotations

import copy

import pytest

from bench.bundle import MIGRATIONS, read_bundle, seal
from bench.errors import UserError
from bench.report.merge import configuration, merge
from bench.suites.training.report import workload
from tests.support.report_variants import make_variant, write


def version_0(bundle: dict) -> dict:
    """The bundle as a made-up version 0 wrote it: the hosts were called "machines"."""
    old = {k: v for k, v in copy.deepcopy(bundle).items() if k not in ("hosts", "sha256")}
    return seal({**old, "schema_version": 0, "machines": bundle["hosts"]})


def from_version_0(document: dict) -> dict:
    new = {k: v for k, v in document.items() if k != "machines"}
    return {**new, "schema_version": "1.0", "hosts": document["machines"]}


def test_an_older_bundle_is_read_through_its_migration(real_bundle, tmp_path, monkeypatch):
    old = version_0(real_bundle)
    path = write(tmp_path / "old.json", old)
    with pytest.raises(UserError, match=r"field schema_version: 0 is major version 0, which this ddpbench does not read \(1\.x\)"):
        read_bundle(path)
    monkeypatch.setitem(MIGRATIONS, 0, from_version_0)
    migrated = read_bundle(path)
    assert migrated["schema_version"] == "1.0"
    assert migrated["hosts"] == real_bundle["hosts"]
    assert migrated["sha256"] == old["sha256"]  # still names the bundle as it was published


def test_versions_without_a_migration_are_refused(real_bundle, tmp_path, monkeypatch):
    monkeypatch.setitem(MIGRATIONS, 0, from_version_0)
    for version in (2, "2.0", "3.1"):
        path = write(tmp_path / "v.json", seal({**real_bundle, "schema_version": version}))
        with pytest.raises(UserError, match=rf"field schema_version: {version!r} is major version \d, which this ddpbench does not read \(0\.x, 1\.x\)"):
            read_bundle(path)
    for version in (-1, 1.0, "1", "1.01", "v1.1", " 1.1"):
        path = write(tmp_path / "v.json", seal({**real_bundle, "schema_version": version}))
        with pytest.raises(UserError, match=r"field schema_version: .* is not a MAJOR\.MINOR version such as '1\.\d+'"):
            read_bundle(path)


def test_a_newer_minor_is_read_without_the_fields_it_adds(real_bundle, tmp_path):
    """A reader of 1.x reads 1.99, passing over what it does not know; its own minor or an older one
    with an unknown field is refused, as a changed bundle."""
    newer = copy.deepcopy(real_bundle)
    newer["hosts"][0]["runs"][0]["transport"]["seen_by_a_later_tool"] = {"x": 1}
    newer["stars"] = 5
    read = read_bundle(write(tmp_path / "newer.json", seal({**newer, "schema_version": "1.99"})))
    assert "stars" not in read and "seen_by_a_later_tool" not in read["hosts"][0]["runs"][0]["transport"]
    assert read["hosts"][0]["runs"][0]["metrics"] == real_bundle["hosts"][0]["runs"][0]["metrics"]
    for version in ("1.1", "1.0", 1):
        with pytest.raises(UserError, match=r"field hosts\[0\]\.runs\[0\]\.transport: Additional properties are not allowed "
                                            r"\('seen_by_a_later_tool' was unexpected\)"):
            read_bundle(write(tmp_path / "same.json", seal({**newer, "schema_version": version})))


def test_hosts_named_alike_on_different_machines_are_told_apart(real_bundle):
    a = make_variant(real_bundle, "gpu-box", hardware="4090-pcie-x4")
    b = copy.deepcopy(a)
    b["hosts"][0]["fingerprint"]["host"]["hostname_sha256"] = "f" * 16
    names = {host.name for host in merge([a, seal(b)]).hosts}
    assert names == {f"gpu-box ({a['hosts'][0]['fingerprint']['host']['hostname_sha256'][:6]})", "gpu-box (ffffff)"}


def test_runs_of_one_host_in_two_bundles_pool_their_samples(real_bundle):
    first = make_variant(real_bundle, "gpu-box", hardware="3090-nvlink", run_id="20260101T000000Z-000001")
    second = make_variant(real_bundle, "gpu-box", hardware="3090-nvlink", run_id="20260101T000000Z-000002")
    comparison = merge([first, second])
    assert comparison.grouped_by == "host"
    assert len({entry.series for entry in comparison.runs}) == 1
    assert comparison.shared_configurations == comparison.configurations > 0


def test_runs_trained_with_another_recipe_are_another_workload(real_bundle):
    """bf16 weights, checkpointing and Adafactor change what a step costs: never pooled with the plain recipe."""
    plain = make_variant(real_bundle, "gpu-box", hardware="3090-nvlink", run_id="20260101T000000Z-000001")
    lean = copy.deepcopy(plain)
    lean["run_id"] = "20260101T000000Z-000002"
    for run in lean["hosts"][0]["runs"]:
        if run["suite"] == "ddp":
            run["params"].update(precision="bf16", weights_dtype="bfloat16", activation_checkpointing=True, optimizer="adafactor")
    comparison = merge([plain, seal(lean)])
    ddp_entries = [entry for entry in comparison.runs if entry.run.suite == "ddp"]
    assert {workload(entry).recipe for entry in ddp_entries} == {"fp32", "bf16, bf16 weights, checkpointing, adafactor"}
    assert {workload(entry).stem for entry in ddp_entries} == {"tiny-fp32-s32-mb2", "tiny-bf16-bf16-weights-checkpointing-adafactor-s32-mb2"}
    assert len({configuration(entry.run) for entry in ddp_entries}) == 2 * len({configuration(e.run) for e in ddp_entries if e.params["precision"] == "fp32"})


def test_gradients_on_copy_engines_are_their_own_series(real_bundle):
    """allreduce copy_engine carries the gradients past NCCL's transport: never pooled with NCCL's runs."""
    nccl = make_variant(real_bundle, "gpu-box", hardware="3090-nvlink", run_id="20260101T000000Z-000001")
    copy_engine = copy.deepcopy(nccl)
    copy_engine["run_id"] = "20260101T000000Z-000002"
    for run in copy_engine["hosts"][0]["runs"]:
        run["params"]["allreduce"] = "copy_engine"  # collectives runs have no such parameter: theirs stays
    comparison = merge([nccl, seal(copy_engine)])
    ddp_series = {entry.series.transport for entry in comparison.runs if entry.run.suite == "ddp"}
    collective_series = {entry.series.transport for entry in comparison.runs if entry.run.suite == "collectives"}
    assert ddp_series == {"default via copy engines", *collective_series}
    assert not any("copy engines" in name for name in collective_series)
