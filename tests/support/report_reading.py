"""A report read back as a reader has it: its Markdown tables, by section, and what each figure drew
(NAME.json beside NAME.png and NAME.svg), with a table cell's "median [p5, p95] unit n=N" as numbers;
and the checks that set a figure against its table (check_*), for any report's folder."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bench.report.answer import TITLE

TIME_UNITS = {"s": 1.0, "ms": 1e-3, "µs": 1e-6, "ns": 1e-9}
SPREAD = re.compile(r"^(-?[\d.]+)%? \[(-?[\d.]+|-), (-?[\d.]+|-)\](?: (s|ms|µs|ns))?")


def section(md: str, heading: str) -> str:
    """The text of the section that starts at this heading (any level), up to the next heading of its level or above."""
    lines = md.splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip("#").strip() == heading and line.startswith("#"))
    level = len(lines[start]) - len(lines[start].lstrip("#"))
    end = next((i for i in range(start + 1, len(lines))
                if lines[i].startswith("#") and len(lines[i]) - len(lines[i].lstrip("#")) <= level), len(lines))
    return "\n".join(lines[start:end])


def tables(text: str) -> list[list[dict]]:
    """Every Markdown table in text, each a list of rows keyed by the table's header."""
    found, block = [], []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            block.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
            continue
        if len(block) > 2:
            header = block[0]
            found.append([dict(zip(header, row)) for row in block[2:]])
        block = []
    return found


def table_with(text: str, column: str) -> list[dict]:
    """The one table of text that has this column."""
    (found,) = [table for table in tables(text) if table and column in table[0]]
    return found


def spread(cell: str, seconds: bool = False) -> tuple:
    """(median, low, high) of "20.2 [17.0, 29.3] ms n=12" or "93.8% [93.1, 94.4]"; a time in seconds
    where asked (the cell's unit applied); an end printed "-" is None."""
    found = SPREAD.match(cell)
    assert found, f"not a figure with its spread: {cell!r}"
    scale = TIME_UNITS[found.group(4)] if seconds else 1.0
    return tuple(None if value == "-" else float(value) * scale for value in found.group(1, 2, 3))


def figures(folder: Path) -> dict:
    """stem -> what that figure drew (bench.report.plots.figure_data), for every figure of a report folder."""
    return {path.stem: json.loads(path.read_text()) for path in sorted(folder.glob("*.json"))}


def axis_unit(label: str) -> float:
    """The seconds in one unit of an axis labelled "... (ms)"."""
    return TIME_UNITS[re.search(r"\((s|ms|µs|ns)\)$", label).group(1)]


def close(a: "float | None", b: "float | None", digits: int = 4) -> bool:
    """Whether a drawn value and a printed one agree to the digits the table prints (significant figures)."""
    if a is None or b is None:
        return a is b
    return abs(a - b) <= 0.51 * 10 ** -(digits - 1) * max(abs(a), abs(b)) + 1e-12


ANSWER_FIGURE = "answer-throughput-lost"
LEFT_OUT = re.compile(r"The points of (\d+) more workloads? \((.*?)\) are not drawn")


def column(row: dict, *names: str) -> str:
    """The cell of the first of these columns the row has (a CPU-only report names some columns otherwise)."""
    return next(row[name] for name in names if name in row)


LOST_INTERVAL = re.compile(r"lost \[(-?[\d.]+), (-?[\d.]+)\]")


def check_answer_lines(md: str) -> int:
    """Each interval of the share lost in the verdict lines is one of the answer table's verdict cells (those
    check_answer_figure sets against the figure), as printed there. Returns the intervals checked."""
    answer = section(md, TITLE)
    cells = {interval for row in table_with(answer, "verdict: throughput lost")
             for interval in LOST_INTERVAL.findall(row["verdict: throughput lost"])}
    said = [interval for line in answer.splitlines() if line.startswith("- ") for interval in LOST_INTERVAL.findall(line)]
    assert set(said) <= cells, (said, cells)
    return len(said)


