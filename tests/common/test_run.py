"""A run record read through its view: the figures come off the bundle's own dict, nothing is copied
or changed, and a field an older bundle lacks reads as the schema's default."""

from __future__ import annotations

import copy

import pytest

from bench.common.run import Run
from bench.common.stats import metric

RECORD = {
    "suite": "ddp", "params": {"model": "gpt2", "global_batch": 16}, "world_size": 2, "status": "ok",
    "launch_id": "01-ddp-default-ws2", "transport": {"preset": "default", "backend": "nccl", "nccl_used": ["P2P"]},
    "metrics": {"step_time_s": metric([0.3, 0.1, 0.2])},
}


def test_a_run_reads_its_record_and_changes_nothing():
    record = copy.deepcopy(RECORD)
    run = Run(record)
    assert (run.suite, run.world_size, run.status, run.ok, run.preset, run.launch_id) == (
        "ddp", 2, "ok", True, "default", "01-ddp-default-ws2")
    assert run.params is record["params"] and run.transport is record["transport"]  # the dict itself, no copy
    assert run.median("step_time_s") == 0.2 and run.samples("step_time_s") == [0.3, 0.1, 0.2]
    assert run.median("busbw_gbps") is None and run.samples("busbw_gbps") == []
    assert record == RECORD
    with pytest.raises(AttributeError):
        run.world_size = 4


def test_a_figure_set_on_the_record_later_is_read():
    """A suite derives figures onto the records of the runs it reads: a view made before sees them."""
    record = copy.deepcopy(RECORD)
    run = Run(record)
    assert run.derived == {} and run.notes == [] and run.warnings == []
    record["derived"] = {"scaling_efficiency_fraction": 0.9}
    record["notes"] = ["no prediction"]
    assert run.derived["scaling_efficiency_fraction"] == 0.9 and run.notes == ["no prediction"]


def test_an_older_bundles_run_reads_as_the_schema_says():
    """A bundle from before repeats, GPUs and env were recorded: repeat 1, no GPUs named, no env."""
    run = Run(copy.deepcopy(RECORD))
    assert run.repeat == 1 and run.gpus is None and run.env == {} and run.timeline == {} and run.gpu_counters is None


def test_the_ranks_record_is_read_with_its_launchs_backend():
    """While a launch runs, the record its ranks wrote has no transport yet: the launch's backend says
    whether they computed on GPUs."""
    record = {key: value for key, value in RECORD.items() if key != "transport"}
    assert not Run(record, backend="gloo").on_gpu and Run(record, backend="nccl").on_gpu
    assert not Run({**RECORD, "transport": {**RECORD["transport"], "backend": "gloo"}}).on_gpu
