"""What a point of the step timeline costs the host: alone, and inside a training step of a bundle's run.

    python3 benchmarks/timeline_points.py BUNDLE "ddp gpt2-large micro-batch 2 x2" [--rounds 8]

The recorder (bench/agent/timeline.py) records a CUDA event at each mark of a step and where each
bucket's last gradient is accumulated: events made before the recorded steps, on the stream it looked
up when recording began. First the parts of a point on their own (an event made, the current stream
looked up, recorded, a perf_counter pair). Then the run, set up as the suite's ranks set it up (the row
is the first column of benchmarks/plain_loop.py's table), 3 steps at a time in turns: points as shipped,
with the stream looked up each point, with a new event a point too, with each point timed, and with
no events (perf_counter). Each arm's median step and the recorder's clock a step, which bounds
what the points can add to a host-paced step (its host thread runs them); then the shipped points' own
times: one whose record waits on a full launch queue takes far longer than one alone. Standard library,
torch and the repository only; on a CPU only the shipped and perf_counter arms run (both perf_counter).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from bench.agent import timeline  # noqa: E402
from bench.agent.harness import Context, time_each_call  # noqa: E402
from benchmarks._agent import table  # noqa: E402
from benchmarks.plain_loop import describe, read, suite_training  # noqa: E402

STEPS_A_TURN = 3


def microseconds(call, count: int = 20000) -> float:
    for _ in range(100):
        call()
    began = time.perf_counter()
    for _ in range(count):
        call()
    return (time.perf_counter() - began) / count * 1e6


def parts() -> list:
    """A point's parts on their own, in microseconds each."""
    stream = torch.cuda.current_stream()
    event = torch.cuda.Event(enable_timing=True)
    return [["a new event", f"{microseconds(lambda: torch.cuda.Event(enable_timing=True)):.2f}"],
            ["the current stream looked up", f"{microseconds(torch.cuda.current_stream):.2f}"],
            ["an event recorded (its stream looked up)", f"{microseconds(event.record):.2f}"],
            ["an event recorded on a stream given", f"{microseconds(lambda: event.record(stream)):.2f}"],
            ["a new event recorded, as the recorder does", f"{microseconds(lambda: torch.cuda.Event(enable_timing=True).record()):.2f}"],
            ["a perf_counter pair", f"{microseconds(lambda: (time.perf_counter(), time.perf_counter())):.2f}"]]


def in_step(ctx: Context, run: dict, rounds: int) -> "tuple[list, list]":
    """The run's steps with each way of making a point, in turns: median step and the recorder's clock a
    step; then how long the shipped points took, each."""
    training = suite_training(ctx, "ddp", run["params"], timeline=True)
    recorder = training.recorder
    for _ in range(5):
        training.step()
    ctx.sync()
    record_s: list = []

    shipped = timeline.StepRecorder._point

    def made_before_looked_up(self):
        self._stream = torch.cuda.current_stream()  # the lookup the shipped point makes once a recording
        return shipped(self)

    def new_event(self):
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def shipped_timed(self):  # the shipped point: an event taken from those made before, and its record
        began = time.perf_counter()
        event = shipped(self)
        record_s.append(time.perf_counter() - began)
        return event

    def clock(self):
        return time.perf_counter()

    arms = {"as shipped: events made before, on the stream looked up once": shipped}
    if ctx.is_cuda:
        arms.update({"events made before, the stream looked up each point": made_before_looked_up,
                     "a new event a point, the stream looked up each point": new_event,
                     "as shipped, each point timed": shipped_timed})
    arms["no events (perf_counter)"] = clock
    names = list(arms)
    steps_s: dict = {name: [] for name in names}
    clock_s: dict = {name: [] for name in names}
    try:
        for r in range(rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                timeline.StepRecorder._point = arms[name]
                training.step()  # unrecorded, to fill the GPU's queue as the suite's timed steps do
                recorder.recording = True
                steps_s[name] += time_each_call(ctx, training.step, STEPS_A_TURN)
                recorder.recording = False
                if arms[name] is clock:  # its points are no events to keep for the next steps
                    ctx.sync()
                    clock_s[name].append(recorder.cpu_s / STEPS_A_TURN)
                    recorder.steps, recorder.cpu_s = [], 0.0
                else:
                    clock_s[name].append(recorder.take()[1] / STEPS_A_TURN)
    finally:
        timeline.StepRecorder._point = shipped
    rows = []
    for name in names:
        step, clock_a_step = statistics.median(steps_s[name]), statistics.median(clock_s[name])
        rows.append([name, f"{step * 1e3:.1f}", f"{clock_a_step * 1e3:.3f}", f"{clock_a_step / step:.2%}", f"{rounds} x {STEPS_A_TURN}"])
    records = []
    if record_s:
        ordered = sorted(record_s)
        records = [[f"{len(ordered)}", *(f"{ordered[int(q * (len(ordered) - 1))] * 1e6:.1f}" for q in (0.5, 0.9, 0.99, 1.0)),
                    f"{sum(ordered) / len(steps_s['as shipped, each point timed']) * 1e3:.3f}"]]
    return rows, records


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundle", type=Path)
    parser.add_argument("row", help='a ddp run as benchmarks/plain_loop.py names it: "ddp gpt2-large micro-batch 2 x2"')
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    if args.rounds < 1:
        sys.exit("error: --rounds must be at least 1")
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    runs = [r for host in read(args.bundle)["hosts"] for r in host["runs"]
            if r["suite"] == "ddp" and r["world_size"] == 1 and r["status"] == "ok" and describe(r) == args.row]
    if not runs:
        sys.exit(f"error: {args.bundle} has no ok 1-GPU ddp run {args.row!r}; name one from benchmarks/plain_loop.py's first column")
    if cuda:
        torch.cuda.set_device(device)
        torch.backends.cuda.matmul.allow_tf32 = True  # as the suite's ranks set them
        torch.backends.cudnn.allow_tf32 = True
        print(table(["a point's part, alone", "µs"], parts()) + "\n")
    backend = "nccl" if cuda else "gloo"
    torch.distributed.init_process_group(backend, store=torch.distributed.HashStore(), rank=0, world_size=1)
    ctx = Context(rank=0, local_rank=0, world_size=1, device=device, backend=backend)
    rows, records = in_step(ctx, runs[0], args.rounds)
    print(table([f"{args.row}: points", "step ms", "recorder's clock ms a step", "of the step", "rounds x steps"], rows))
    if records:
        print("\n" + table(["shipped points timed", "median µs", "90th µs", "99th µs", "longest µs", "ms a step"], records))
    torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
