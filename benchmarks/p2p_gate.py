"""The P2P gate on this host, alone: what each arm checked, what it found, what it cost.

On two or more GPUs (NCCL all_reduce, send/recv between every ordered pair of ranks, torch copies
between every ordered pair of devices, with P2P as the box has it and with NCCL_P2P_DISABLE=1):

    python benchmarks/p2p_gate.py                       # the box as it is: both arms ok, and the cost
    python benchmarks/p2p_gate.py --plant wrong:1       # rank 1 adds a wrong value under P2P: p2p_faulty
    python benchmarks/p2p_gate.py --plant hang:1 --limit-s 30   # rank 1 hangs under P2P: ended at 30 s
    python benchmarks/p2p_gate.py --out benchmarks/results/p2p_gate_h100x2.md

Where torch's NCCL is 2.31 or newer, NCCL's own diagnostics (NCCL_RUN_DIAGNOSTICS=1) run as a third
arm. Without a GPU it runs the CPU path (gloo, 2 ranks). The planted faults are the tests' switch
(bench.agent.gate.PLANTED_FAULT): with them the verdict must be p2p_faulty and the P2P-off arm ok.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._agent import table  # noqa: E402
from bench.agent import gate  # noqa: E402
from bench.agent.fingerprint.software import torch_versions  # noqa: E402
from bench.judging.health import p2p_gate  # noqa: E402
from bench.common.transports import BASE_NCCL_ENV  # noqa: E402
from bench.common.units import human_bytes  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--plant", help="wrong:RANK or hang:RANK in the P2P arm (the tests' switch)")
    parser.add_argument("--limit-s", type=float, default=gate.LIMIT_S, help="each arm's time limit")
    parser.add_argument("--out", type=Path, help="also write the tables to this markdown file")
    args = parser.parse_args()

    import torch

    cuda = torch.cuda.device_count() >= 2
    ranks = torch.cuda.device_count() if cuda else 2
    env = {k: v for k, v in os.environ.items() if k != gate.PLANTED_FAULT}
    env.update(BASE_NCCL_ENV if cuda else {})
    if args.plant:
        env[gate.PLANTED_FAULT] = args.plant
    nccl = torch_versions(torch)["nccl"] if cuda else None
    with tempfile.TemporaryDirectory(prefix="p2p-gate-") as work:
        record = gate.run(ranks, cuda, env, Path(work), limit_s=args.limit_s, nccl_version=nccl)
    names = ", ".join(torch.cuda.get_device_name(i) for i in range(ranks)) if cuda else "CPU, gloo"
    diagnostics = record["nccl_diagnostics"]
    lines = [f"P2P gate on {ranks} ranks ({names}), torch {torch.__version__}"
             + (f", NCCL {nccl}" if cuda else "")
             + (f"; planted {args.plant}" if args.plant else ""), "",
             f"verdict: {record['verdict']}; the gate took {record['duration_s']:.1f} s (limit {args.limit_s:g} s an arm)", ""]
    arms = [[arm["name"], arm["status"], f"{arm['duration_s']:.1f}", "+".join(arm["nccl_used"]) or "-", arm["error"] or "-"]
            for arm in record["arms"]]
    lines += [table(["arm", "status", "seconds", "NCCL used", "error"], arms), ""]
    lines += [f"NCCL's diagnostics: {diagnostics['status']}"
              + (f" ({diagnostics['reason']})" if diagnostics["reason"] else "")
              + (f", {diagnostics['duration_s']:.1f} s" if diagnostics["status"] != "not_run" else ""),
              *(f"    NCCL DIAG {line}" for line in diagnostics["lines"]), ""]
    checks = [[arm["name"], check["op"], human_bytes(check["size_bytes"]), str(check["checked"]),
               "; ".join(check["wrong"][:2]) or "right"] for arm in record["arms"] for check in arm["checks"]]
    lines += [table(["arm", "check", "size", "results compared", "wrong"], checks), ""]
    lines += p2p_gate({"gate": record}) or ["No concern: every value right in every arm."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    expected = "p2p_faulty" if args.plant else "ok"
    return 0 if record["verdict"] == expected else 1


if __name__ == "__main__":
    sys.exit(main())
