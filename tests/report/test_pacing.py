"""What paced a training step: the verdict from a run's profiled kernels, in the report's answer, and the
launch-to-launch floor it sets, so that honest one-launch reruns of host-paced steps are not called slower."""

from __future__ import annotations

import json
import math
import random

import pytest

from bench import suites
from bench.common.launch_floor import Kind, floor_for, launches
from bench.common.run import Run
from bench.common.stats import Launches, family_level, metric, ratio_interval
from bench.report.answer import TITLE
from bench.suites.training import pacing
from bench.verify.compare import verdict_of
from tests.conftest import REPO
from tests.report.test_report_answer import _answer_of, _rows, _section
from tests.support.cli_in_process import ddpbench
from tests.support.report_variants import make_variant

TOLERANCE = 0.05


def gpu_run(step_s: list, busy_s: "float | None" = None, power_w: float = 450.0, backend: str = "nccl") -> Run:
    """A made-up 1-GPU training run: its timed steps and, where profiled, the kernels' time a step."""
    metrics = {"step_time_s": metric(step_s), "mfu_fraction": metric([0.2])}
    if busy_s is not None:
        metrics |= {"gpu_compute_busy_s": metric([busy_s]), "gpu_comm_exposed_s": metric([0.0])}
    counters = {"interval_s": 0.1, "gpus": [{"power_w_median": power_w, "power_limit_w": 700.0}]}
    return Run({"suite": "ddp", "params": {"model": "gpt2-large", "micro_batch": 2, "precision": "bf16"}, "world_size": 1, "status": "ok",
                "metrics": metrics, "transport": {"preset": "default", "backend": backend}, "launch_id": "ddp-0-x",
                "gpu_counters": counters})


def test_a_step_whose_gpu_idles_between_kernels_is_host_paced_and_says_how_busy():
    judged = pacing.judge(gpu_run([0.5, 0.52, 0.49], busy_s=0.205))
    assert judged.verdict == pacing.HOST_PACED
    assert judged.words() == "paced by the host (GPU busy 41% of the step)"
    assert judged.power_fraction == pytest.approx(450 / 700, abs=1e-3)


def test_a_step_whose_gpu_runs_kernels_throughout_is_gpu_bound():
    judged = pacing.judge(gpu_run([0.4, 0.401, 0.399], busy_s=0.39))
    assert judged.verdict == pacing.GPU_BOUND
    assert judged.short() == "GPU-bound 98%"


def test_processes_on_the_cpu_are_paced_by_it_and_an_unprofiled_gpu_step_is_unknown():
    assert pacing.judge(gpu_run([0.03, 0.031], backend="gloo")).words().startswith("paced by the CPU")
    assert pacing.judge(gpu_run([0.4, 0.41])).verdict == pacing.UNKNOWN


def test_a_repeat_is_judged_by_the_kernels_its_first_launch_profiled_against_its_own_step():
    first, repeat, orphan = gpu_run([0.4, 0.401], busy_s=0.39), gpu_run([0.8, 0.79]), gpu_run([0.4, 0.41])
    repeat.record |= {"launch_id": "ddp-0-x-r2", "profiled_in": "ddp-0-x"}
    orphan.record |= {"launch_id": "ddp-0-x-r3", "profiled_in": "ddp-0-y"}  # a launch that profiled nothing of it
    pacing.derive_pacing([first, repeat, orphan], suites.get("ddp"))
    judged = [pacing.of_run(run) for run in (first, repeat, orphan)]
    assert [p.short() for p in judged] == ["GPU-bound 97%", "host-paced 49%", "unknown"]  # the same kernels in twice the step


def test_a_figure_of_several_runs_is_host_paced_where_any_of_them_was():
    both = pacing.of_runs([gpu_run([0.4], busy_s=0.39), gpu_run([0.5], busy_s=0.2)])
    assert both.verdict == pacing.HOST_PACED and both.gpu_busy_fraction == pytest.approx(0.4)


