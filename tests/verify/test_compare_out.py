"""compare writes its verdict where --out says (default results/), never beside the bundles it reads:
two published bundles compared from a read-only folder leave that folder as it was. What an
inconclusive compare advises, followed, gives a verdict; its floors are one line after the table."""

from __future__ import annotations

import json
import re
import shutil
import stat
from pathlib import Path

from bench import suites
from bench.bundle import seal
from bench.common.transports import with_setting
from bench.verify.compare import RunVerdict, configurations
from bench.verify.verdict import table
from tests.conftest import REPO
from tests.support.cli_in_process import ddpbench

PUBLISHED = REPO / "benchmarks" / "results" / "bundles"
# Two runs of one plan on one 2x H100: comparable, run by run.
ORIGINAL, NEW = "20261125T213922Z-6e20a7.bundle.json", "20261125T214225Z-2c5662.bundle.json"


def _listing(folder: Path) -> dict:
    return {path.name: (path.stat().st_size, path.stat().st_mtime_ns) for path in folder.iterdir()}


def test_compare_of_bundles_in_a_read_only_folder_writes_only_into_out(tmp_path):
    held = tmp_path / "published"
    held.mkdir()
    for name in (ORIGINAL, NEW):
        shutil.copy(PUBLISHED / name, held / name)
    held.chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    before = _listing(held)
    work = tmp_path / "work"
    work.mkdir()
    try:
        # One launch a side: the small sizes are judged to about 6% (the launch-to-launch floor), so at 10%.
        done = ddpbench("compare", held / ORIGINAL, held / NEW, "--tolerance", "10%", cwd=work)
        # Root ignores the folder's mode: the listing is what shows that nothing was written there.
        assert _listing(held) == before
    finally:
        held.chmod(0o755)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.rstrip().endswith("verdict: results/verdict.md and verdict.json")
    verdict = json.loads((work / "results" / "verdict.json").read_text())
    assert verdict["outcome"] == "passed" and {run["verdict"] for run in verdict["runs"]} == {"reproduced"}

    elsewhere = ddpbench("compare", held / ORIGINAL, held / NEW, "--tolerance", "10%", "--out", tmp_path / "verdicts", cwd=work)
    assert elsewhere.returncode == 0, elsewhere.stderr
    assert sorted(p.name for p in (tmp_path / "verdicts").iterdir()) == ["verdict.json", "verdict.md"]
    assert _listing(held) == before


def _resealed(name: str, tmp_path: Path, edit=lambda doc: None) -> Path:
    """A published bundle as another run of its plan: a new run id, edited, sealed again."""
    doc = json.loads((PUBLISHED / name).read_text())
    doc.pop("sha256")
    doc["run_id"] = doc["run_id"][:-6] + "c0ffee"
    edit(doc)
    path = tmp_path / f"again-{name}"
    path.write_text(json.dumps(seal(doc)))
    return path


def _rows(verdict_md: str) -> list[list[str]]:
    return [line.strip("|").split(" | ") for line in verdict_md.splitlines() if line.startswith("| ") and not line.startswith("| host ")]


def test_the_params_column_shows_what_tells_the_rows_apart_alike_for_every_suite():
    """A 1x H100 bundle of DDP and FSDP runs, a row per configuration as compare makes them: each suite's rows by
    their model and global batch (and FSDP's sharding), never by what a run records of itself (num_params,
    train_flops_per_sample) or a sweep's list (global_batches)."""
    (host,) = json.loads((PUBLISHED / "20261206T055626Z-1c418f.bundle.json").read_text())["hosts"]
    verdicts = [RunVerdict(host["name"], host["name"], run.suite, run.params, with_setting(run.preset, run), run.world_size,
                           suites.get(run.suite).headline_metric, "reproduced")
                for run, *_ in configurations(host["runs"]).values()]
    rows = table(verdicts).rows
    assert {(row[1], row[2]) for row in rows} == {
        ("ddp", "model=gpt2 global_batch=8"), ("ddp", "model=gpt2-large global_batch=16"), ("ddp", "model=gpt2-large global_batch=64"),
        ("fsdp", "model=llama3.2-1b sharding=full global_batch=16")}
    assert len({tuple(row[:6]) for row in rows}) == len(rows)  # host, suite, params, transport, ranks, metric: one row each


