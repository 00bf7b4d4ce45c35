"""A training step's timeline, recorded while the step runs: when each gradient bucket becomes ready
in the last micro-batch's backward, and the forward / backward / optimizer split, per step. The
controller replays it on other links (bench/common/replay.py).

What the step calls: `step(accum)` at its start, `mark("forward")` and `mark("backward")` for each
micro-batch, `mark("optimizer")` before the optimizer and `mark("end")` after it. A suite that trains
(ddp; fsdp once it lands) makes a StepRecorder over its module's parameters and calls these;
nothing else of the suite changes.

A bucket is what DDP all-reduces at once: the gradients in the order the backward makes them
ready, packed up to bucket_cap_mb, as DDP's reducer rebuilds its buckets after the first step. The
first bucket too: DDP keeps a 1 MiB first bucket for its default cap alone (torch's
_BucketCapacityConfig), and the suite always gives bucket_cap_mb; NCCL's TUNING lines agree, GPT-2
Large's smallest all-reduce being a full bucket of 104,878,080 bytes. A timeline records the first
bucket's cap it was packed to (first_bucket_bytes). The order is learnt from the first backward seen; a model
without DDP (the 1-GPU baseline) is bucketed the same way, so its timeline says when DDP would
have reduced each bucket. A bucket is ready when its last gradient is accumulated: a
post-accumulate-grad hook on every parameter learns the order, then one on each bucket's last
parameter records a time point there (a CUDA event, or perf_counter on the CPU). The events are
made before the recorded steps, reused once read, and recorded on the stream current when recording
began: the step's, where its backward accumulates the gradients too. A step only records them
(looking up the current stream took 5-9 µs a point on an H100, a record 2-3 µs). No profiler: the
hooks and marks cost some CPU per step, which the recorder times and the run states (recorder_cpu_s);
a GPU step that waits for the CPU is the only one it can slow, by at most that time. On one H100 it
was 0.5% of GPT-2 Large's host-paced step at micro-batch 2 x2 and 0.2% of Llama 3.2 1B's
(benchmarks/timeline_points.py), 0.6% of quick's GPU-bound GPT-2 step; an event's record waits while
the GPU's launch queue is full, and that wait, which adds nothing to a GPU-bound step, is in it too.
"""

from __future__ import annotations

import contextlib
import time
from typing import Callable

import torch
import torch.distributed as dist

from bench.agent.harness import every_rank, max_over_ranks

MAX_RECORDED_STEPS = 100  # a run keeps the first this many timed steps' timelines
STEP_FIGURES = ("step_s", "forward_s", "backward_s", "optimizer_s", "last_backward_start_s", "last_backward_s")


def bucket_assignment(sizes: list[int], cap_bytes: int) -> list[list[int]]:
    """Indices into `sizes` (gradient bytes in ready order) per bucket, as DDP's
    compute_bucket_assignment_by_size packs them: a bucket closes once it reaches the cap."""
    buckets, current, filled = [], [], 0
    for index, size in enumerate(sizes):
        current.append(index)
        filled += size
        if filled >= cap_bytes:
            buckets.append(current)
            current, filled = [], 0
    if current:
        buckets.append(current)
    return buckets


