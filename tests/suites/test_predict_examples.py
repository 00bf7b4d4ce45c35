"""`ddpbench predict` as a reader meets it: every `ddpbench predict` line of the user's pages, run on the
published bundles, exits 0 with a scaling figure on every link row; every published bundle gets one on
every link row; weak and strong scaling are what they say; a bundle without a timeline is predicted from
the compute + exposed communication model and says so; and options that predict nothing are one error
line with the reason and the fix."""

from __future__ import annotations

import json
import statistics

import pytest

from bench.suites.ddp.predict import predict
from tests.conftest import REPO
from tests.support.cli_in_process import ddpbench
from tests.test_docs import commands_of, doc_files, shell_lines

BUNDLES = REPO / "benchmarks" / "results" / "bundles"
PUBLISHED = sorted(BUNDLES.glob("*.bundle.json*"))
FEATURED = BUNDLES / "20261125T213922Z-6e20a7.bundle.json"  # the README's: gpt2 at micro-batch 8 on 1 and 2 H100s
NO_TIMELINE = BUNDLES / "20261125T214225Z-2c5662.bundle.json"  # the same plan, recorded before the timeline


def bundle_words(words: list) -> list:
    """Where an example names its bundle: BUNDLE, results/RUN_ID/bundle.json or a published one."""
    return [i for i, w in enumerate(words) if w == "BUNDLE" or w.endswith((".json", ".json.gz"))]


def examples() -> list:
    """(where, the words after `predict`) of every `ddpbench predict` command of the docs that names a
    bundle (a shell block's line, or a code span of the prose)."""
    found = []
    for doc in doc_files(REPO):
        for line in shell_lines(doc):
            for words in commands_of(line):
                at = next((i for i, w in enumerate(words[:-1]) if (w == "ddpbench" or w.endswith("/ddpbench")
                                                                   or (w == "bench" and words[i - 1] == "-m"))
                           and words[i + 1] == "predict"), None)
                if at is not None and bundle_words(words[at + 2:]):
                    found.append((f"{doc.relative_to(REPO)}: {line.strip()}", words[at + 2:]))
    return found


EXAMPLES = examples()


def on(bundle, words: list) -> list:
    """The example's words with `bundle` for the one it names."""
    (where,) = bundle_words(words)
    return [str(bundle) if i == where else w for i, w in enumerate(words)]


def run_predict(*args) -> tuple:
    done = ddpbench("predict", *args)
    return done.returncode, done.stdout, done.stderr


