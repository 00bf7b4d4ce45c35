"""The collectives suite, after nccl-tests: all_reduce, all_gather, reduce_scatter, broadcast and a
send/recv matrix, swept over message sizes, with busbw comparable across collectives and world
sizes. Its ranks' part is ranks.py; its report's, report.py."""

from __future__ import annotations

from dataclasses import dataclass

from bench.common.host import Capabilities
from bench.common.links import link_summary
from bench.common.run import Run
from bench.common.transports import backend_for
from bench.common.units import human_bytes
from bench.common import cost
from bench.errors import PlanError
from bench.suites.base import Collective, Figure, HostResults, Suite, warning
from bench.suites.params import SweptParams

# gloo on a GPU host reduces host tensors with one thread a rank (torchrun's OMP_NUM_THREADS=1):
# filling the inputs twice, the expected result and the check cost 27 s per GB of buffer on a 2x
# H200 host (seed002's 1.4 and 5.6 GB points: 43 and 174 s, of which 6 and 22 s in the calls).
# A CPU host's own sweeps are small, and their cost is inside its fitted constants.
GLOO_HOST_BUFFER_S_PER_BYTE = 27e-9
GATHER_OPS = ("all_gather", "reduce_scatter")  # the collectives that run out of place as well as in place
# A rank's buffers on the host (gloo): the collective's own, the inputs rebuilt between repetitions and
# the check's expected values in float32: about four of the largest size.
HOST_BUFFERS_PER_RANK = 4
HOST_MEMORY_USABLE = 0.8  # of what the host allows: the rest is the ranks' Python, torch and the OS
# NCCL's name of each op's function (its TUNING lines, its per-collective NCCL_ALGO); a send/recv has no algorithm.
NCCL_FUNCTIONS = {"all_reduce": "AllReduce", "all_gather": "AllGather", "reduce_scatter": "ReduceScatter",
                  "broadcast": "Broadcast", "sendrecv": None}
# busbw / algbw of each op over n ranks, as nccl-tests counts it (and ranks.py: the same factors). Its
# sendrecv_perf times a ring of sends, not one pair as the send/recv matrix here: no factor.
BUS_FACTORS = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
               "reduce_scatter": lambda n: (n - 1) / n, "broadcast": lambda n: 1.0}


@dataclass(frozen=True)
class Params(SweptParams):
    """params.schema.json's $defs/params."""

    ops: list
    dtypes: list
    in_place: list
    cuda_graph: bool
    p2p_sizes_bytes: "list | None" = None

    def placements(self, op: str) -> int:
        """all_reduce and broadcast work in place only; the gather ops run each placement asked for."""
        return len(set(self.in_place)) if op in GATHER_OPS else 1

    def p2p_sizes(self) -> list:
        return self.p2p_sizes_bytes or [self.end_bytes]


def largest_size(params: Params) -> tuple[int, str]:
    """The largest message the entry sends, and the parameter that asks for it, in words."""
    found = [(params.end_bytes, f"end_bytes {params.end_bytes}")] if set(params.ops) - {"sendrecv"} else []
    if "sendrecv" in params.ops:
        p2p = max(params.p2p_sizes())
        found.append((p2p, f"p2p_sizes_bytes {p2p}" if params.p2p_sizes_bytes else f"end_bytes {p2p}"))
    return max(found)


