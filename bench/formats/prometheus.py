"""Prometheus' text exposition format 0.0.4 (`ddpbench export --format prometheus`): a gauge family per
figure, ddpbench_FIGURE, a sample per run and quantile (0.5 its median, 0.05 and 0.95 its p5 and p95),
labelled with what tells the run apart; for a textfile collector or a push gateway."""

from __future__ import annotations

import re

from bench.common.escape import prometheus
from bench.formats.figures import figures

PREFIX = "ddpbench_"
QUANTILES = (("0.05", 0), ("0.5", None), ("0.95", 1))  # the figure's spread index, None: its value


def text(bundle: dict) -> str:
    families: dict = {}
    for placed in figures(bundle):
        figure = placed.figure
        name = PREFIX + re.sub(r"[^a-zA-Z0-9_]", "_", figure.name)
        labels = {"run_id": bundle["run_id"], "host": placed.host, "run": placed.label, "variant": placed.variant, "link": placed.link,
                  "ranks": figure.key.get("ranks"), "repeat": placed.repeat,
                  **{key: figure.key[key] for key in ("size_bytes", "dtype") if figure.key.get(key) is not None}}
        family = families.setdefault(name, (figure, []))[1]
        for quantile, index in QUANTILES:
            value = figure.value if index is None else (figure.spread or (None, None))[index]
            if value is not None:
                shown = ",".join(f'{key}="{prometheus(item)}"' for key, item in {**labels, "quantile": quantile}.items())
                family.append(f"{name}{{{shown}}} {value!r}")
    lines = []
    for name, (figure, samples) in families.items():
        better = "higher" if figure.higher_is_better else "lower"
        lines += [f"# HELP {name} {figure.name} in {figure.unit} ({better} is better): the run's median (quantile 0.5), "
                  "p5 and p95", f"# TYPE {name} gauge", *samples]
    return "\n".join(lines) + "\n" if lines else ""