def test_verdict_text_says_an_absent_value_in_words(tmp_path):
    """Set against a copy whose host has no GPU: each field that differs is said, none of it as None or []."""
    def without_gpus(doc: dict) -> None:
        fingerprint = doc["hosts"][0]["fingerprint"]
        fingerprint.update(gpus=[], gpu_count=0)
        fingerprint["software"]["nccl"] = None

    done = ddpbench("compare", PUBLISHED / ORIGINAL, _resealed(ORIGINAL, tmp_path, without_gpus), "--out", tmp_path / "out")
    text = (tmp_path / "out" / "verdict.md").read_text()
    assert done.returncode != 0 and "NOT COMPARABLE" in text
    assert "gpu_count 2 -> 0" in text and "-> none" in text and "pcie_gen 5,5 -> none" in text
    assert "None" not in text and "[]" not in text


def test_the_advice_of_an_inconclusive_compare_followed_gives_its_verdict(tmp_path):
    """At the default 5% the small all-reduces of one launch a side are inconclusive; the summary names
    the tolerance that judges them, and the same bundles judged with it pass."""
    first = ddpbench("compare", PUBLISHED / ORIGINAL, PUBLISHED / NEW, "--out", tmp_path / "first")
    assert first.returncode == 3 and "**INCONCLUSIVE: 3 of 8 compared runs could not be judged" in first.stdout
    assert "this machine" not in first.stdout  # no machine was measured: two bundles were read
    (advice,) = re.findall(r"judged with ((?:--tolerance \S+ ?)+), each of them is reproduced \(its interval lies within\)",
                           first.stdout)
    assert advice == "--tolerance busbw_gbps=9%"  # the 1 MiB interval [0.924, 1.045] reaches 8.2% below
    followed = ddpbench("compare", PUBLISHED / ORIGINAL, PUBLISHED / NEW, *advice.split(), "--out", tmp_path / "followed")
    assert followed.returncode == 0 and "**PASS: every compared run reproduced (8 reproduced)**" in followed.stdout
    narrower = ddpbench("compare", PUBLISHED / ORIGINAL, PUBLISHED / NEW, "--tolerance", "busbw_gbps=8%", "--out", tmp_path / "8")
    assert narrower.returncode == 3  # the advice is the least whole percent that settles it

    # The launch-to-launch floors the one-launch sides took: one short line after the table, not a line each before it.
    lines = first.stdout.splitlines()
    floors = [i for i, line in enumerate(lines) if "cannot show" in line]  # the floors named, old form or new
    table_end = max(i for i, line in enumerate(lines) if line.startswith("|"))
    assert len(floors) == 1 and floors[0] > table_end and len(lines[floors[0]]) < 300, lines[floors[0]]
    assert lines[floors[0]].startswith("Launch-to-launch floors taken by sides of one launch, which cannot show their own: 1.4%, 0.6%, 0.5%")


def test_the_advice_names_the_least_tolerance_per_metric_and_what_no_tolerance_settles():
    from bench.verify.compare import RunVerdict, inside_band
    from bench.verify.verdict import settling_advice

    def run(metric: str, verdict: str, low, high) -> RunVerdict:
        return RunVerdict("h", "h", "ddp", {}, "default", 2, metric, verdict, ci_low=low, ci_high=high, tolerance=0.05)

    verdicts = [run("step_time_s", "inconclusive", 0.9, 1.08), run("step_time_s", "inconclusive", 0.97, 1.06),
                run("busbw_gbps", "inconclusive", None, None), run("busbw_gbps", "reproduced", 0.99, 1.01)]
    assert settling_advice(verdicts) == ("judged with --tolerance step_time_s=12%, each of them is reproduced (its interval lies "
                                         "within); no tolerance settles the one without an interval")
    assert inside_band(0.9, 1.08, 0.12) and not inside_band(0.9, 1.08, 0.11)  # 1/0.9 reaches 11.1% below