def check_answer_figure(md: str, drawn: dict) -> int:
    """Each point of the answer's figure is a row of the answer's table at its series' largest global
    batch, and each such row is a point: lost = 100 - scaling, its interval the scaling's turned
    around, flagged where the row is. Returns the points checked."""
    rows = table_with(section(md, TITLE), "verdict: throughput lost")
    largest = {}
    for row in rows:
        key = (row[next(iter(row))], row["workload"], row["ranks"], column(row, "link NCCL used", "transport used"))
        if row["scaling % [95% CI]"] != "-" and int(row["global batch"]) >= int(largest.get(key, {"global batch": 0})["global batch"]):
            largest[key] = row
    points = [(panel["title"], value) for panel in drawn[ANSWER_FIGURE]["axes"] for value in panel["values"]]
    # A report draws the first few workloads; its caption counts, and names, those it leaves out.
    shown = {value["group"].split(" · ")[0] for _, value in points}
    missing = sorted({workload for _, workload, _, _ in largest} - shown)
    left = LEFT_OUT.search(section(md, TITLE))
    assert len(missing) == (int(left.group(1)) if left else 0), (missing, left and left.group(0))
    if left and len(missing) <= 3:
        assert sorted(left.group(2).split("; ")) == missing
    largest = {key: row for key, row in largest.items() if key[1] in shown}
    assert len(points) == len(largest), (len(points), len(largest))
    for (machine, workload, ranks, link), row in largest.items():
        group = f"{workload} · {ranks} · global batch {row['global batch']}"
        # A figure row is marked host-paced where any of its links' rows is.
        paced = any(column(r, "paced by (GPU busy share)", "paced by").startswith("host-paced") for (m, w, k, _), r in largest.items()
                    if (m, w, k) == (machine, workload, ranks) and r["global batch"] == row["global batch"])
        group += " · host-paced: measures the host" if paced else ""
        (value,) = [v for title, v in points if title == machine and v["label"] == link and v["group"].removesuffix(" ⚠") == group]
        scaling, low, high = spread(row["scaling % [95% CI]"])
        # To the 0.1 the table prints.
        assert value["value"] == pytest.approx(100 - scaling, abs=0.051)
        assert value["low"] == pytest.approx(100 - high, abs=0.051) and value["high"] == pytest.approx(100 - low, abs=0.051)
        said = row["verdict: throughput lost"]  # "noticeable: 6.2% lost [..]", or "none lost (1.8% above perfect scaling, lost [..])"
        above = re.search(r"none lost \(([\d.]+)% above perfect scaling", said)
        lost = -float(above.group(1)) if above else float(re.search(r"([\d.]+)% lost", said).group(1))
        assert value["value"] == pytest.approx(lost, abs=0.051)
        # The words give the interval the figure draws, as measured: an end below 0 is printed so, not clamped.
        (low, high), = LOST_INTERVAL.findall(said) or [(None, None)]
        assert (value["low"], value["high"]) == (pytest.approx(float(low), abs=0.051), pytest.approx(float(high), abs=0.051)), said
        if "⚠" in row["scaling % [95% CI]"]:
            assert value["group"].endswith(" ⚠")
    return len(points)


def ddp_rows(md: str) -> list[dict]:
    return table_with(section(md, "DDP training"), "accum")


def _ranks(row: dict) -> str:
    return column(row, "GPUs or processes", "processes")


def _per_sample(row: dict) -> str:
    return next(cell for name, cell in row.items() if name.startswith("per-sample time ×"))


def check_per_sample_figures(md: str, drawn: dict) -> int:
    """Each measured point of each per-sample figure (median and p5-p95) is the per-sample cell of a
    DDP table row of its global batch and rank count. Returns the points checked."""
    rows = ddp_rows(md)
    checked = 0
    for name in (name for name in drawn if name.startswith("per-sample-")):
        (panel,) = drawn[name]["axes"]
        unit = axis_unit(panel["ylabel"])
        for line in (line for line in panel["lines"] if not line["label"].startswith("predicted")):
            ranks = line["label"].rsplit(" · ", 1)[1].removesuffix(" (baseline)")  # "2 GPUs", "1 process"
            for batch, median, low, high in line["points"]:
                cells = [spread(_per_sample(row), seconds=True) for row in rows if row["global batch"] == f"{batch:g}" and _ranks(row) == ranks]
                assert any(close(median * unit, m) and close(low * unit, lo) and close(high * unit, hi) for m, lo, hi in cells), \
                    (name, line["label"], batch, median, cells)
                checked += 1
    return checked


