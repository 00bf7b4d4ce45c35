"""nccl-tests' and rccl-tests' result files, read (`ddpbench import`) and written (`ddpbench export
--format nccl-tests`), as their sources write them (schema/nccl-tests.schema.json says where).

nccl-tests' `-J FILE.json` (file versions 2 and 3): one object, its `results` a row per size with
the out-of-place and in-place call's time (microseconds, the mean of the timed iterations), algbw,
busbw and wrong elements, and with `-I 1` each iteration's time. rccl-tests' `--output_file` (JSON):
a list, a row per size and placement, camelCase keys, no per-iteration times. Which collective a
file timed: nccl-tests' program (args[0], all_reduce_perf ...), rccl-tests' `name`.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from bench import schemas, suites
from bench.agent.fingerprint.environment import allowed
from bench.common.nccl_log import version_text
from bench.common.run import Run
from bench.errors import UserError
from bench.inputfile import read_json_text
from bench.suites.base import Collective

READ_VERSIONS = (2, 3)
WRITTEN_VERSION = 3
MAX_FILE_BYTES = 64 * 1024 * 1024  # 100,000 iterations of 100 sizes is a tenth of it
MAX_SAMPLES = 10000  # a bundle's metric holds at most this many
MAX_REPEATS = 20  # a bundle's run repeat at most (-N cycles)
# nccl-tests' programs and rccl-tests' names -> the collective each times.
PROGRAMS = {"all_reduce_perf": "all_reduce", "all_gather_perf": "all_gather", "reduce_scatter_perf": "reduce_scatter",
            "broadcast_perf": "broadcast"}
RCCL_NAMES = {"AllReduce": "all_reduce", "AllGather": "all_gather", "ReduceScatter": "reduce_scatter", "Broadcast": "broadcast"}
# nccl-tests' type names (src/common.cu test_typenames) -> the dtypes a run names.
TYPES = {"float": "float32", "half": "float16", "bfloat16": "bfloat16"}
REDUCING = ("all_reduce", "reduce_scatter")  # summed: their redop must be sum
RATIO_CHECKED_FROM_GBPS = 0.01  # below it, %lf's six decimals leave busbw / algbw too coarse to check
PLACEMENTS = (("out_of_place", False), ("in_place", True))


@dataclass(frozen=True)
class Result:
    """One timed collective of the file: the call, each iteration's time (only the file's mean where it
    has no per-iteration times), the wrong elements its check found (None: not checked), which cycle."""

    call: Collective
    times_us: tuple
    wrong: "int | None"
    repeat: int


@dataclass(frozen=True)
class ResultFile:
    format: str  # "nccl-tests" or "rccl-tests"
    version: "int | None"  # nccl-tests' file version
    program: "str | None"
    args: list
    env: dict  # the allow-listed part of its environment
    nccl_version: "str | None"
    world_size: int
    devices: list  # the GPUs' names, one a process
    started: "str | None"
    finished: "str | None"
    results: list
    left_out: list  # what of the file no run holds, in words
    checked: bool  # its results were checked (nccl-tests -c)


def read(path: Path) -> ResultFile:
    """The file's results, checked against schema/nccl-tests.schema.json and against themselves; one
    UserError naming the field and the fix for anything ddpbench cannot hold or would misread."""
    document = read_json_text(path, "nccl-tests or rccl-tests result", MAX_FILE_BYTES)
    if isinstance(document, list):
        _check(path, document, "rccl_tests")
        return _rccl(path, document)
    if not isinstance(document, dict):
        raise UserError(f"{path}: a {type(document).__name__}, not an nccl-tests result (an object) or rccl-tests' (a list); "
                        "give the file of nccl-tests' -J or rccl-tests' --output_file")
    version = document.get("version")
    if version not in READ_VERSIONS:
        raise UserError(f"{path}: field version: {repr(version)[:20]} is not an nccl-tests JSON file version ddpbench reads "
                        f"({', '.join(map(str, READ_VERSIONS))}); write it with nccl-tests 2.18 to 2.19 (-J FILE.json)")
    _check(path, document, "nccl_tests")
    return _nccl(path, document)


def _check(path: Path, document, definition: str) -> None:
    problem = schemas.first_problem(document, "nccl-tests", definition)
    if problem:
        raise UserError(f"{path}: {problem}; this is not a result file nccl-tests or rccl-tests writes (schema/nccl-tests.schema.json)")


def _suite():
    """The suite that times nccl-tests' collectives."""
    found = [suite for suite in suites.registry().values() if suite.bus_factor("all_reduce", 2) is not None]
    if not found:
        raise UserError("no suite times NCCL's collectives here, so nothing can hold an nccl-tests result")
    return found[0]


