"""Where the step's GPU time goes: kernel classes, exposed communication, the trace parsing, and which
launches profile."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch

from bench import suites
from bench.agent import kernel_time
from bench.agent.harness import Context
from bench.agent.launch import LaunchFiles, write_specs
from bench.agent.planning import plan_launches
from bench.common.host import Capabilities
from bench.common.protocol import LaunchSpec
from bench.agent.kernel_time import kernel_class, kernels_by_step, step_breakdown
from bench.agent.training import busy_kernels_s, extra_steps, first_launch_kernels_s, paced_by_host, profiled_steps
from bench.controller.plans import load_plan
from benchmarks import plan_durations
from bench.suites.training import PRIMING_STEPS

MS = 1e-3


@pytest.mark.parametrize("name, kind", [
    # Names as torch.profiler shows them on 2x H200 (torch 2.11, cuBLAS nvjet, cuDNN attention, NCCL 2.28).
    ("nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT", "matmul"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "matmul"),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26_64x64x64_1x4x1_cga1x1x", "attention"),
    ("void cudnn::fusion::compute_dot_do_o_specialized<true, 64>(void const*, void const*, void*", "attention"),
    ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4", "attention"),
    ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous n", "optimizer"),
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "comm"),
    ("triton_per_fused__to_copy_add_native_layer_norm_backward_view_5", "other"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, float", "other"),
])
def test_kernels_are_classed_by_name(name, kind):
    assert kernel_class(name) == kind


@pytest.mark.parametrize("cuda, released", [("13.0", True), ("12.6", True), ("12.4", False), ("11.8", False), (None, False)])
def test_the_profiler_releases_cupti_where_attaching_it_again_is_safe(cuda, released):
    # Left attached, CUPTI slows every later kernel launch of the process (a job's later launches).
    assert kernel_time.releases_cupti(cuda) is released


def test_a_gpu_profile_that_caught_no_kernels_in_a_step_gives_no_figures_rather_than_an_idle_gpu():
    step = [("nvjet_a", 0.0, 4 * MS), ("ncclDevKernel_AllReduce", 3 * MS, 5 * MS)]
    assert kernel_time.breakdowns([step, []], on_gpu=True) == []
    assert [figures["gpu_compute_busy_s"] for figures in kernel_time.breakdowns([step, step], on_gpu=True)] == [
        pytest.approx(4 * MS)] * 2
    assert kernel_time.breakdowns([[]], on_gpu=False) == [step_breakdown([])]  # a CPU has no kernels to record


def test_exposed_communication_is_the_part_no_compute_kernel_overlaps():
    # Backward compute 0-10 ms on one stream, a matmul 10-12 ms after it; all-reduces 4-7 ms
    # (hidden), 9-11 ms (hidden) and 11.5-15 ms (0.5 ms hidden, 3 ms exposed).
    kernels = [("nvjet_a", 0, 6 * MS), ("triton_b", 5 * MS, 10 * MS), ("nvjet_c", 10 * MS, 12 * MS),
               ("ncclDevKernel_1", 4 * MS, 7 * MS), ("ncclDevKernel_2", 9 * MS, 11 * MS),
               ("ncclDevKernel_3", 11.5 * MS, 15 * MS), ("multi_tensor_apply_kernel", 15 * MS, 16 * MS)]
    figures = step_breakdown(kernels)
    assert figures["gpu_matmul_s"] == pytest.approx(8 * MS)
    assert figures["gpu_other_compute_s"] == pytest.approx(5 * MS)
    assert figures["gpu_optimizer_s"] == pytest.approx(1 * MS)
    assert figures["gpu_attention_s"] == 0
    assert figures["gpu_comm_s"] == pytest.approx(8.5 * MS)
    assert figures["gpu_compute_busy_s"] == pytest.approx(13 * MS)  # 0-12 and 15-16: the overlap of a and b once
    assert figures["gpu_comm_exposed_s"] == pytest.approx(3 * MS)


def test_overlapping_all_reduces_count_once_when_exposed():
    kernels = [("ncclDevKernel_1", 0, 4 * MS), ("ncclDevKernel_2", 2 * MS, 6 * MS), ("nvjet", 5 * MS, 8 * MS)]
    assert step_breakdown(kernels)["gpu_comm_exposed_s"] == pytest.approx(5 * MS)


@pytest.mark.parametrize("seed", range(20))
def test_exposed_communication_agrees_with_every_pair_of_intervals(seed):
    """The one-sweep overlap against the sum over all pairs (exact for two disjoint sets), on
    interleavings a step has: long all-reduces over many short kernels and the reverse."""
    import random

    rng = random.Random(seed)

    def disjoint(count, longest):
        t, spans = 0.0, []
        for _ in range(count):
            t += rng.uniform(0, longest)
            spans.append([t, t + rng.uniform(0, longest)])
            t = spans[-1][1]
        return spans

    comm, compute = disjoint(rng.randint(0, 30), rng.choice([0.1, 5.0])), disjoint(rng.randint(0, 300), rng.choice([0.1, 5.0]))
    pairs = sum(max(0.0, min(e, f) - max(b, c)) for b, e in comm for c, f in compute)
    assert kernel_time.covered(comm, compute) == pytest.approx(pairs)


class Event:
    """What kernels_by_step reads of torch's profiler events (torch.autograd._KinetoEvent)."""

    def __init__(self, name, device, begin_us, end_us, annotation=False):
        self._name, self._device, self._span, self._annotation = name, device, (begin_us * 1000, end_us * 1000), annotation

    def name(self):
        return self._name

    def device_type(self):
        return self._device

    def is_user_annotation(self):
        return self._annotation

    def start_ns(self):
        return self._span[0]

    def end_ns(self):
        return self._span[1]