class Collectives(Suite):
    report_order = 20
    needs_two_ranks = True  # a collective over one rank crosses no link: its busbw is 0 by definition
    moves_collective_data = True
    Params = Params
    headline_metric = "busbw_gbps"
    identity_params = ("op", "size_bytes")

    def check_plan(self, params: Params, host: Capabilities, *, world_size: int, transport: str, nodes: int) -> None:
        params.check_sweep(self.name)
        largest, culprit = largest_size(params)
        if backend_for(transport, host.cuda) == "gloo" and host.host_memory_bytes:
            ranks_here = world_size // nodes
            need = ranks_here * HOST_BUFFERS_PER_RANK * largest
            if need > HOST_MEMORY_USABLE * host.host_memory_bytes:
                raise PlanError(
                    f"collectives: {culprit} needs about {need} bytes of host memory on {ranks_here} "
                    f"rank(s) (gloo reduces in host memory), {host.host_memory} allows {int(HOST_MEMORY_USABLE * 100)}% of it; "
                    f"lower {culprit.split()[0]}")
        if host.cuda:
            # out, in and the check's temporaries: about three buffers of the largest size
            need = 3 * largest
            if need > host.gpu_memory_bytes:
                raise PlanError(
                    f"collectives: {culprit} needs about {need} bytes of GPU memory, "
                    f"the GPU has {host.gpu_memory_bytes}; lower {culprit.split()[0]}"
                )

    def configurations(self, params: Params, world_size: int, host: Capabilities) -> int:
        total = 0
        for op in params.ops:
            if op == "sendrecv":
                total += len(params.p2p_sizes()) * world_size * (world_size - 1) * len(params.dtypes)
            else:
                total += len(params.sizes()) * params.placements(op) * len(params.dtypes)
        return total

    def launch_seconds(self, params: Params, preset: str, world_size: int, host: Capabilities) -> float:
        """Per point, (warm-up + timed + graph capture + check) calls of size x busbw factor / the
        transport's bus bandwidth, plus a fixed cost per point."""
        kind = host.kind
        graph = kind == "gpu" and params.cuda_graph and preset != "gloo"
        calls = params.warmup_iters + params.repetitions * params.iters + 1 + (2 * params.iters if graph else 0)
        return sum(points * (calls * per_call + cost.POINT_OVERHEAD_S[kind] + extra)
                   for points, per_call, extra in self._points(params, preset, world_size, host))

    def measured_seconds(self, params: Params, preset: str, world_size: int, host: Capabilities) -> float:
        return sum(points * params.repetitions * params.iters * per_call for points, per_call, _ in self._points(params, preset, world_size, host))

    def _points(self, params: Params, preset: str, world_size: int, host: Capabilities) -> list:
        """[(points, seconds a call, seconds beside the calls)] of the launch's points, by the cost model."""
        kind = host.kind
        busbw = cost.busbw_gbps(preset, world_size, host) * 1e9
        factor = 2 * (world_size - 1) / world_size if world_size > 1 else 1.0
        found = []
        for op in params.ops:
            for _ in params.dtypes:
                if op == "sendrecv":
                    pairs = world_size * (world_size - 1)
                    found += [(pairs, cost.CALL_LATENCY_S[kind] + size / busbw, 0.0) for size in params.p2p_sizes()]
                    continue
                for size in params.sizes():
                    host_buffers = size * GLOO_HOST_BUFFER_S_PER_BYTE if kind == "gpu" and preset == "gloo" else 0.0
                    found.append((params.placements(op), cost.CALL_LATENCY_S[kind] + size * factor / busbw, host_buffers))
        return found

    def nccl_collectives(self, params: Params) -> list:
        return [(op, NCCL_FUNCTIONS[op]) for op in params.ops]

    def nccl_calls(self, run: Run) -> list:
        """NCCL counts a call's bytes per rank: all_gather's send, reduce_scatter's receive buffer."""
        p = run.params
        function = NCCL_FUNCTIONS[p["op"]]
        if function is None:
            return []
        return [(function, p["size_bytes"] // run.world_size if p["op"] in GATHER_OPS else p["size_bytes"])]

    def configuration(self, run: Run) -> tuple:
        p = run.params
        return ("collectives", p["op"], p["dtype"], p["in_place"], p["size_bytes"], run.world_size,
                p.get("src_rank"), p.get("dst_rank"))

    def figures(self, run: Run) -> list:
        """Each collective's busbw, by its size and dtype."""
        p = run.params
        return [Figure.median(run, "busbw_gbps", f"{p['op'].replace('_', '')}_busbw_gbps", "GB/s", True,
                              size_bytes=p["size_bytes"], dtype=p["dtype"])]

    def collective_call(self, run: Run) -> "Collective | None":
        p = run.params
        return Collective(p["op"], p["dtype"], p["in_place"], p["size_bytes"]) if p["op"] in BUS_FACTORS else None

    def collective_run_params(self, call: Collective) -> "dict | None":
        """Out of place too, though all_reduce and broadcast run here in place only: nccl-tests times both."""
        if call.op not in BUS_FACTORS:
            return None
        return {"op": call.op, "dtype": call.dtype, "in_place": call.in_place, "size_bytes": call.size_bytes}

    def bus_factor(self, op: str, world_size: int) -> "float | None":
        return BUS_FACTORS[op](world_size) if op in BUS_FACTORS else None

    def collective_bytes(self, run: Run) -> "float | None":
        """The call's size times its bus factor (busbw / algbw)."""
        size, algbw, busbw = run.params.get("size_bytes"), run.median("algbw_gbps"), run.median("busbw_gbps")
        return None if size is None or not algbw or busbw is None else size * busbw / algbw

    def timed_collective(self, run: Run) -> "tuple[str, str, int, float] | None":
        seconds = run.median("time_s")
        p = run.params
        return None if seconds is None else (p["op"], p["dtype"], p["size_bytes"], seconds)

    def label(self, run: Run) -> str:
        p = run.params
        pair = f" {p.get('src_rank')}→{p.get('dst_rank')}" if p.get("src_rank") is not None else ""
        return f"{p['op']}{pair} {p['dtype']} {human_bytes(p['size_bytes'])}, {run.world_size} ranks"

    def warnings(self, run: Run, results: HostResults) -> list:
        peak = link_summary(results.fingerprint)["link_peak_gbps"] if results.fingerprint else None
        found = run.metric("busbw_gbps")
        busbw = found["summary"]["median"] if found else None
        if peak is None or busbw is None or run.world_size < 2 or busbw <= peak:
            return []
        return [warning(
            "busbw_above_link_peak",
            f"busbw {busbw:.4g} GB/s is above the link's theoretical peak of {peak:.4g} GB/s",
            "a timing error (the timed region missed part of the collective), a fingerprint that names the wrong link, "
            "or a transport that bypassed the link (all ranks on one GPU)")]


SUITE = Collectives()
