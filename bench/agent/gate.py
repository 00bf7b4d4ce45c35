"""The gate before training: do this host's GPUs add and copy right, with P2P as the box has it
and with P2P forced off?

Consumer and workstation PCIe boxes hang or return wrong sums with P2P on (NVIDIA/nccl #1999,
OpenRLHF #1064, pytorch #150734), and copy benchmarks pass there while NCCL's results are wrong
(club-3090 #902, #922). So before the first launch on a host with two or more GPUs (a CPU has no
P2P: there the gate runs only where a test planted a fault, gloo standing in, so that CI watches its
path), the gate runs
two arms, each a fresh set of processes (NCCL reads NCCL_P2P_DISABLE once per process) under a
time limit: `p2p` in the environment the `default` preset's launches get, `p2p_off` with
NCCL_P2P_DISABLE=1 (on the CPU only as the control of a `p2p` arm that went wrong). Each arm runs
all_reduce at a few sizes, a send/recv between every ordered pair of ranks and, on GPUs, a torch
copy between every ordered pair of devices (peer to peer where the driver allows it in `p2p`,
through host memory in `p2p_off`), and compares every value with the one expected. Where the NCCL
torch loads has active diagnostics (2.31 and later), a third arm starts NCCL's communicator with
NCCL_RUN_DIAGNOSTICS=1, P2P as the box has it: NCCL then checks each GPU pair it would join directly
and names a failing pair and the path between them, a control from outside ddpbench's own checks.

The record goes into the host's fingerprint (`gate`, schema/fingerprint.schema.json) with its
verdict, what NCCL's diagnostics found (or why they did not run) and its cost in seconds;
bench.judging.health.p2p_gate says each finding in one line with the fix,
bench.judging.machine marks the runs that took a path the gate found wrong, and `reroute` sends the
plan's default launches through host memory where only P2P was wrong.

PLANTED_FAULT, an environment variable the plan schema's env allow-list refuses and that only this
module reads, makes one rank of the `p2p` arm contribute a wrong value (`wrong:RANK`) or hang
(`hang:RANK`), as a broken P2P path would, so that the tests watch the gate catch both; the record
names it, so that a bundle made so cannot pass for a finding.
"""
from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Callable

from bench.agent.spawn import stops_deferred
from bench.common import protocol
from bench.common.algorithms import parse_version
from bench.judging.health import p2p_gate
from bench.common.host import Capabilities
from bench.common.nccl_log import MAX_DIAG_CHARS, diagnostics_report
from bench.common.paths import SOURCE_ROOT
from bench.common.polling import wait_until
from bench.common.transports import BASE_NCCL_ENV, transports_in_log

PLANTED_FAULT = "DDPBENCH_GATE_FAULT"
# Per arm. Start-up (CUDA contexts, NCCL's communicators over 8 GPUs) takes seconds; a hang lasts for ever.
LIMIT_S = 90.0
# On GPUs NCCL picks its protocol by size: LL for small messages, LL128 and Simple for large ones.
GPU_SIZES = (4 << 10, 1 << 20, 64 << 20)
CPU_SIZES = (4 << 10, 1 << 20)
ARMS = {"p2p": {}, "p2p_off": {"NCCL_P2P_DISABLE": "1"}}
# NCCL's active diagnostics (2.31 and later) run as its communicator starts: their arm needs no more
# than that and one small all_reduce.
DIAGNOSTICS_ENV = {"NCCL_RUN_DIAGNOSTICS": "1"}
DIAGNOSTICS_SINCE = (2, 31)
OPS = ("all_reduce", "send_recv", "device_copy")
# What a plan's entry or a hosts file sets when it asks for a P2P setting of its own: the gate does not overrule it.
P2P_SETTINGS = ("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL")
MAX_WRONG_PLACES = 16  # per check: the first few wrong places say enough