class StepRecorder:
    """Marks and bucket readiness of the steps run while `recording` is on."""

    def __init__(self, device: torch.device, params: list, element_bytes: Callable[[torch.Tensor], int], cap_bytes: int):
        self.cuda = device.type == "cuda"
        self.device = device
        self.params = [p for p in params if p.requires_grad]
        self.sizes = [p.numel() * element_bytes(p) for p in self.params]
        self.cap_bytes = cap_bytes
        self._recording = False
        self._events: list = []  # created on the GPU and free to record: none holds a point not yet read
        self._stream = None  # where the recorded steps' events are recorded
        self._accum = 1
        self.cpu_s = 0.0  # the recorder's own time in recorded steps
        self.steps: list = []  # per recorded step: [(mark, point)], bucket points among them
        self.buckets: "list[list[int]] | None" = None  # param indices per bucket, learnt from the first backward
        self._seen: list = []
        self._backwards_left = 0
        self._hooks = [p.register_post_accumulate_grad_hook(self._hook(i)) for i, p in enumerate(self.params)]

    @property
    def recording(self) -> bool:
        return self._recording

    @recording.setter
    def recording(self, on: bool) -> None:
        """Steps from now on are recorded, or not; turned on, with the events they will record made first."""
        if on and self.cuda:
            self._stream = torch.cuda.current_stream(self.device)
            points_a_step = 3 + 2 * self._accum + len(self.buckets or [])  # step, forward/backward each, optimizer, end, buckets
            wanted = points_a_step * (MAX_RECORDED_STEPS - len(self.steps))
            made = [torch.cuda.Event(enable_timing=True) for _ in range(wanted - len(self._events))]
            for event in made:
                event.record(self._stream)  # the CUDA event is created at its first record
            self._events += made
        self._recording = on

    def _point(self):
        if self.cuda:
            event = self._events.pop() if self._events else torch.cuda.Event(enable_timing=True)
            event.record(self._stream)
            return event
        return time.perf_counter()

    def _hook(self, index: int):
        def seen(_param):
            self._seen.append(index)
        return seen

    def _bucket_hook(self, bucket: int):
        def ready(_param):
            if self._recording and self._backwards_left == 0:  # the last micro-batch's backward
                began = time.perf_counter()
                self.steps[-1].append((f"bucket{bucket}", self._point()))
                self.cpu_s += time.perf_counter() - began
        return ready

    def step(self, accum: int) -> None:
        """A step of `accum` micro-batches begins."""
        self._backwards_left = self._accum = accum
        if self._recording and len(self.steps) < MAX_RECORDED_STEPS:
            began = time.perf_counter()
            self.steps.append([("step", self._point())])
            self.cpu_s += time.perf_counter() - began
        elif self._recording:
            self.recording = False  # enough steps kept

    @contextlib.contextmanager
    def paused(self):
        """Steps run inside are not recorded (they still teach the buckets)."""
        recording, self._recording = self._recording, False
        try:
            yield
        finally:
            self._recording = recording

    def mark(self, name: str) -> None:
        if name == "backward":
            self._backwards_left -= 1
            if self.buckets is None:
                self._seen = []  # the order of the last backward of the first step is the one kept
        if name == "optimizer" and self.buckets is None and self._seen:
            self._learn(self._seen)
        if self._recording:
            began = time.perf_counter()
            self.steps[-1].append((name, self._point()))
            self.cpu_s += time.perf_counter() - began

    def _learn(self, seen: list) -> None:
        """Buckets of the parameters in the order their gradients became ready; one that got no
        gradient is in none (DDP would refuse it without find_unused_parameters)."""
        order = list(dict.fromkeys(seen))
        self.buckets = [[order[k] for k in bucket] for bucket in bucket_assignment([self.sizes[i] for i in order], self.cap_bytes)]
        # From now on a hook only where a bucket closes: the graph and so the order are the same every
        # step, and each hook is a call into Python on the thread that launches the backward's kernels.
        self.remove()
        self._hooks = [self.params[bucket[-1]].register_post_accumulate_grad_hook(self._bucket_hook(b))
                       for b, bucket in enumerate(self.buckets)]

    @property
    def bucket_bytes(self) -> list[int]:
        return [sum(self.sizes[i] for i in bucket) for bucket in self.buckets or []]

    def take(self) -> tuple[list, float]:
        """The recorded steps' figures (seconds: STEP_FIGURES, then each bucket's readiness from the last
        backward's start, bucket by bucket), and the recorder's CPU seconds; cleared for the next run."""
        if self.cuda and self.steps:
            torch.cuda.synchronize()
        steps, cpu_s = [self._figures(marks) for marks in self.steps if self._complete(marks)], self.cpu_s
        if self.cuda:
            self._events += [point for marks in self.steps for _, point in marks]
        self.steps, self.cpu_s = [], 0.0
        return steps, cpu_s

    def _complete(self, marks: list) -> bool:
        names = {name for name, _ in marks}
        return "end" in names and all(f"bucket{b}" in names for b in range(len(self.buckets or [])))

    def _seconds(self, begin, end) -> float:
        return begin.elapsed_time(end) / 1e3 if self.cuda else end - begin

    def _figures(self, marks: list) -> list:
        start = marks[0][1]
        at = {}
        forward_s = backward_s = 0.0
        last_backward = previous = None
        for name, point in marks[1:]:
            if previous is not None and name in ("forward", "backward", "optimizer"):
                seconds = self._seconds(previous[1], point)
                if previous[0] == "forward":
                    forward_s += seconds
                else:
                    backward_s += seconds
            if name in ("forward", "backward", "optimizer"):
                previous = (name, point)
            if name == "backward":
                last_backward = point
            at[name] = point
        buckets = [self._seconds(last_backward, at[f"bucket{b}"]) for b in range(len(self.buckets))]
        return [self._seconds(start, at["end"]), forward_s, backward_s, self._seconds(at["optimizer"], at["end"]),
                self._seconds(start, last_backward), self._seconds(last_backward, at["optimizer"]), *buckets]

    def remove(self) -> None:
        for hook in self._hooks:
            hook.remove()