def link_rows(text: str) -> list[dict]:
    """The "What link do I need?" table's rows that predict a link (the measured runs' rows left out)."""
    lines = text.split("### What link do I need?", 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| host |"))
    header = [cell.strip() for cell in lines[start].strip("|").split(" | ")]
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append(dict(zip(header, (cell.strip() for cell in line.strip("|").split(" | ")))))
    return [row for row in rows if not row["link"].startswith("measured:")]


def scaling_of(row: dict) -> str:
    (column,) = [name for name in row if name.endswith("scaling")]
    return row[column]


def test_the_docs_hold_predict_examples_among_them_the_readmes_and_the_multi_node_one():
    assert len(EXAMPLES) >= 5, EXAMPLES
    assert any(where.startswith("README.md") for where, _ in EXAMPLES)
    assert any("--gpus-per-node" in words for _, words in EXAMPLES)


@pytest.mark.parametrize("where, words", EXAMPLES, ids=[where for where, _ in EXAMPLES])
def test_each_example_of_the_docs_scales_every_link_row_of_the_featured_bundle(where, words):
    status, out, err = run_predict(*on(FEATURED, words))
    assert status == 0, err
    rows = link_rows(out)
    assert rows and all(scaling_of(row).endswith("%") for row in rows), (where, rows)


@pytest.mark.slow
@pytest.mark.parametrize("bundle", PUBLISHED, ids=[path.name.split("-")[1].split(".")[0] for path in PUBLISHED])
def test_each_example_of_the_docs_scales_every_link_row_of_every_published_bundle(bundle):
    """Or, where strong scaling cannot split a bundle's global batches (quick's 8 at micro-batch 8), says
    so in one line with what to use instead."""
    for where, words in EXAMPLES:
        status, out, err = run_predict(*on(bundle, words))
        if status != 0 and "strong" in words:
            assert "not divisible by" in err and "use --scaling weak" in err and len(err.strip().splitlines()) == 1, (where, err)
            continue
        assert status == 0, (where, err)
        rows = link_rows(out)
        assert rows and all(scaling_of(row).endswith("%") for row in rows), (where, rows)


@pytest.mark.parametrize("bundle", PUBLISHED, ids=[path.name.split("-")[1].split(".")[0] for path in PUBLISHED])
def test_every_published_bundle_is_predicted_with_a_weak_scaling_on_every_link_row(bundle):
    status, out, err = run_predict(bundle)
    assert status == 0, err
    rows = link_rows(out)
    assert rows and all(row["weak scaling"].endswith("%") for row in rows), rows
    assert "Scaling is weak: each GPU keeps the bundle's micro-batch and accumulation" in out


def _one_gpu_step(doc: dict) -> float:
    (run,) = [r for r in doc["hosts"][0]["runs"] if r["suite"] == "ddp" and r["world_size"] == 1]
    return statistics.median(run["metrics"]["step_time_s"]["samples"])


def test_weak_scaling_grows_the_global_batch_and_sets_each_step_against_the_1_gpu_step_of_the_same_work():
    doc = json.loads(FEATURED.read_text())
    (host,) = predict([doc], ["nvlink4", "eth-25g"], gpus=16)
    one_gpu = _one_gpu_step(doc)
    assert {(p.gpus, p.global_batch, p.scaling) for p in host.links_predicted} == {(16, 128, "weak")}
    for p in host.links_predicted:
        assert p.efficiency == pytest.approx(one_gpu / p.step_s)  # the same work per GPU: T1 / TN
        assert p.source == "the 1-GPU run's timeline"


def test_strong_scaling_keeps_the_global_batch_where_it_divides_and_says_where_it_does_not():
    status, out, err = run_predict(FEATURED, "--scaling", "strong")
    assert status == 0, err
    rows = link_rows(out)
    assert rows and {row["global batch"] for row in rows} == {"16"} and all(row["strong scaling"].endswith("%") for row in rows)
    assert "Scaling is strong: the global batch is kept" in out
    assert "gpt2, global batch 8: not divisible by 2 GPUs x micro-batch 8; no prediction at 2 GPUs" in out
    # no 1-GPU run at global batch 16: its timeline, counted again for 2 micro-batches, stands for it
    assert "gpt2, global batch 16: no 1-GPU run of this batch per GPU; its scaling is against the 1-GPU run's timeline, " \
           "its 1 micro-batches counted as 2" in out


def test_a_bundle_without_a_timeline_is_predicted_from_its_1_gpu_step_and_the_gradients_all_reduce():
    doc = json.loads(NO_TIMELINE.read_text())
    (host,) = predict([doc])
    one_gpu = _one_gpu_step(doc)
    assert host.links_predicted and {p.source for p in host.links_predicted} == {"compute + exposed communication model"}
    for p in host.links_predicted:
        assert p.step_s == pytest.approx(one_gpu + p.exposed_s) and p.exposed_s > 0  # every all-reduce after the compute
        assert p.efficiency == pytest.approx(one_gpu / p.step_s)
    assert any(note.startswith("no step timeline in this bundle's runs") for note in host.notes)
    status, out, _ = run_predict(NO_TIMELINE)
    assert status == 0 and all(row["weak scaling"].endswith("%") for row in link_rows(out))


@pytest.mark.parametrize("args, says", [
    (["--scaling", "strong", "--gpus", "16"],
     "error: nothing predicted: gpt2, global batch 8: not divisible by 16 GPUs x micro-batch 8; no prediction at 16 GPUs "
     "(and 1 more); use --scaling weak (the default: each GPU keeps its batch), or --gpus that divide the global batch"),
    (["--link", "nvlink4+ib-ndr", "--gpus-per-node", "8"],
     "error: nothing predicted: link nvlink4+ib-ndr: 2 GPUs do not fill nodes of 8; no prediction; give --gpus a multiple "
     "of --gpus-per-node 8"),
    (["--link", "nvlink4+ib-ndr", "--gpus", "12", "--gpus-per-node", "8"],
     "error: --gpus 12 does not fill nodes of --gpus-per-node 8; give a multiple of 8 (e.g. --gpus 16)"),
])
def test_options_that_predict_nothing_are_one_line_with_the_reason_and_the_fix(args, says):
    status, out, err = run_predict(FEATURED, *args)
    assert status == 2 and err == says + "\n" and out == ""
