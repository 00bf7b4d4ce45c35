"""The copy suite, after nvbandwidth: how fast each GPU's links move bytes with nothing else
running: host-to-device and back per GPU, device-to-device per ordered pair, by copy engine and by
SM, one way and both. One process drives every GPU. Its ranks' part is ranks.py; its report's,
report.py."""

from __future__ import annotations

import re
from dataclasses import dataclass

from bench.common.host import Capabilities
from bench.common.run import Run
from bench.common.units import human_bytes
from bench.common import cost
from bench.errors import PlanError
from bench.suites.base import Figure, Suite
from bench.suites.params import SweptParams

# A point's warm-up runs its warmup_iters copies and at least this long: on an H200 the first
# milliseconds of host-to-device copies into new buffers ran at down to half speed, longer than a few
# copies of 1-16 MiB last (benchmarks/results/copy_parity_h200x1.md).
WARMUP_LEAST_S = 0.03
# Per GPU, a copy point holds at most two buffers (a bidirectional pair's source and
# destination) and its check two more temporaries; the host holds two pinned buffers.
GPU_BUFFERS, HOST_BUFFERS = 4, 2
PCIE_COPY_GBPS = {5: 55.0, 4: 25.0}  # one-way host<->device copies (copy suite on one H200: 55.4 GB/s)


@dataclass(frozen=True)
class Params(SweptParams):
    """params.schema.json's $defs/params."""

    directions: list
    engines: list
    bidirectional: list


class Copy(Suite):
    report_order = 10
    Params = Params
    headline_metric = "copy_gbps"
    identity_params = ("direction", "engine", "src", "dst", "size_bytes")

    def check_plan(self, params: Params, host: Capabilities, *, world_size: int, transport: str, nodes: int) -> None:
        params.check_sweep(self.name)
        if host.cuda and GPU_BUFFERS * params.end_bytes > host.gpu_memory_free_bytes:
            raise PlanError(
                f"copy: end_bytes {params.end_bytes} needs about {GPU_BUFFERS * params.end_bytes} bytes of GPU memory, "
                f"the GPU has {host.gpu_memory_free_bytes} free; lower end_bytes")
        host_need = HOST_BUFFERS * params.end_bytes
        if host.host_memory_bytes and host_need > host.host_memory_bytes // 2:
            raise PlanError(
                f"copy: end_bytes {params.end_bytes} needs about {host_need} bytes of pinned host memory, more than half of "
                f"{host.host_memory}; lower end_bytes")

    def sweeps_gbps(self, params: Params, host: Capabilities) -> list:
        """The GB/s a copy reaches, one entry per size sweep (direction, engine, way, GPU or pair) the
        suite runs here: one host-to-host sweep without a GPU."""
        if not host.cuda:
            return [cost.LOCAL_GBPS["cpu"]]
        sweeps = []
        for direction in params.directions:
            targets = host.gpu_count * (host.gpu_count - 1) if direction == "d2d" else host.gpu_count
            gbps = cost.peer_gbps(host) if direction == "d2d" else PCIE_COPY_GBPS.get(host.pcie_gen, 10.0)
            sweeps += [gbps] * (targets * len(params.engines) * len(params.bidirectional))
        return sweeps

    def configurations(self, params: Params, world_size: int, host: Capabilities) -> int:
        return len(self.sweeps_gbps(params, host)) * len(params.sizes())

    def launch_seconds(self, params: Params, preset: str, world_size: int, host: Capabilities) -> float:
        """Per point, the warm-up (at least WARMUP_LEAST_S) and the timed copies at the link's copy bandwidth."""
        timed_calls = params.repetitions * params.iters + 1
        return sum(max(params.warmup_iters * call_s, WARMUP_LEAST_S) + timed_calls * call_s + cost.POINT_OVERHEAD_S[host.kind]
                   for call_s in self._calls_s(params, host))

    def measured_seconds(self, params: Params, preset: str, world_size: int, host: Capabilities) -> float:
        return sum(params.repetitions * params.iters * call_s for call_s in self._calls_s(params, host))

    def _calls_s(self, params: Params, host: Capabilities) -> list:
        """A copy's seconds at each point of the launch, by the cost model."""
        return [cost.CALL_LATENCY_S[host.kind] + size / (gbps * 1e9) for gbps in self.sweeps_gbps(params, host) for size in params.sizes()]

    def configuration(self, run: Run) -> tuple:
        p = run.params
        return ("copy", p["direction"], p["engine"], p["bidirectional"], p["src"], p["dst"], p["size_bytes"])

    def peer_copies(self, run: Run) -> bool:
        return run.params["direction"] == "d2d"

    def figures(self, run: Run) -> list:
        """The copy's GB/s, crossing the links of its ends that are GPUs (gpuN as its source or
        destination). One-way copy-engine copies are what nvbandwidth's memcpy_ce cases measure; the
        others (SM copies, both ways at once, host to host) are figures of their own that no range holds."""
        p = run.params
        kind = "" if p["engine"] == "ce" else f"_{p['engine']}"
        kind += "_both_ways" if p["bidirectional"] else ""
        ends = tuple(int(found[1]) for end in ("src", "dst") if (found := re.fullmatch(r"gpu(\d{1,4})", str(p.get(end)))))
        return [Figure.median(run, "copy_gbps", f"{p['direction']}{kind}_copy_gbps", "GB/s", True, gpus=ends,
                              size_bytes=p["size_bytes"])]

    def label(self, run: Run) -> str:
        p = run.params
        both = " both ways" if p["bidirectional"] else ""
        return f"{p['direction']} {p['engine']}{both} {p['src']}→{p['dst']} {human_bytes(p['size_bytes'])}"


SUITE = Copy()