def ranks_to_check(host: Capabilities, launches: list, env: "dict | None" = None) -> int:
    """How many ranks the gate runs: every GPU of a host with two or more; 0 where there is nothing to
    check (one GPU, one rank, no GPU). On a CPU where `env` (the ranks' environment) plants a fault,
    the most ranks any of `launches` runs there."""
    if not launches:  # nothing left to run (a resumed run)
        return 0
    if host.cuda:
        return host.gpu_count if host.gpu_count >= 2 else 0
    if not (env or {}).get(PLANTED_FAULT):
        return 0
    most = max((launch.nproc_per_node for launch in launches), default=0)
    return most if most >= 2 else 0


def diagnostics_not_run(cuda: bool, nccl_version: "str | None") -> "str | None":
    """Why the gate runs no NCCL diagnostics arm here, or None where it does."""
    if not cuda:
        return "no GPU: the ranks talk over gloo, not NCCL"
    version = parse_version(nccl_version)
    if version is None:
        return "the version of the NCCL torch loads is not known"
    if version[:2] < DIAGNOSTICS_SINCE:
        return f"NCCL {nccl_version} has no active diagnostics (2.31 or newer)"
    return None


def gate_ranks(launches: list, host: Capabilities, env: dict) -> int:
    """The ranks the gate would check before these launches, in the agent's environment `env` (fewer than
    2: no gate)."""
    ranks = ranks_to_check(host, launches, env)
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if host.cuda and visible is not None:  # the ranks see only these GPUs, as the launches' ranks do
        ranks = min(ranks, len([device for device in visible.split(",") if device.strip()]))
    return ranks


def check_host(launches: list, host: Capabilities, fingerprint: dict, work: Path, host_env: dict,
               progress: Callable[[protocol.Event], None]) -> None:
    """The gate before the first of `launches` (those that will run): its record goes into the
    fingerprint, its line (where it found something wrong) to `progress`, and the default launches
    go without P2P where only P2P was wrong."""
    env = {**os.environ, **(BASE_NCCL_ENV if host.cuda else {}), **host_env}
    ranks = gate_ranks(launches, host, env)
    if ranks < 2:
        return
    progress(protocol.Stage("P2P gate"))
    fingerprint["gate"] = record = run(ranks, host.cuda, env, work, nccl_version=host.nccl_version)
    reroute(launches, record)
    for line in p2p_gate(fingerprint):
        progress(protocol.Warned(line))


def run(ranks: int, cuda: bool, env: dict, work: Path, limit_s: float = LIMIT_S,
        nccl_version: "str | None" = None) -> dict:
    """Both arms, one after the other, each under limit_s, then NCCL's diagnostics where `nccl_version`
    has them; the gate's record. On the CPU the P2P-off arm runs only where the first found something
    wrong: gloo ignores NCCL_P2P_DISABLE, so there it repeats the first arm's path, and is worth its
    seconds only as the control."""
    began = time.monotonic()
    sizes = GPU_SIZES if cuda else CPU_SIZES
    arms = []
    for name, extra in ARMS.items():
        if cuda or not arms or arms[0]["status"] != "ok":
            arms.append(_arm(name, ranks, cuda, env, extra, sizes, work / name, limit_s))
    diagnostics = _diagnostics(ranks, cuda, env, work / "nccl_diagnostics", limit_s, nccl_version)
    p2p_ok, off_ok = arms[0]["status"] == "ok", all(arm["status"] == "ok" for arm in arms[1:])
    return {
        "ranks": ranks, "backend": "nccl" if cuda else "gloo", "sizes_bytes": list(sizes), "limit_s": limit_s,
        "planted_fault": (env.get(PLANTED_FAULT) or "")[:64] or None, "arms": arms,
        "verdict": "ok" if p2p_ok and off_ok else "p2p_faulty" if off_ok else "p2p_off_faulty" if p2p_ok else "faulty",
        "nccl_diagnostics": diagnostics, "rerouted_launches": [], "duration_s": round(time.monotonic() - began, 3),
    }