def _nccl(path: Path, document: dict) -> ResultFile:
    args = document.get("args") or []
    program = Path(args[0]).name if args else None
    if program not in PROGRAMS:
        raise UserError(f"{path}: field args[0]: {program!r} is not a program whose results ddpbench holds "
                        f"({', '.join(PROGRAMS)}); import the result of one of those")
    config = document["config"]
    world_size = config["nthreads"] * config["ngpus"] * len(config["devices"])
    results, left_out, repeats = [], [], {}
    checked = True
    for i, row in enumerate(document["results"]):
        where = f"field results[{i}]"
        for key, in_place in PLACEMENTS:
            measured = row.get(key)
            if measured is None:
                continue
            if "time" not in measured:
                raise UserError(f"{path}: {where}.{key}: it holds cpu_time (nccl-tests -C 1), the host's time, not the GPU's; "
                                "import a result timed without -C")
            if row["size"] == 0:
                left_out.append(f"results[{i}].{key}: 0 bytes, which move nothing")
                continue
            call = _call(path, where, PROGRAMS[program], row["type"], row["redop"], row["root"].strip(), in_place, row["size"])
            _check_ratio(path, f"{where}.{key}", call.op, measured, world_size)
            per_iter = row.get(f"{key}_per_iter")
            times = _times(path, f"{where}.{key}", measured, per_iter)
            wrong = None if measured["nwrong"] is None else int(measured["nwrong"])
            checked = checked and wrong is not None
            repeat = repeats[call] = repeats.get(call, 0) + 1
            results.append(Result(call, times, wrong, _repeat(path, where, repeat)))
    code = document["nccl_version"]
    return ResultFile("nccl-tests", document["version"], program, args[1:], _env(document.get("env") or []),
                      version_text(code) if code else None, world_size, [d["device_info"] for d in config["devices"]],
                      document.get("start_time"), document.get("end_time"), results, left_out, checked)


def _rccl(path: Path, rows: list) -> ResultFile:
    results, left_out, repeats = [], [], {}
    checked = True
    first = rows[0]
    world_size = first.get("ranks", 0) * first.get("gpusPerRank", 1) if "ranks" in first else first.get("gpus")
    if not world_size:
        raise UserError(f"{path}: field [0]: neither gpus nor ranks: how many GPUs ran it is not said; give rccl-tests' own file")
    for i, row in enumerate(rows):
        where = f"field [{i}]"
        here = row.get("ranks", 0) * row.get("gpusPerRank", 1) if "ranks" in row else row.get("gpus")
        if here != world_size:
            raise UserError(f"{path}: {where}: {here} GPUs where [0] has {world_size}; a file of one run has one world size")
        if row["name"] not in RCCL_NAMES:
            raise UserError(f"{path}: {where}.name: {row['name']!r} is not a collective whose results ddpbench holds "
                            f"({', '.join(RCCL_NAMES)}); import the result of one of those")
        if row["size"] == 0:
            left_out.append(f"[{i}]: 0 bytes, which move nothing")
            continue
        call = _call(path, where, RCCL_NAMES[row["name"]], row["type"], row["redop"], "0", bool(row["inPlace"]), row["size"])
        measured = {"time": row["time"], "alg_bw": row["algBw"], "bus_bw": row["busBw"]}
        _check_ratio(path, where, call.op, measured, world_size)
        wrong = str(row.get("#wrong", "N/A"))
        checked = checked and wrong != "N/A"
        repeat = repeats[call] = repeats.get(call, 0) + 1
        results.append(Result(call, _times(path, where, measured, None), None if wrong == "N/A" else int(wrong),
                              _repeat(path, where, repeat)))
    return ResultFile("rccl-tests", None, None, [], {}, None, world_size, [], None, None, results, left_out, checked)


