"""benchmarks/launch_costs.py: the cost model's fixed costs and host-paced micro-batches, fitted from bundles."""
from __future__ import annotations

import copy

import pytest

from bench.bundle import read_bundle
from benchmarks import launch_costs
from bench.suites.training.cost import STEP_OVERHEAD_S
from tests.conftest import REPO

OVERHEAD_S = STEP_OVERHEAD_S["gpu"]  # a step's beside its micro-batches, which the fit takes off
SHARDED_H100 = REPO / "benchmarks/results/bundles_set_aside/20261207T091030Z-5c072e.bundle.json.gz"  # seed001-sharded, 1x H100


def _slower(bundle: dict, pace: float, by: float) -> dict:
    """The bundle as a host whose Python call takes `pace` ns would have measured it, its CPU work (its launches'
    phases, its micro-batches) `by` times longer."""
    slower = copy.deepcopy(bundle)
    for host in slower["hosts"]:
        host["fingerprint"]["cpu"]["python_call_ns"] = pace
        for launch in host["launches"]:
            launch["phases"] = {name: seconds * by for name, seconds in (launch.get("phases") or {}).items()}
        for run in host["runs"]:
            samples = ((run.get("metrics") or {}).get("step_time_s") or {}).get("samples")
            if samples:
                run["metrics"]["step_time_s"]["samples"] = [OVERHEAD_S + (s - OVERHEAD_S) * by for s in samples]
    return slower


def test_hosts_of_different_cpu_pace_are_fitted_at_their_median_pace():
    """Two hosts whose CPUs ran the same work 1.5x apart, as lent H100s did: each one's figures are scaled to
    the median of their Python calls, so both fit one figure, which is kept with that pace."""
    bundle = read_bundle(SHARDED_H100)
    fast, slow = _slower(bundle, 100.0, 1.0), _slower(bundle, 150.0, 1.5)
    alone, both = launch_costs.measured([fast])["gpu"], launch_costs.measured([fast, slow])["gpu"]
    assert alone["python_call_ns"] == 100.0 and both["python_call_ns"] == 125.0
    assert both["start_s"] == pytest.approx(1.25 * alone["start_s"], rel=0.01)
    setup = "ddp gpt2-large"
    assert both["eager_micro_batches"][setup]["micro_batch_s"] == pytest.approx(1.25 * alone["eager_micro_batches"][setup]["micro_batch_s"], rel=0.01)
    assert "their hosts' Python call 100-150 ns, the figures scaled to 125 ns" in both["source"]
    unknown = launch_costs.measured([bundle])["gpu"]  # a bundle from before the fingerprint timed the call
    assert unknown["python_call_ns"] is None and unknown["start_s"] == alone["start_s"]