def _diagnostics(ranks: int, cuda: bool, env: dict, folder: Path, limit_s: float, nccl_version: "str | None") -> dict:
    """NCCL's active diagnostics' arm: its communicator started with DIAGNOSTICS_ENV and one all_reduce
    of the smallest size; what rank 0's report says (nccl_log.diagnostics_report), or why it did not run."""
    why = diagnostics_not_run(cuda, nccl_version)
    if why:
        return {"status": "not_run", "reason": why, "peer_accesses_passed": None, "peer_accesses_tested": None,
                "failed_pairs": [], "nccl_duration_ms": None, "lines": [], "check_status": None, "error": None,
                "duration_s": 0.0}
    arm = _arm("nccl_diagnostics", ranks, cuda, env, DIAGNOSTICS_ENV, GPU_SIZES[:1], folder, limit_s, ops=("all_reduce",))
    silent = "NCCL printed no NCCL DIAG line" + (f" ({arm['error']})" if arm["error"] else "")
    found = diagnostics_report((folder / "rank0.log").read_text(errors="replace")) or {
        "status": "inconclusive", "reason": silent[:MAX_DIAG_CHARS], "peer_accesses_passed": None,
        "peer_accesses_tested": None, "failed_pairs": [], "nccl_duration_ms": None, "lines": []}
    return {**found, "check_status": arm["status"], "error": arm["error"], "duration_s": arm["duration_s"]}


def reroute(launches: list, record: dict) -> None:
    """Where the gate found P2P wrong and P2P off right, the plan goes on without P2P where it
    allows it: every launch of the `default` preset with two or more ranks on this host whose
    environment sets no P2P setting of its own (P2P_SETTINGS, from the plan's entry or the hosts
    file) gets NCCL_P2P_DISABLE=1 and is labelled (Launch.p2p_off_by_gate). The others run as
    planned: p2p_off, socket and ib need no change, a P2P setting asked for is kept, and what goes
    peer to peer past NCCL (the copy suite's device-to-device copies, ddp's copy-engine all-reduce)
    cannot go without it; their runs are marked (bench.judging.machine)."""
    if record["verdict"] != "p2p_faulty":
        return
    for launch in launches:
        if launch.preset == "default" and launch.nproc_per_node >= 2 and not set(P2P_SETTINGS) & set(launch.env):
            launch.env = {**launch.env, "NCCL_P2P_DISABLE": "1"}
            launch.p2p_off_by_gate = True
            record["rerouted_launches"].append(launch.id)


# --- One arm ---------------------------------------------------------------------------------

