"""Where one world-size-1 step of seed000's SDXL UNet goes, and what changes it.

    python benchmarks/sdxl_step_profile.py [--variants baseline,syncfree_opt,...] [--profile baseline,...]
    python benchmarks/sdxl_step_profile.py --compile-check [--regional] [--compile-batches 8,16]

Needs a CUDA GPU and diffusers. Results: benchmarks/results/sdxl_unet_step_h200x1.md.

The step is the ddp suite's (bench/suites/ddp/ranks.py run_config's `step`, one rank, no DDP):
micro-batches of 2 under bf16 autocast, each loss / accum backward, then Adafactor's step and
zero_grad, on bf16 weights with diffusers' activation checkpointing. Each variant builds the
model through bench.models.workload.build as the suite does, warms up, times steps with CUDA events
(per phase too: forward, backward, optimizer), and, when asked, profiles one step with
torch.profiler: kernel time against the step's wall, and each GPU idle gap charged to what the
CPU was doing when it launched the kernel that ended the gap (forward, backward with the
checkpoint recompute apart, optimizer), with the host syncs (.item()) counted.

--compile-check builds and compiles the model for two global batches in one process, exactly
as run_config does (a fresh model and torch.compile per global batch), and says what the second
global batch's first step costs against the first's; --regional compiles diffusers' repeated
transformer blocks instead (compile_repeated_blocks).

One JSON line per variant on stdout and in --out.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import gc
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile, record_function  # noqa: E402

from bench.models import workload  # noqa: E402
from bench.common.gpu_peaks import dense_bf16_peak_tflops  # noqa: E402
from bench.agent.kernel_time import union  # noqa: E402
from bench.suites.ddp.params import Params  # noqa: E402
from bench.controller.plans import with_defaults  # noqa: E402

# What each variant changes against the suite's step (seed000's parameters).
VARIANTS = {
    "baseline": {},
    "syncfree_opt": {"optimizer": "adafactor_syncfree"},
    "no_autocast": {"autocast": False},
    "syncfree_opt+no_autocast": {"optimizer": "adafactor_syncfree", "autocast": False},
    "channels_last": {"channels_last": True},
    "cudnn_benchmark": {"cudnn_benchmark": True},
    "no_checkpointing": {"activation_checkpointing": False},
    "micro_batch_8": {"micro_batch": 8},
    "all": {"optimizer": "adafactor_syncfree", "autocast": False, "channels_last": True, "cudnn_benchmark": True},
    # The micro-batch's forward and backward as CUDA graphs (autocast off: make_graphed_callables
    # refuses autocast's weight cache; the weights are bf16 already).
    "cuda_graph": {"optimizer": "adafactor_syncfree", "autocast": False, "cuda_graph": True},
}
PHASES = ("forward", "backward", "optimizer", "zero_grad")
RECOMPUTE = "ckpt_recompute"  # a checkpointed block's run, inside the backward window: its recompute


class SyncFreeAdafactor(torch.optim.Adafactor):
    """torch.optim.Adafactor's foreach step with its per-parameter host syncs taken out.

    torch's `_multi_tensor_adafactor` reads two norms per parameter back to the host
    (`p.norm(2).item()` for the relative step size, `update.norm(2).item()` for the update
    clipping): two GPU round trips per parameter, ~3,400 per step for SDXL's UNet, each with
    the GPU idle while the host waits and then launches the next norm. Here both norms are one
    `_foreach_norm` each and the scalars stay on the GPU (in fp32, where torch does them in
    Python floats); the rest is torch's code as is. Same state layout, same update.
    """

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            params, grads, row_vars, col_vars, variances, steps = [], [], [], [], [], []
            self._init_group(group, params, grads, row_vars, col_vars, variances, steps)
            by_kind: dict = {}
            for i, p in enumerate(params):
                by_kind.setdefault((p.device, p.dtype, p.grad.dim() > 1), []).append(i)
            for (_, dtype, multidim), index in by_kind.items():
                self._update([params[i] for i in index], [grads[i] for i in index], [row_vars[i] for i in index],
                             [col_vars[i] for i in index], [variances[i] for i in index], [steps[i] for i in index],
                             dtype, multidim, group)

    @staticmethod
    def _update(params, grads, row_vars, col_vars, variances, steps, dtype, multidim, group):
        lr, d, beta2_decay = group["lr"], group["d"], group["beta2_decay"]
        eps1, eps2 = group["eps"]
        eps1 = torch.finfo(dtype).eps if eps1 is None else eps1
        torch._foreach_add_(steps, torch.tensor(1.0), alpha=1.0)  # CPU step counts, as torch keeps them
        step_values = [s.item() for s in steps]  # CPU tensors: no GPU sync
        one_minus_beta2 = [s ** beta2_decay for s in step_values]
        rho = torch.tensor([min(lr, 1 / s ** 0.5) for s in step_values], device=params[0].device)
        sqrt_numel = torch.tensor([p.numel() ** 0.5 for p in params], device=params[0].device)
        param_rms = torch.stack(torch._foreach_norm(params)).float() / sqrt_numel
        alphas = param_rms.clamp_min(eps2) * rho
        if group["weight_decay"] != 0:
            torch._foreach_mul_(params, 1 - lr * group["weight_decay"])
        if multidim:
            row_means = [torch.norm(g, dim=-1, keepdim=True) for g in grads]
            torch._foreach_mul_(row_means, row_means)
            torch._foreach_div_(row_means, [g.size(-1) for g in grads])
            torch._foreach_lerp_(row_vars, row_means, one_minus_beta2)
            del row_means
            col_means = [torch.norm(g, dim=-2, keepdim=True) for g in grads]
            torch._foreach_mul_(col_means, col_means)
            torch._foreach_div_(col_means, [g.size(-2) for g in grads])
            torch._foreach_lerp_(col_vars, col_means, one_minus_beta2)
            del col_means
            var_estimates = [r @ c for r, c in zip(row_vars, col_vars)]
            row_var_means = [r.mean(dim=-2, keepdim=True) for r in row_vars]
            torch._foreach_clamp_min_(row_var_means, eps1)
            torch._foreach_div_(var_estimates, row_var_means)
            del row_var_means
        else:
            grads_squared = torch._foreach_mul(grads, grads)
            torch._foreach_lerp_(variances, grads_squared, one_minus_beta2)
            del grads_squared
            var_estimates = [v.clone() for v in variances]
        torch._foreach_clamp_min_(var_estimates, eps1 * eps1)
        torch._foreach_rsqrt_(var_estimates)
        torch._foreach_mul_(var_estimates, grads)
        updates = var_estimates
        update_rms = torch.stack(torch._foreach_norm(updates)).float() / (sqrt_numel * d)
        scales = -alphas / update_rms.clamp_min(1.0)
        torch._foreach_mul_(updates, list(scales.unbind(0)))
        torch._foreach_add_(params, updates)


def check_optimizer(device: torch.device) -> dict:
    """SyncFreeAdafactor against torch's Adafactor over three steps of the same weights: in fp32
    the two must agree to rounding (their scalars are fp32 here, fp64 there); in bf16 an update
    that differs in its last fp32 bits can round a weight to the neighbouring bf16 value."""
    shapes = [(640, 320, 3, 3), (1280, 2048), (320,), (64, 64)]
    found = {}
    for dtype in (torch.float32, torch.bfloat16):
        torch.manual_seed(0)
        weights = [torch.randn(s, device=device).to(dtype) for s in shapes]
        ours = [w.clone().requires_grad_() for w in weights]
        theirs = [w.clone().requires_grad_() for w in weights]
        opts = SyncFreeAdafactor(ours, lr=1e-3, foreach=True), torch.optim.Adafactor(theirs, lr=1e-3, foreach=True)
        for _ in range(3):
            grads = [torch.randn(s, device=device).to(dtype) for s in shapes]
            for params, opt in zip((ours, theirs), opts):
                for p, g in zip(params, grads):
                    p.grad = g.clone()
                opt.step()
        found[str(dtype)] = {
            "max_diff_over_max_update": max(((a - b).abs().max() / (b - w).abs().max()).item()
                                            for a, b, w in zip(ours, theirs, weights)),
            "elements_differing": sum(int((a != b).sum()) for a, b in zip(ours, theirs)),
            "elements": sum(w.numel() for w in weights)}
    return {"optimizer_check": found}


def annotated_checkpointing(unet: torch.nn.Module) -> None:
    """diffusers' own checkpointing (non-reentrant torch.utils.checkpoint per block), with each
    block's run marked so that the profile can tell the recompute from the backward kernels."""
    def run_marked(fn):
        def marked(*args, **kwargs):
            with record_function(RECOMPUTE):
                return fn(*args, **kwargs)
        return marked

    def checkpointed(module, *args):
        return torch.utils.checkpoint.checkpoint(run_marked(module.__call__), *args, use_reentrant=False)

    unet.enable_gradient_checkpointing(checkpointed)


