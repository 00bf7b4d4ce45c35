"""The fsdp suite's part of the report's answer (bench/report/answer.py): ddp's findings, per
machine, model with its strategy, rank count, transport and global batch, each scaled against the
plain model on one GPU; whether sharding loses more on a slow link is then read across the answer's
lines of one model. Its figure: throughput against GPUs, the ideal from that plain 1-GPU run."""

from __future__ import annotations

from dataclasses import replace

from bench.report.answer import Finding
from bench.report.merge import Comparison, RunEntry
from bench.suites.fsdp.report.series import strategy
from bench.suites.training.report import Workload, scaling_plots, training_findings, workload


def _workload(entry: RunEntry) -> Workload:
    found = workload(entry)
    return replace(found, recipe=f"{found.recipe}, {strategy(entry)}")


def findings(comparison: Comparison) -> list[Finding]:
    return training_findings(comparison, "fsdp", _workload)


def answer_plots(comparison: Comparison, plot, colours: dict) -> list:
    return scaling_plots(comparison, plot, "fsdp", _workload)