def _arm(name: str, ranks: int, cuda: bool, env: dict, added: dict, sizes: tuple, folder: Path, limit_s: float,
         ops: tuple = OPS) -> dict:
    """One arm's processes, `env` with what the arm adds, checking `ops` (device copies on GPUs only), to
    their end or limit_s; what they found."""
    # Absolute: the ranks' store is a file:// URL, where a relative path would name a host ("out") and
    # a folder under / (an agent run with --out out, as on Slurm, hung until the limit there).
    folder = folder.resolve()
    shutil.rmtree(folder, ignore_errors=True)  # a resumed run's earlier gate
    folder.mkdir(parents=True)
    results = folder / "results.jsonl"
    spec = {"arm": name, "ranks": ranks, "cuda": cuda, "sizes": list(sizes), "ops": list(ops),
            "store": str(folder / "store"), "results": str(results), "limit_s": limit_s}
    (folder / "spec.json").write_text(json.dumps(spec))
    env = {**env, **added, "WORLD_SIZE": str(ranks), "OMP_NUM_THREADS": env.get("OMP_NUM_THREADS", "1"),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(SOURCE_ROOT), env.get("PYTHONPATH")]))}
    began = time.monotonic()
    processes = []
    try:
        with stops_deferred():  # a stop within a start would hide that rank from the `finally`
            for rank in range(ranks):
                with open(folder / f"rank{rank}.log", "w") as log:
                    processes.append(subprocess.Popen(
                        [sys.executable, "-m", __name__, str(folder / "spec.json")], stdout=log, stderr=subprocess.STDOUT,
                        env={**env, "RANK": str(rank), "LOCAL_RANK": str(rank)}, start_new_session=True))
        wait_until(lambda: all(p.poll() is not None for p in processes), within_s=limit_s, every_s=0.1)
        pending = [rank for rank, p in enumerate(processes) if p.poll() is None]
    finally:
        for process in processes:
            _end(process)
    duration = round(time.monotonic() - began, 3)
    logs = [(folder / f"rank{rank}.log").read_text(errors="replace") for rank in range(ranks)]
    checks, lines = _checks(results)
    expected_lines = len(sizes) * ((ranks if "all_reduce" in ops else 0) + (ranks if "send_recv" in ops else 0)
                                   + (1 if cuda and "device_copy" in ops else 0))
    failed = [rank for rank, p in enumerate(processes) if rank not in pending and p.returncode != 0]
    status, error = "ok", None
    if pending:
        status, error = "hung", f"rank(s) {', '.join(map(str, pending))} still running after {limit_s:g} s: ended"
    elif failed:
        status, error = "failed", f"rank {failed[0]} exited with status {processes[failed[0]].returncode}: {_last_line(logs[failed[0]])}"
    elif lines < expected_lines:
        status, error = "failed", f"{lines} of {expected_lines} checks reported"
    if any(check["wrong"] for check in checks):
        status = "wrong"
    return {"name": name, "env": dict(added), "status": status, "error": error,
            "duration_s": duration, "nccl_used": transports_in_log("\n".join(logs)) if cuda else [], "checks": checks}