def _call(path: Path, where: str, op: str, type_name: str, redop: str, root: str, in_place: bool, size: int) -> Collective:
    if type_name not in TYPES:
        raise UserError(f"{path}: {where}.type: {type_name!r}; ddpbench's collectives time "
                        f"{', '.join(f'{v} ({k})' for k, v in TYPES.items())}: import a result of one of those (-d float)")
    if op in REDUCING and redop != "sum":
        raise UserError(f"{path}: {where}.redop: {redop!r}; ddpbench's {op} sums: import a result of -o sum")
    if op == "broadcast" and root not in ("0", "-1"):
        raise UserError(f"{path}: {where}.root: {root!r}; ddpbench's broadcast sends from rank 0: import a result of -r 0")
    call = Collective(op, TYPES[type_name], in_place, size)
    if _suite().collective_run_params(call) is None:
        raise UserError(f"{path}: {where}: no suite here times {op}; import a result of {', '.join(PROGRAMS)}")
    return call


def _check_ratio(path: Path, where: str, op: str, measured: dict, world_size: int) -> None:
    """busbw / algbw is the op's bus factor at the file's world size: a file whose ranks are miscounted
    (or whose figures were edited) would be held as another machine's."""
    algbw, busbw = measured["alg_bw"], measured["bus_bw"]
    factor = _suite().bus_factor(op, world_size)
    if algbw >= RATIO_CHECKED_FROM_GBPS and not math.isclose(busbw / algbw, factor, rel_tol=1e-3, abs_tol=1e-6 / algbw):
        raise UserError(f"{path}: {where}: bus_bw / alg_bw is {busbw / algbw:.4g}, but {op} over {world_size} ranks (the "
                        f"file's count) gives {factor:.4g}; this file's figures do not agree with its ranks: get the original")


def _times(path: Path, where: str, measured: dict, per_iter: "dict | None") -> tuple:
    """Each iteration's time that nccl-tests summarized (past the skipped ones), else its mean alone."""
    if per_iter is None:
        times = [measured["time"]]
    else:
        times = per_iter["times_us"][per_iter.get("skipped_iterations", 0):]
        if not times:
            raise UserError(f"{path}: {where}_per_iter: every iteration skipped (-K), none timed; get a result with timed iterations")
    if len(times) > MAX_SAMPLES:
        raise UserError(f"{path}: {where}_per_iter: {len(times)} iterations, more than the {MAX_SAMPLES} a bundle holds "
                        f"a run; import a result of -n {MAX_SAMPLES} or fewer")
    if min(times) <= 0:
        raise UserError(f"{path}: {where}: a time of 0 microseconds, which no call takes; get the original")
    return tuple(times)


def _repeat(path: Path, where: str, repeat: int) -> int:
    if repeat > MAX_REPEATS:
        raise UserError(f"{path}: {where}: the same call a {repeat}th time; a bundle holds {MAX_REPEATS} repeats of one "
                        f"(nccl-tests -N {MAX_REPEATS} at most)")
    return repeat


def _env(lines: list) -> dict:
    """The file's environment, the variables that steer NCCL and CUDA only (never its paths or secrets)."""
    pairs = dict(line.split("=", 1) for line in lines if "=" in line)
    return {name: value for name, value in allowed(pairs).items() if len(value) <= 4096 and value.isprintable()}


# --- Written --------------------------------------------------------------------------------------

def files(bundle: dict) -> dict:
    """{file name: nccl-tests' -J document} of the bundle's runs that time a collective nccl-tests has a
    program for: one file per host, launch and collective, as one nccl-tests run writes."""
    groups: dict = {}
    for host in bundle["hosts"]:
        for run in map(Run, host["runs"]):
            call = suites.get(run.suite).collective_call(run)
            if call is None or not run.ok or "time_s" not in run.metrics:
                continue
            name = f"{host['name']}-{run.launch_id}-{call.op}.json"
            groups.setdefault(name, (host, []))[1].append((call, run))
    return {name: _document(bundle, host, rows) for name, (host, rows) in groups.items()}


