"""`ddpbench import`: another tool's result file (nccl-tests', rccl-tests') as a bundle of kind
ddpbench.imported: one host whose runs are the file's results, each keeping every iteration's time
the file holds; sealed and checked against schema/bundle.schema.json as every bundle is.

What a measured bundle has and an imported one may not, it says in `imported.lacks`: a plan (verify
cannot rerun it), the machine's fingerprint (only where taken on the machine, --fingerprint), the
transport NCCL used (only from an NCCL_DEBUG=INFO log of the same run, --nccl-log), a check of the
results. The report, "is my number normal?" and compare read it as any bundle."""

from __future__ import annotations

import hashlib
from pathlib import Path

from bench import suites
from bench.bundle import IMPORTED, SCHEMA_VERSION, write_bundle
from bench.bundle.assembly import new_run_id, tool_info
from bench.common.protocol import launch_id
from bench.common.stats import metric
from bench.common.timestamps import utc_timestamp
from bench.common.transports import PRESETS, transport_details_in_log, transports_in_log
from bench.errors import UserError
from bench.formats import nccl_tests
from bench.inputfile import read_input

HOST = "imported"
# The file's NCCL settings that change what a call measures, kept as its runs' env (their identity):
# runs of another algorithm or protocol are never pooled with NCCL's own choice.
IDENTITY_ENV = ("NCCL_ALGO", "NCCL_PROTO")


def import_file(path: Path, out: Path, fingerprint: "dict | None", nccl_log: "Path | None") -> tuple[Path, dict]:
    """Read the file, make its bundle, write it to out/<run id>/bundle.json; (path, sealed bundle)."""
    found = nccl_tests.read(path)
    if fingerprint is not None:
        _same_machine(path, found, fingerprint)
    log = read_input(nccl_log, "NCCL_DEBUG=INFO log", nccl_tests.MAX_FILE_BYTES).decode(errors="replace") if nccl_log else None
    if log is not None and not transports_in_log(log):
        raise UserError(f"--nccl-log {nccl_log}: no 'via' line of NCCL_DEBUG=INFO in it, so it says no transport; give the "
                        "output of the same run with NCCL_DEBUG=INFO set")
    run_id = new_run_id()
    document = {
        "schema_version": SCHEMA_VERSION, "kind": IMPORTED, "run_id": run_id,
        "started_at": utc_timestamp(), "finished_at": utc_timestamp(), "complete": True, "incomplete_reason": None,
        "tool": tool_info(),
        "imported": _what(path, found, fingerprint is not None, nccl_log),
        "hosts": [{"name": HOST, "runtime": "imported", "labels": [found.format], "status": "ok", "error": None,
                   "fingerprint": fingerprint, "launches": [], "runs": _runs(found, log)}],
    }
    target = out / run_id / "bundle.json"
    return target, write_bundle(target, document)


def _same_machine(path: Path, found, fingerprint: dict) -> None:
    """--fingerprint describes this machine: the file's GPUs must be among its GPUs, and a run of one
    process (every rank a GPU of one machine) no larger than they are."""
    gpus = fingerprint.get("gpus") or []
    here = {gpu.get("name") for gpu in gpus}
    away = sorted(set(found.devices) - here)
    if away or (found.format == "nccl-tests" and len(found.devices) == 1 and found.world_size > len(gpus)):
        has = f"{len(gpus)} GPU(s)" + (f" ({', '.join(sorted(filter(None, here)))})" if gpus else "")
        ran = f"{found.world_size} ranks" + (f" on {', '.join(sorted(set(found.devices)))}" if found.devices else "")
        raise UserError(f"{path}: it ran {ran}, and this machine has {has}; --fingerprint takes this machine's: import "
                        "it on the machine that ran it, or without --fingerprint")


def _what(path: Path, found, fingerprint_here: bool, nccl_log: "Path | None") -> dict:
    lacks = ["a plan: verify cannot rerun it (compare it with a bundle of `ddpbench run`)"]
    if not fingerprint_here:
        lacks.append("the machine's fingerprint: import it with --fingerprint on the machine that ran it")
    if nccl_log is None:
        lacks.append("the transport NCCL used: give the run's NCCL_DEBUG=INFO output with --nccl-log")
    if not found.checked:
        lacks.append("a check of its results: some were not checked (-c 0)")
    if found.format == "rccl-tests":
        lacks.append("each iteration's time and the RCCL version: rccl-tests' list has neither")
    elif not any(len(result.times_us) > 1 for result in found.results):
        lacks.append("each iteration's time: run nccl-tests with -I 1 for them")
    lacks += found.left_out[:16 - len(lacks)]
    return {"format": found.format, "format_version": found.version, "file": path.name[:255],
            "file_sha256": hashlib.sha256(read_input(path, "result file", nccl_tests.MAX_FILE_BYTES)).hexdigest(),
            "program": found.program, "args": found.args, "env": found.env, "started": found.started,
            "finished": found.finished, "devices": found.devices,
            "nccl_log": nccl_log.name[:255] if nccl_log else None, "fingerprint_here": fingerprint_here, "lacks": lacks}


def _preset(env: dict) -> str:
    """The transport preset whose environment the file's holds (the most it holds), else NCCL's default."""
    held = [p for p in PRESETS.values() if p.backend == "nccl" and all(env.get(k) == v for k, v in p.env.items())]
    return max(held, key=lambda p: len(p.env)).name


def _runs(found, log: "str | None") -> list:
    suite = next(s for s in suites.registry().values() if s.bus_factor("all_reduce", 2) is not None)
    preset = _preset(found.env)
    used = transports_in_log(log) if log else []
    transport = {"preset": preset, "backend": "nccl", "env": dict(PRESETS[preset].env), "nccl_used": used,
                 "nccl_via": transport_details_in_log(log) if log else [],
                 "matches_preset": set(used) <= PRESETS[preset].accepts,
                 **({"nccl_version": found.nccl_version} if found.nccl_version else {})}
    env = {name: found.env[name] for name in IDENTITY_ENV if name in found.env}
    runs = []
    for result in found.results:
        call = result.call
        factor = suite.bus_factor(call.op, found.world_size)
        record = {"suite": suite.name, "params": suite.collective_run_params(call), "world_size": found.world_size,
                  "transport": dict(transport), "launch_id": launch_id(0, suite.name, preset, found.world_size, result.repeat),
                  "repeat": result.repeat, **({"env": env} if env else {})}
        if result.wrong:
            record.update(status="failed", error=f"{found.format}' check found {result.wrong} wrong element(s)", metrics={})
        else:
            algbw = [call.size_bytes / (t * 1e3) for t in result.times_us]
            record.update(status="ok", error=None, metrics={
                "time_s": metric([t * 1e-6 for t in result.times_us]),
                "algbw_gbps": metric(algbw), "busbw_gbps": metric([b * factor for b in algbw])})
        runs.append(record)
    return runs