def _end(process: subprocess.Popen) -> None:
    """The rank and anything it started: TERM, then KILL what is left."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if process.poll() is not None:
            return
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        if wait_until(lambda: process.poll() is not None, within_s=3):
            return


def _last_line(text: str) -> str:
    return (text.strip().splitlines() or ["no output"])[-1][:300]


def _checks(results: Path) -> tuple[list, int]:
    """Every (op, size) the ranks reported, their places checked and the wrong ones; and how many
    reports there were."""
    reports = [json.loads(line) for line in (results.read_text().splitlines() if results.exists() else []) if line.endswith("}")]
    merged: dict = {}
    for report in reports:
        check = merged.setdefault((report["op"], report["size_bytes"]),
                                  {"op": report["op"], "size_bytes": report["size_bytes"], "checked": 0, "wrong": []})
        check["checked"] += report["checked"]
        check["wrong"] = (check["wrong"] + report["wrong"])[:MAX_WRONG_PLACES]
    return list(merged.values()), len(reports)


# --- A rank of an arm (python -m bench.agent.gate SPEC) ----------------------------------------

def _values(torch, count: int, seed: int, device):
    """seed + i, mod 251, plus 1: distinct neighbours, exact in float32 when summed over many ranks."""
    return ((torch.arange(count, device=device) + seed) % 251 + 1).to(torch.float32)


def _wrong_places(torch, got, expected, where: str) -> list:
    if torch.equal(got, expected):
        return []
    bad = (got != expected).nonzero()
    first = bad[0].item()
    return [f"{where}: {len(bad)} of {got.numel()} values wrong, element {first} is {got[first].item():g}, "
            f"expected {expected[first].item():g}"]


def _all_reduce(torch, dist, device, rank: int, ranks: int, count: int, planted_wrong: bool) -> tuple[int, list]:
    buffer = _values(torch, count, rank, device)
    if planted_wrong:
        buffer[0] += 1
    dist.all_reduce(buffer)
    expected = sum(_values(torch, count, r, device) for r in range(ranks))
    return 1, _wrong_places(torch, buffer, expected, f"rank{rank}")


def _send_recv(torch, dist, device, rank: int, ranks: int, count: int) -> tuple[int, list]:
    """A shift ring per distance: every rank sends to rank + shift and receives from rank - shift,
    so every ordered pair is checked once (NCCL wants all ranks in a batch's first round)."""
    wrong = []
    for shift in range(1, ranks):
        to, source = (rank + shift) % ranks, (rank - shift) % ranks
        incoming = torch.zeros(count, device=device)
        for request in dist.batch_isend_irecv([dist.P2POp(dist.isend, _values(torch, count, rank, device), to),
                                               dist.P2POp(dist.irecv, incoming, source)]):
            request.wait()
        wrong += _wrong_places(torch, incoming, _values(torch, count, source, device), f"rank{source}→rank{rank}")
    return ranks - 1, wrong


def _device_copies(torch, arm: str, count: int) -> tuple[int, list]:
    """A copy between every ordered pair of GPUs, as torch's copy_ makes it (peer to peer where the
    driver allows it: the copy suite's path), or staged through host memory in the P2P-off arm."""
    wrong, pairs = [], 0
    devices = [torch.device("cuda", i) for i in range(torch.cuda.device_count())]
    for a in devices:
        for b in devices:
            if a == b:
                continue
            source, target = _values(torch, count, a.index, a), torch.zeros(count, device=b)
            target.copy_(source if arm == "p2p" else source.cpu())
            torch.cuda.synchronize(b)
            pairs += 1
            wrong += _wrong_places(torch, target, _values(torch, count, a.index, b), f"cuda{a.index}→cuda{b.index}")
    return pairs, wrong


def _planted(arm: str, rank: int) -> str:
    """'wrong', 'hang' or '' for this rank: PLANTED_FAULT applies to the `p2p` arm only, as a broken
    P2P path would, so that the P2P-off arm stays right."""
    kind, _, which = (os.environ.get(PLANTED_FAULT) or "").partition(":")
    return kind if arm == "p2p" and which.strip() == str(rank) and kind in ("wrong", "hang") else ""


def rank_main(spec_path: str) -> None:
    import torch
    import torch.distributed as dist

    spec = json.loads(Path(spec_path).read_text())
    rank, ranks, arm = int(os.environ["RANK"]), spec["ranks"], spec["arm"]
    device = torch.device("cuda", rank) if spec["cuda"] else torch.device("cpu")
    if spec["cuda"]:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if spec["cuda"] else "gloo", init_method=f"file://{spec['store']}", rank=rank,
                            world_size=ranks, timeout=timedelta(seconds=spec["limit_s"]),
                            device_id=device if spec["cuda"] else None)
    # NCCL writes its log and its diagnostics' report (at the communicator's start) through C's stdout,
    # buffered in a file: flushed here and after each check, what it said survives a rank the limit ends.
    flush_stdout = ctypes.CDLL(None).fflush
    flush_stdout(None)
    planted = _planted(arm, rank)
    if planted == "hang":
        time.sleep(spec["limit_s"] * 10)  # as a rank stuck in a transfer that never completes: the limit ends it

    def report(op: str, size: int, found: tuple[int, list]) -> None:
        with open(spec["results"], "a") as out:
            out.write(json.dumps({"rank": rank, "op": op, "size_bytes": size, "checked": found[0], "wrong": found[1]}) + "\n")
        flush_stdout(None)

    ops = spec["ops"]
    for size in spec["sizes"] if "all_reduce" in ops else ():
        report("all_reduce", size, _all_reduce(torch, dist, device, rank, ranks, size // 4, planted == "wrong"))
    for size in spec["sizes"] if "send_recv" in ops else ():
        report("send_recv", size, _send_recv(torch, dist, device, rank, ranks, size // 4))
    if spec["cuda"] and rank == 0 and "device_copy" in ops:
        for size in spec["sizes"]:
            report("device_copy", size, _device_copies(torch, arm, size // 4))
    dist.destroy_process_group()


if __name__ == "__main__":
    rank_main(sys.argv[1])