def graphed_loss(work) -> "torch.nn.Module":
    """UNetLoss captured once as a forward and a backward CUDA graph (torch.cuda.make_graphed_callables)
    and replayed per micro-batch, whose tensors are copied into the captured inputs. The
    checkpointing keeps no RNG state (SDXL's UNet has no dropout): reading it is not allowed
    while a graph is captured."""
    def checkpointed(module, *args):
        return torch.utils.checkpoint.checkpoint(module.__call__, *args, use_reentrant=False, preserve_rng_state=False)

    work.module.unet.enable_gradient_checkpointing(checkpointed)
    sample = tuple(t.clone() for t in work.micro_batches[0])
    return torch.cuda.make_graphed_callables(work.module, sample)


def build_variant(knobs: dict, device: torch.device, global_batch: int):
    entry = {"model": knobs["model"], "micro_batch": knobs["micro_batch"], "seed": 0, "steps": 1, "warmup_steps": 0,
             "weights_dtype": "bfloat16", "activation_checkpointing": knobs["activation_checkpointing"]}
    params = Params.of(with_defaults({"suites": [{"suite": "ddp", "params": entry}]})["suites"][0]["params"])
    accum = global_batch // knobs["micro_batch"]
    work = workload.build(params, accum, device, 0)
    if knobs["activation_checkpointing"] and knobs.get("annotate"):
        annotated_checkpointing(work.module.unet)
    if knobs["channels_last"]:
        work.module.to(memory_format=torch.channels_last)
        work.micro_batches = [tuple(t.contiguous(memory_format=torch.channels_last) if t.dim() == 4 else t for t in mb)
                              for mb in work.micro_batches]
    torch.backends.cudnn.benchmark = knobs["cudnn_benchmark"]
    if knobs["optimizer"] == "adafactor_syncfree":
        optimizer = SyncFreeAdafactor(work.module.parameters(), lr=1e-3, foreach=True)
    else:  # the suite's make_optimizer("adafactor")
        optimizer = torch.optim.Adafactor(work.module.parameters(), lr=1e-3, foreach=True)
    return work, accum, optimizer