def test_kernels_go_to_the_step_whose_window_holds_them():
    from torch.autograd import DeviceType

    cpu, gpu = DeviceType.CPU, DeviceType.CUDA
    events = [
        Event(kernel_time.STEP_MARK, cpu, 2000, 3000, annotation=True), Event(kernel_time.STEP_MARK, cpu, 0, 1000, annotation=True),
        Event("nvjet", gpu, 100, 400), Event("ncclDevKernel", gpu, 2500, 2600),
        Event(kernel_time.STEP_MARK, gpu, 0, 3000, annotation=True),  # the annotation mirrored on the GPU: no kernel
        Event("Optimizer.step#AdamW.step", gpu, 2100, 2900, annotation=True),
        Event("Memset (Device)", gpu, 150, 160), Event("aten::mm", cpu, 150, 160),
        Event("Memcpy DtoD (Device -> Device)", gpu, 2700, 2800),
    ]
    assert kernels_by_step(events) == [[("nvjet", 100e-6, 400e-6)],
                                       [("ncclDevKernel", 2500e-6, 2600e-6), ("Memcpy DtoD (Device -> Device)", 2700e-6, 2800e-6)]]


def test_profiled_steps_are_found_in_torch_profilers_own_trace():
    """The step windows come from torch.profiler's events as this torch records them (no kernels on a CPU)."""
    ran = []
    model = torch.nn.Linear(8, 8)
    breakdowns = kernel_time.profile_steps(lambda: ran.append(model(torch.ones(2, 8)).sum().backward()), 3, torch.device("cpu"))
    assert len(ran) == 3
    assert breakdowns == [dict.fromkeys(kernel_time.METRICS.values(), 0.0)] * 3


def test_a_repeat_profiles_no_step_where_its_first_launch_profiled_the_configuration():
    params = suites.get("ddp").params(load_plan("quick")["suites"][1]["params"])  # DDP GPT-2, its defaults written out
    first = Context(rank=0, local_rank=0, world_size=1, device=torch.device("cuda", 0), backend="nccl")
    repeat = replace(first, profiled_records="launches/01-ddp-default-ws1.jsonl")
    assert (profiled_steps(first, params), profiled_steps(repeat, params)) == (params.profile_steps, 0)
    # The deadline's count too, with the step that primes the timed ones on a GPU.
    assert (extra_steps(first, params), extra_steps(repeat, params)) == (params.profile_steps + PRIMING_STEPS, PRIMING_STEPS)
    assert profiled_steps(replace(first, device=torch.device("cpu")), params) == 0


def test_a_repeat_takes_its_configurations_gpu_work_from_the_launch_that_profiled_it(tmp_path):
    """A repeat profiles nothing; whether the host paces its steps is judged by its first launch's kernels
    of the same configuration (global batch, and the N ranks a baseline stands for)."""
    def record(global_batch: int, busy_s: float, exposed_s: float, **more) -> dict:
        metrics = {"gpu_compute_busy_s": {"samples": [busy_s]}, "gpu_comm_exposed_s": {"samples": [exposed_s]}}
        return {"suite": "ddp", "status": "ok", "params": {"global_batch": global_batch, **more}, "metrics": metrics}

    first = tmp_path / "00-ddp-default-ws1.jsonl"
    first.write_text("\n".join(json.dumps(r) for r in (record(4, 0.030, 0.0), record(4, 0.060, 0.002, baseline_for=2))) + "\n")
    repeat = Context(rank=0, local_rank=0, world_size=1, device=torch.device("cuda", 0), backend="nccl",
                     profiled_records=str(first))
    assert first_launch_kernels_s(repeat, {"global_batch": 4}) == pytest.approx(0.030)
    assert first_launch_kernels_s(repeat, {"global_batch": 4, "baseline_for": 2}) == pytest.approx(0.062)
    assert first_launch_kernels_s(repeat, {"global_batch": 8}) is None  # not profiled there: judged by nothing
    first.write_text('{"truncated": ')
    assert first_launch_kernels_s(repeat, {"global_batch": 4}) is None
    assert first_launch_kernels_s(replace(repeat, profiled_records=None), {"global_batch": 4}) is None


def test_a_step_whose_gpu_works_less_than_nine_tenths_of_it_is_paced_by_the_host():
    ctx = Context(rank=0, local_rank=0, world_size=1, device=torch.device("cpu"), backend="gloo")
    busy = busy_kernels_s({"gpu_compute_busy_s": {"samples": [0.040, 0.041, 0.039]}, "gpu_comm_exposed_s": {"samples": [0.0] * 3}})
    assert busy == pytest.approx(0.040) and busy_kernels_s({}) is None
    assert paced_by_host(ctx, busy, [0.080, 0.100, 0.090])  # busy 44%: the host's
    assert not paced_by_host(ctx, busy, [0.042, 0.043, 0.044])  # busy 93%: the GPU's


def test_a_repeats_spec_names_the_records_of_the_launch_that_profiled_it(tmp_path):
    h100 = Capabilities.of(plan_durations.MACHINES["4x H100 (NV18)"])
    launches = {launch.id: launch for launch in plan_launches(load_plan("quick"), h100)}
    job = [launches["01-ddp-default-ws1"], launches["01-ddp-default-ws1-r2"]]
    files = [LaunchFiles.of(tmp_path, launch.id) for launch in job]
    write_specs(job, files, tmp_path / "placement.jsonl", 0.0)
    first, repeat = (LaunchSpec.read(f.spec) for f in files)
    assert first.profiled_records is None and repeat.profiled_records == first.result_path
