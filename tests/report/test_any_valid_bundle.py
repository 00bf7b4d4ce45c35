"""Any bundle the schema accepts survives: sealed bundles drawn from schema/bundle.schema.json
(tests/support/schema_strategy.py), and the real CPU bundle with its samples and derived figures
replaced by values the schema allows (0, the smallest float, 1e15), go through `validate`,
`report` (alone and among good bundles) and `compare` (both ways) as a user runs them, in this
process: none may end in a traceback, and the report may skip none of them as one it fails on.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench import schemas
from bench.bundle import seal
from bench.cli import main
from tests.support.schema_strategy import Derived

EXAMPLES = 20  # each runs two reports and three compares: about 35 s on two cores

# Samples as the schema allows them, the edges most: none negative, none beyond 1e15.
SAMPLE = st.sampled_from([0.0, 5e-324, 1e-300, 1.0, 1e15]) | st.floats(0, 1e15)


@st.composite
def with_extreme_samples(draw, real: dict) -> dict:
    """The real bundle, each metric's samples and each derived figure drawn anew within the schema."""
    bundle = copy.deepcopy(real)
    for host in bundle["hosts"]:
        for run in host["runs"]:
            for metric in run["metrics"].values():
                metric["samples"] = draw(st.lists(SAMPLE, min_size=1, max_size=4))
            for name in run.get("derived", {}):  # a predicted step time is never negative (the schema says)
                run["derived"][name] = draw(st.none() | st.floats(0 if name == "predicted_step_time_s" else -1e15, 1e15))
    return bundle


def bundles(real: dict) -> st.SearchStrategy:
    drawn = Derived({("plan",): st.just(real["plan"])}).of("bundle")
    return st.one_of(drawn, with_extreme_samples(real)).map(lambda bundle: seal({k: v for k, v in bundle.items() if k != "sha256"}))


def ddpbench(*args) -> tuple[int, str]:
    """bench.cli.main as `ddpbench ARGS` runs it: (exit status, stderr); any exception goes up."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        status = main([str(arg) for arg in args])
    return status, err.getvalue()


@pytest.fixture(scope="module")
def good(fleet) -> list[Path]:
    return [fleet["cpu"], fleet["rig-3090"]]


@pytest.fixture(scope="module")
def real(fleet) -> dict:
    return json.loads(fleet["cpu"].read_text())


def test_any_bundle_the_schema_accepts_is_validated_reported_and_compared(real, good):
    @settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
    @given(bundles(real))
    def survives(bundle: dict) -> None:
        assert schemas.fast_validator("bundle").is_valid(bundle), schemas.first_problem(bundle, "bundle")
        with tempfile.TemporaryDirectory() as scratch:
            path = Path(scratch) / "drawn" / "bundle.json"
            path.parent.mkdir()
            path.write_text(json.dumps(bundle))
            status, err = ddpbench("validate", path)
            assert status == 0, err
            for sources in ([path], [*good, path]):
                status, err = ddpbench("report", *sources, "--out", Path(scratch) / "report")
                assert status == 0 and "fails on this bundle" not in err, err
            for pair in ([good[0], path], [path, good[0]], [path, path]):
                status, err = ddpbench("compare", *pair, "--out", Path(scratch) / "verdict")
                assert status in (0, 1, 3, 4), err

    survives()
