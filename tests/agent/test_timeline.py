"""The step timeline's recorder on a CPU model: when each of DDP's buckets became ready, in order, from
one hook a bucket once the first backward has shown the order. On a GPU (CI has none: run this file on a
GPU host), its recorded steps make no CUDA event: they record events made before them."""

from __future__ import annotations

import pytest
import torch

from bench.agent.timeline import MAX_RECORDED_STEPS, STEP_FIGURES, StepRecorder

LAYERS = 12
CAP_BYTES = 3 * 1024  # a 16x16 fp32 weight is 1 KiB: a bucket closes every few layers


def stepped(module: torch.nn.Module, recorder: StepRecorder, accum: int = 2) -> None:
    """One step as the training loop marks it: `accum` micro-batches, then the optimizer."""
    recorder.step(accum)
    for _ in range(accum):
        recorder.mark("forward")
        loss = module(torch.ones(4, 16, device=next(module.parameters()).device)).square().sum()
        recorder.mark("backward")
        loss.backward()
    recorder.mark("optimizer")
    module.zero_grad(set_to_none=True)
    recorder.mark("end")


def hooks_installed(module: torch.nn.Module) -> int:
    return sum(len(p._post_accumulate_grad_hooks or {}) for p in module.parameters())


def test_each_bucket_is_timed_in_order_by_one_hook_on_its_last_parameter():
    torch.manual_seed(0)
    module = torch.nn.Sequential(*[torch.nn.Linear(16, 16) for _ in range(LAYERS)])
    recorder = StepRecorder(torch.device("cpu"), list(module.parameters()), lambda p: p.element_size(), CAP_BYTES)
    assert hooks_installed(module) == 2 * LAYERS  # every parameter's, to learn the order the backward makes them ready

    stepped(module, recorder)  # untimed: teaches the buckets
    buckets = recorder.buckets
    order = [i for bucket in buckets for i in bucket]
    assert order == [i for layer in reversed(range(LAYERS)) for i in (2 * layer + 1, 2 * layer)]  # the backward's order
    assert len(buckets) > 3 and sum(recorder.bucket_bytes) == sum(p.numel() * 4 for p in module.parameters())
    assert hooks_installed(module) == len(buckets)  # one call into Python a bucket on the backward's thread, not one a parameter

    recorder.recording = True
    for _ in range(3):
        stepped(module, recorder)
    steps, cpu_s = recorder.take()
    assert len(steps) == 3 and cpu_s > 0
    for step in steps:
        figures, ready = dict(zip(STEP_FIGURES, step)), step[len(STEP_FIGURES):]
        assert len(ready) == len(buckets) and ready == sorted(ready)  # every bucket, the first ready first
        assert 0 < ready[-1] <= figures["last_backward_s"] <= figures["step_s"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_recorded_gpu_steps_record_events_made_before_them(monkeypatch):
    module = torch.nn.Sequential(*[torch.nn.Linear(16, 16) for _ in range(LAYERS)]).cuda()
    recorder = StepRecorder(torch.device("cuda"), list(module.parameters()), lambda p: p.element_size(), CAP_BYTES)
    stepped(module, recorder)
    made = []

    class CountedEvent(torch.cuda.Event):
        def __new__(cls, *args, **kwargs):
            made.append(1)
            return super().__new__(cls, *args, **kwargs)

    monkeypatch.setattr(torch.cuda, "Event", CountedEvent)
    for _ in range(2):  # the second time round, with the events the first one's reading gave back
        recorder.recording = True
        made_before = len(made)
        for _ in range(3):
            stepped(module, recorder)
        recorder.recording = False
        assert len(made) == made_before  # the steps themselves made none
        steps, _ = recorder.take()
        assert len(steps) == 3 and all(0 < step[-1] <= step[STEP_FIGURES.index("step_s")] for step in steps)
    assert 0 < len(made) <= (3 + 2 * 2 + len(recorder.buckets)) * MAX_RECORDED_STEPS  # made once, for the steps a run keeps