def _honest_rerun_verdicts(rng: random.Random, busy_s: float, trials: int, launch_spread: float = 0.15,
                           sample_cv: float = 0.12, steps: int = 20) -> dict:
    """Verdicts of one launch against one of the same configuration: each launch's median moves by
    `launch_spread` (log scale), its steps by `sample_cv` about it."""
    counts = {"slower": 0, "faster": 0, "reproduced": 0, "inconclusive": 0}
    level = family_level(1)
    for _ in range(trials):
        sides = []
        for _ in range(2):
            centre = 0.3 * math.exp(rng.gauss(0, launch_spread))
            run = gpu_run([centre * math.exp(rng.gauss(0, sample_cv)) for _ in range(steps)], busy_s=busy_s)
            sides.append(launches([run], "step_time_s", pacing=pacing.judge(run).verdict))
        counts[verdict_of(ratio_interval(sides[1], sides[0], level), TOLERANCE, "step_time_s")] += 1
    return counts


def test_honest_one_launch_reruns_of_host_paced_steps_are_rarely_called_slower_or_faster():
    """Launches 15% apart, steps 12% apart within one: at most the interval's stated 5% of such reruns may differ."""
    trials = 2000
    honest = _honest_rerun_verdicts(random.Random(0), busy_s=0.12, trials=trials)
    assert (honest["slower"] + honest["faster"]) / trials <= 0.05


def test_the_same_reruns_judged_by_the_gpu_steps_floor_alone_fail_often():
    """What the floor by pacing prevents: the same draws, each side taking the 0.5% measured on GPU-bound
    steps, call a large share of honest reruns slower or faster."""
    rng, differ, trials = random.Random(1), 0, 400
    gpu_floor = floor_for(Kind("gpu", "default", "one", "step_time_s", pacing=pacing.GPU_BOUND))
    for _ in range(trials):
        sides = [Launches.of([[0.3 * math.exp(centre + rng.gauss(0, 0.12)) for _ in range(20)]], gpu_floor)
                 for centre in (rng.gauss(0, 0.15), rng.gauss(0, 0.15))]
        differ += verdict_of(ratio_interval(sides[1], sides[0], family_level(1)), TOLERANCE, "step_time_s") in ("slower", "faster")
    assert gpu_floor.fraction < 0.01 and differ / trials > 0.3


def test_the_answer_says_a_host_paced_row_measures_the_host_and_what_to_change(fleet, tmp_path):
    doc = make_variant(json.loads(fleet["rig-4090"].read_text()), "rig-4090", hardware="4090-pcie-x4", bandwidth=5,
                       exposed=0.25)
    for run in doc["hosts"][0]["runs"]:
        if run["suite"] == "ddp":
            run["pacing"] = {**run["pacing"], "verdict": "host-paced", "gpu_busy_fraction": 0.41}
    answer = _answer_of(doc, tmp_path)
    line = next(l for l in answer.splitlines() if l.startswith("- rig-4090"))
    assert "paced by the host (GPU busy 41% of the step), so its" in line and "measures the host, not the link" in line
    assert "a larger micro_batch, cuda_graphs: true (ddp), or compile: true" in line
    assert "severe" not in line.split("measures the host")[0]
    rows = [row for row in _rows(answer) if row[0].startswith("rig-4090") and row[2] == "2 GPUs"]
    assert rows and all(row[6].startswith("not a link verdict") and row[-1] == "host-paced 41%" for row in rows)


def test_a_cpu_run_says_its_processes_are_paced_by_the_cpu(fleet_report):
    answer = _section((fleet_report / "report.md").read_text(), TITLE)
    cpu_rows = [row for row in _rows(answer) if row[2].endswith("processes")]
    assert cpu_rows and all(row[-1] == "CPU" for row in cpu_rows)


@pytest.mark.slow  # a report of 26 GPU runs
def test_is_my_number_normal_says_what_paced_each_training_row(tmp_path):
    """The H100 bundle of every shipped training entry: its GPU-bound rows and its host-paced ones,
    each "normal?" row with the pacing its run had, as the answer's table gives it."""
    bundle = REPO / "benchmarks/results/bundles/20261206T092007Z-c3b1ad.bundle.json.gz"
    assert ddpbench("report", str(bundle), "--out", str(tmp_path)).returncode == 0
    normal = _section((tmp_path / "report.md").read_text(), "Is my number normal?")
    header = next(line for line in normal.splitlines() if line.startswith("| host |"))
    assert header.rstrip(" |").endswith("paced by (GPU busy share)")
    paced = [row[-1] for row in _rows(normal) if row[0] == "local"]
    assert any(cell.startswith("GPU-bound 9") for cell in paced) and any(cell.startswith("host-paced ") for cell in paced)
