"""Bencher Metric Format (`ddpbench export --format bmf`): {benchmark: {measure: {value, lower_value,
upper_value}}}, a benchmark per run and a measure per figure: its median, p5 and p95
(https://bencher.dev/docs/reference/bencher-metric-format/)."""

from __future__ import annotations

import json

from bench.formats.figures import figures


def document(bundle: dict) -> dict:
    found: dict = {}
    for placed in figures(bundle):
        figure = placed.figure
        measure = {"value": figure.value}
        if figure.spread and None not in figure.spread:
            measure.update(lower_value=figure.spread[0], upper_value=figure.spread[1])
        found.setdefault(placed.name(), {})[figure.name.replace("_", "-")] = measure
    return found


def text(bundle: dict) -> str:
    return json.dumps(document(bundle), indent=1, allow_nan=False) + "\n"