def _document(bundle: dict, host: dict, rows: list) -> dict:
    """nccl-tests' -J document of one group's runs: a row per size and dtype, each run in its placement."""
    program = next(program for program, op in PROGRAMS.items() if op == rows[0][0].op)
    world_size = rows[0][1].world_size
    by_row: dict = {}
    for call, run in sorted(rows, key=lambda item: (item[0].dtype, item[0].size_bytes)):
        by_row.setdefault((call.dtype, call.size_bytes), {})[call.in_place] = (call, run)
    results = []
    dtype_names = {v: k for k, v in TYPES.items()}
    for (dtype, size), placed in by_row.items():
        call, run = next(iter(placed.values()))
        row = {"size": size, "count": size // _width(dtype), "type": dtype_names.get(dtype, dtype),
               "redop": "sum" if call.op in REDUCING else "none", "root": f"{0 if call.op == 'broadcast' else -1:6d}"}
        for key, in_place in PLACEMENTS:
            if in_place not in placed:
                row[key] = None
                continue
            measured = placed[in_place][1]
            row[key], row[f"{key}_per_iter"] = _measured(measured, size, _suite().bus_factor(call.op, world_size))
        row.update(actual_iterations=len(run.samples("time_s")), experiment_name="")
        results.append(row)
    fp = host.get("fingerprint") or {}
    first_gpu = (fp.get("gpus") or [{}])[0]
    # as one process of world_size GPUs (-g) writes it: its first GPU only
    devices = [{"rank": 0, "group": 0, "pid": 0, "hostname": host["name"], "device": 0,
                "device_hex": (first_gpu.get("pci_bus_id") or "")[:10], "device_info": first_gpu.get("name") or "unknown"}]
    bandwidths = [placement["bus_bw"] for row in results for key, _ in PLACEMENTS if (placement := row[key])]
    sizes = [row["size"] for row in results]
    nccl = ((fp.get("software") or {}).get("nccl") or "0.0.0").split(".")
    # A sample of ddpbench is the mean of `iters` calls: nccl-tests' iteration of -m aggregated calls.
    first = rows[0][1]
    iterations, aggregated = len(first.samples("time_s")), first.params.get("iters", 1)
    return {
        "version": WRITTEN_VERSION, "start_time": bundle["started_at"].replace("T", " ").rstrip("Z"),
        "args": [program, "-b", str(min(sizes)), "-e", str(max(sizes)), "-g", str(world_size), "-n", str(iterations),
                 "-m", str(aggregated), "-I", "1"], "env": [],
        "nccl_version": int(nccl[0]) * 10000 + int(nccl[1]) * 100 + int(nccl[2]),
        "config": {"nthreads": 1, "ngpus": world_size, "minimum_bytes": min(sizes), "maximum_bytes": max(sizes),
                   "step_bytes": 0, "warmup_iters": first.params.get("warmup_iters", 0), "iterations": iterations,
                   "aggregated_iterations": aggregated, "validation": 1, "graph": int(bool(first.params.get("cuda_graph"))),
                   "blocking_collectives": "false", "per_iter_timing": "true", "per_iter_skip": 0, "parallel_init": "false",
                   "devices": devices},
        "results": results,
        "out_of_bounds": {"count": 0, "okay": "true"},
        "average_bus_bandwidth": {"bandwidth": sum(bandwidths) / len(bandwidths), "okay": "unchecked"},
        "errors": [], "end_time": bundle["finished_at"].replace("T", " ").rstrip("Z"),
    }


def _width(dtype: str) -> int:
    return int(re.search(r"\d+", dtype)[0]) // 8


def _measured(run: Run, size: int, factor: float) -> tuple[dict, dict]:
    """A placement's figures and its per-iteration block, nccl-tests' way: its time the mean, its
    bandwidths of that mean, its statistics as src/util.cu computeIterStats takes them (population
    stdev, p50 the middle of the sorted times)."""
    times = [t * 1e6 for t in run.samples("time_s")]
    ordered, n = sorted(times), len(times)
    mean = sum(times) / n
    stdev = math.sqrt(sum((t - mean) ** 2 for t in times) / n)
    algbw = size / (mean * 1e3)
    at = lambda p: ordered[min(n - 1, (n * p + 99) // 100 - 1)]  # noqa: E731: nccl-tests' percentileIndex
    return ({"time": mean, "alg_bw": algbw, "bus_bw": algbw * factor, "nwrong": 0.0},
            {"skipped_iterations": 0, "min_us": ordered[0], "max_us": ordered[-1], "avg_us": mean, "p50_us": ordered[n // 2],
             "p95_us": at(95), "p99_us": at(99), "stdev_us": stdev, "cv_pct": stdev / mean * 100, "times_us": times})


def dumps(document) -> str:
    """As src/util.cu writes it: one line, no spaces, '/' escaped, every double with %lf."""
    if isinstance(document, dict):
        return "{" + ",".join(f"{_text(key)}:{dumps(value)}" for key, value in document.items()) + "}"
    if isinstance(document, list):
        return "[" + ",".join(map(dumps, document)) + "]"
    if isinstance(document, float):
        return "%lf" % document
    if isinstance(document, str):
        return _text(document)
    return "null" if document is None else str(document)


def _text(value: str) -> str:
    return json.dumps(value).replace("/", "\\/")