def make_step(work, accum: int, optimizer, knobs: dict, model=None, marks=None):
    """The suite's step; `marks` (phase -> [(start, end) CUDA events]) times its phases."""
    model = work.module if model is None else model
    precision = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if knobs["autocast"] else contextlib.nullcontext
    annotate = knobs.get("annotate", False)

    @contextlib.contextmanager
    def phase(name):
        with record_function(name) if annotate else contextlib.nullcontext():
            if marks is None:
                yield
                return
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            yield
            end.record()
            marks.setdefault(name, []).append((begin, end))

    def step():
        for micro_batch in work.micro_batches:
            with phase("forward"), precision():
                loss = model(*micro_batch) / accum
            with phase("backward"):
                loss.backward()
        with phase("optimizer"):
            optimizer.step()
        with phase("zero_grad"):
            optimizer.zero_grad(set_to_none=True)
    return step


def timed_steps(step, steps: int, marks: dict) -> dict:
    step_s, issue_s, phases = [], [], {p: [] for p in PHASES}
    for _ in range(steps):
        marks.clear()
        torch.cuda.synchronize()
        begin_event, end_event = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin = time.perf_counter()
        begin_event.record()
        step()
        end_event.record()
        issue_s.append(time.perf_counter() - begin)  # the host's time to issue the step (its syncs included)
        end_event.synchronize()
        step_s.append(begin_event.elapsed_time(end_event) / 1e3)
        for name in PHASES:
            phases[name].append(sum(b.elapsed_time(e) for b, e in marks.get(name, [])) / 1e3)
    med = lambda xs: sorted(xs)[len(xs) // 2]
    return {"step_s": step_s, "step_median_s": med(step_s), "host_issue_median_s": med(issue_s),
            "phase_gpu_elapsed_median_s": {p: med(v) for p, v in phases.items()}}


def in_windows(windows, ts):
    """Index of the (sorted, disjoint) window holding ts, or None."""
    i = bisect.bisect_right([w[0] for w in windows], ts) - 1
    return i if i >= 0 and ts <= windows[i][1] else None


def profiled_step(step) -> dict:
    """One step under torch.profiler: busy and idle GPU time by phase, kernels, launches, syncs (µs -> s)."""
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        with record_function("profiled_step"):
            step()
            torch.cuda.synchronize()
    handle, path = tempfile.mkstemp(suffix=".json")
    os.close(handle)
    try:
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    finally:
        os.unlink(path)
    marks = [e for e in events if e.get("cat") == "user_annotation"]
    step_window = next((e["ts"], e["ts"] + e["dur"]) for e in marks if e["name"] == "profiled_step")
    phase_windows = {p: sorted((e["ts"], e["ts"] + e["dur"]) for e in marks if e["name"] == p) for p in PHASES}
    backward = phase_windows["backward"]
    recompute = union([(e["ts"], e["ts"] + e["dur"]) for e in marks if e["name"] == RECOMPUTE
                       and in_windows(backward, e["ts"]) is not None])
    runtime = {e["args"]["correlation"]: e for e in events  # cuBLAS and cuDNN launch through the driver API
               if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}

    def phase_of(ts):
        if ts is None:
            return "unattributed"
        for p in PHASES:
            if in_windows(phase_windows[p], ts) is not None:
                if p == "backward" and in_windows(recompute, ts) is not None:
                    return "backward_recompute"
                return p
        return "outside_phases"

    kernels = []
    for e in events:
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            launch = runtime.get(e.get("args", {}).get("correlation"))
            kernels.append((e["ts"], e["ts"] + e["dur"], phase_of(launch["ts"] if launch else None), e["name"]))
    kernels.sort()
    busy, idle, count, short = {}, {}, {}, {}
    for begin, end, where, _ in kernels:
        busy.setdefault(where, []).append((begin, end))
        count[where] = count.get(where, 0) + 1
        short[where] = short.get(where, 0) + int(end - begin < 10)
    covered = union([(b, e) for b, e, _, _ in kernels])
    # Each gap in the GPU's busy time is charged to the phase that launched the kernel ending it.
    previous_end, first = step_window[0], 0
    for begin, end in covered:
        while first < len(kernels) and kernels[first][0] < begin:
            first += 1
        starter = kernels[first][2] if first < len(kernels) else "tail"
        idle[starter] = idle.get(starter, 0.0) + max(0.0, begin - previous_end)
        previous_end = end
    idle["tail (final sync)"] = step_window[1] - previous_end
    item_calls, sync_calls = {}, {}
    for e in events:
        if e.get("name") == "aten::_local_scalar_dense":
            item_calls[phase_of(e["ts"])] = item_calls.get(phase_of(e["ts"]), 0) + 1
        if e.get("cat") == "cuda_runtime" and e["name"] in ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpyAsync"):
            sync_calls[phase_of(e["ts"])] = sync_calls.get(phase_of(e["ts"]), 0) + 1
    launches = sum(1 for e in runtime.values() if "Launch" in e["name"])
    s = 1e-6
    return {
        "profiled_step_s": (step_window[1] - step_window[0]) * s,
        "gpu_busy_s": sum(e - b for b, e in covered) * s,
        "gpu_idle_s": (step_window[1] - step_window[0] - sum(e - b for b, e in covered)) * s,
        "kernel_launches": launches,
        "host_phase_s": {p: sum(e - b for b, e in w) * s for p, w in phase_windows.items()},
        "recompute_host_s": sum(e - b for b, e in recompute) * s,
        "by_launching_phase": {
            where: {"gpu_busy_s": sum(e - b for b, e in union(spans)) * s, "kernels": count[where],
                    "kernels_under_10us": short[where]}
            for where, spans in busy.items()},
        "gpu_idle_by_phase_s": {k: v * s for k, v in sorted(idle.items(), key=lambda kv: -kv[1])},
        "item_calls_by_phase": item_calls,
        "sync_or_copy_calls_by_phase": sync_calls,
    }


def run_variant(name: str, args, device: torch.device) -> dict:
    knobs = {"model": args.model, "micro_batch": args.micro_batch, "activation_checkpointing": True,
             "optimizer": "adafactor", "autocast": True, "channels_last": False, "cudnn_benchmark": False,
             **VARIANTS[name]}
    build_begin = time.perf_counter()
    work, accum, optimizer = build_variant({**knobs, "annotate": name in args.profile}, device, args.global_batch)
    marks: dict = {}
    model = None
    if knobs.get("cuda_graph"):
        with torch.no_grad():
            eager_loss = work.module(*work.micro_batches[1]).item()
        model = graphed_loss(work)
        with torch.no_grad():
            graph_loss = model(*work.micro_batches[1]).item()
        knobs["graph_loss_vs_eager"] = [graph_loss, eager_loss]
    step = make_step(work, accum, optimizer, knobs, model=model, marks=marks)
    torch.cuda.synchronize()
    result = {"variant": name, "knobs": knobs, "global_batch": args.global_batch, "grad_accum": accum,
              "build_s": time.perf_counter() - build_begin, "gpu": torch.cuda.get_device_name(device)}
    warm = []
    for _ in range(args.warmup):
        begin = time.perf_counter()
        step()
        torch.cuda.synchronize()
        warm.append(time.perf_counter() - begin)
    result["warmup_s"] = warm
    torch.cuda.reset_peak_memory_stats(device)
    result.update(timed_steps(step, args.steps, marks))
    result["peak_memory_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
    peak = dense_bf16_peak_tflops(torch.cuda.get_device_name(device))
    if peak:
        result["mfu"] = work.flops_per_sample * args.global_batch / result["step_median_s"] / (peak * 1e12)
    if name in args.profile:
        try:
            result["profile"] = profiled_step(make_step(work, accum, optimizer, {**knobs, "annotate": True}, model=model))
        except Exception as err:  # the timings above stand without it
            result["profile_error"] = repr(err)
    del work, optimizer, step, marks, model
    gc.collect()
    torch.cuda.empty_cache()
    return result


def compile_check(args, device: torch.device) -> dict:
    """run_config's compile path (ddp.py: a fresh model and torch.compile per global batch) for two
    global batches in one process: the first step's time of each, and dynamo's compile counts."""
    from torch._dynamo.utils import counters

    rows = []
    for global_batch in args.compile_batches:
        knobs = {"model": args.model, "micro_batch": args.micro_batch, "activation_checkpointing": True,
                 "optimizer": "adafactor", "autocast": True, "channels_last": False, "cudnn_benchmark": False}
        work, accum, optimizer = build_variant(knobs, device, global_batch)
        if args.regional:  # diffusers' regional compilation: each BasicTransformerBlock, the rest eager
            work.module.unet.compile_repeated_blocks()
            compiled = work.module
        else:  # ddp.py run_config: the whole module
            compiled = torch.compile(work.module)
        step = make_step(work, accum, optimizer, knobs, model=compiled)
        frames_before = dict(counters["frames"])
        times = []
        for _ in range(args.compile_steps):
            begin = time.perf_counter()
            step()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - begin)
        rows.append({"global_batch": global_batch, "step_s": times,
                     "frames_compiled": counters["frames"].get("ok", 0) - frames_before.get("ok", 0),
                     "unique_graphs_total": counters["stats"].get("unique_graphs", 0)})
        del work, optimizer, step, compiled
        gc.collect()
        torch.cuda.empty_cache()
    return {"compile_check": rows, "model": args.model, "regional": args.regional,
            "inline_inbuilt_nn_modules": torch._dynamo.config.inline_inbuilt_nn_modules,
            "fx_graph_cache": torch._inductor.config.fx_graph_cache}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="sdxl-unet")
    parser.add_argument("--micro-batch", type=int, default=2)
    parser.add_argument("--global-batch", type=int, default=16)
    parser.add_argument("--variants", default="baseline")
    parser.add_argument("--profile", default="baseline", help="variants that also get one profiled step")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--compile-check", action="store_true")
    parser.add_argument("--compile-batches", default="4,8")
    parser.add_argument("--compile-steps", type=int, default=3)
    parser.add_argument("--regional", action="store_true", help="--compile-check with diffusers' compile_repeated_blocks")
    parser.add_argument("--out", type=Path, default=Path("/tmp/sdxl_step_profile.jsonl"))
    args = parser.parse_args()
    args.profile = set(filter(None, args.profile.split(",")))
    args.compile_batches = [int(b) for b in args.compile_batches.split(",")]
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    torch.backends.cuda.matmul.allow_tf32 = True  # as the suite's run()
    torch.backends.cudnn.allow_tf32 = True

    def emit(result: dict) -> None:  # line by line: a run cut off by a time limit keeps what it measured
        print(json.dumps(result), flush=True)
        with args.out.open("a") as f:
            f.write(json.dumps(result) + "\n")

    emit(compile_check(args, device) if args.compile_check else check_optimizer(device))
    for name in [] if args.compile_check else filter(None, args.variants.split(",")):
        try:
            emit(run_variant(name, args, device))
        except torch.cuda.OutOfMemoryError as err:
            gc.collect()
            torch.cuda.empty_cache()
            emit({"variant": name, "error": str(err).splitlines()[0]})


if __name__ == "__main__":
    main()