def check_scaling_bars(md: str, drawn: dict) -> int:
    """Each bar of the scaling-efficiency figure is the scaling cell of its DDP table row (workload,
    machine and transport, global batch, ranks), and each multi-rank row with a scaling is a bar.
    Returns the bars."""
    rows = [row for row in ddp_rows(md) if not row["transport"].endswith("(baseline)") and row["scaling % [95% CI]"] != "-"]
    bars = [(panel["title"], bar) for panel in drawn["scaling-efficiency"]["axes"] for bar in panel["values"]]
    assert len(bars) == len(rows)
    for workload, bar in bars:
        batch, ranks = re.fullmatch(r"batch (\d+)\n(.+)", bar["group"]).groups()

        def labels(row: dict) -> set:  # the series by host, or by hardware alone where the report groups so; "(busy)" after both
            host, busy = row["host"].removesuffix(" (busy)"), " (busy)" * row["host"].endswith(" (busy)")
            hardware = column(row, "GPUs and link", "hardware") + busy
            return {f"{hardware} · {row['transport']}", f"{host} · {hardware} · {row['transport']}"}

        (row,) = [row for row in rows if row["global batch"] == batch and _ranks(row) == ranks and bar["label"] in labels(row)
                  and workload.startswith(f"{row['model']}, {row['recipe']}")]
        median, low, high = spread(row["scaling % [95% CI]"])
        assert (bar["value"], bar["low"], bar["high"]) == pytest.approx((median, low, high), abs=0.051)
    return len(bars)


PREDICTED_FIGURE = "predicted-step-time"
MODEL = re.compile(r"^([-\d.]+) \+ ([-\d.]+) = ([-\d.]+) \(")


def check_prediction_figure(md: str, drawn: dict) -> int:
    """Each row of the measured-against-predicted figure is the compute + exposed communication model of the rows
    of "Predicted against measured" of its host and configuration (every launch of it: one model, its inputs
    pooled), its compute and all-reduce as the cell splits them; and each such row is drawn. Returns the rows."""
    (panel,) = drawn[PREDICTED_FIGURE]["axes"]
    unit = axis_unit(panel["xlabel"])
    values = {(v["group"], v["label"]): v["value"] for v in panel["values"]}
    rows = [row for row in table_with(section(md, "Predicted against measured"), "link replayed")]
    model = next(name for name in rows[0] if name.startswith("compute + exposed communication model ms"))
    ranks = next(name for name in rows[0] if name in ("GPUs", "processes", "GPUs or processes"))
    drawn_rows = 0
    for group in dict.fromkeys(group for group, _ in values):
        where, shape = group.split(" — ")
        host, preset = where.split(" · ")[0], where.split(" · ")[-1].split(" ")[0]  # "default via P2P": preset default
        found = re.fullmatch(r"(\S+) \S+, batch (\d+), (\d+) \S+", shape)
        assert found, group
        model_name, batch, count = found.groups()
        mine = [row for row in rows if (row["host"], row["transport"], row["model"], row["global batch"], row[ranks])
                == (host, preset, model_name, batch, count)]
        assert mine, (group, rows)
        for row in mine:
            compute, allreduce, step = map(float, MODEL.match(row[model]).groups())
            assert close(values[group, "predicted: compute"] * unit, compute * 1e-3), (group, row[model])
            assert close(values[group, "predicted: all-reduce"] * unit, allreduce * 1e-3), (group, row[model])
            assert close(values[group, "predicted"] * unit, step * 1e-3), (group, row[model])
        drawn_rows += len(mine)
    assert drawn_rows == len([row for row in rows if row[model] != "-"])
    return drawn_rows