def _over_ranks(ctx, steps: list) -> "list | None":
    """Each step as the rank that began its last backward last saw it: the one whose buckets the
    all-reduces wait for, so its figures hold no wait for a peer and add up to its step. None where
    the ranks recorded different shapes."""
    width = len(steps[0]) if steps else 0
    shape = [float(len(steps)), float(width)]
    if not every_rank(ctx, max_over_ranks(ctx, shape) == shape):
        return None
    if ctx.world_size == 1 or not steps:
        return steps
    mine = torch.tensor([x for step in steps for x in step], dtype=torch.float64, device=ctx.device)
    everyone = [torch.empty_like(mine) for _ in range(ctx.world_size)]
    dist.all_gather(everyone, mine)
    by_rank = [t.view(len(steps), width).tolist() for t in everyone]
    latest = STEP_FIGURES.index("last_backward_start_s")
    return [max((rank[i] for rank in by_rank), key=lambda step: step[latest]) for i in range(len(steps))]


def _steps_record(steps: list) -> list:
    return [{**dict(zip(STEP_FIGURES, step)), "bucket_ready_s": step[len(STEP_FIGURES):]} for step in steps]


def record(ctx, recorder: StepRecorder, step_s: list, step_without_allreduce: "Callable[[], None] | None",
           steps_without: int) -> "dict | None":
    """The run's timeline (bundle schema: run.timeline) from the recorder's timed steps, then, where
    `step_without_allreduce` is given (DDP with peers), `steps_without` more steps run with every
    micro-batch under no_sync(): the backward with and without the all-reduces beside it, which
    measures how much they slow the compute. None where the ranks' timelines do not match."""
    timed, cpu_s = recorder.take()
    without: list = []
    if step_without_allreduce is not None and steps_without:
        recorder.recording = True
        for _ in range(steps_without):
            step_without_allreduce()
        recorder.recording = False
        without, _ = recorder.take()
    timed, without = _over_ranks(ctx, timed), _over_ranks(ctx, without)
    cpu_per_step = max_over_ranks(ctx, [cpu_s / max(len(timed or []), 1)])[0]
    if not timed:
        return None
    step_median = sorted(step_s)[len(step_s) // 2]
    found = {
        "clock": "cuda_events" if recorder.cuda else "perf_counter",
        "bucket_cap_bytes": recorder.cap_bytes, "first_bucket_bytes": recorder.cap_bytes,
        "bucket_bytes": recorder.bucket_bytes,
        "steps": _steps_record(timed),
        "recorder_cpu_s": cpu_per_step,
        "recorder_cpu_fraction": cpu_per_step / step_median if step_median > 0 else None,
    }
    if without:
        found["steps_without_allreduce"] = _steps_record(without)
    return found
