"""Hostile input of every kind, through the real CLI: a plan, a bundle, a hosts file, run.json and
the output folder may all come from a stranger. Each case asserts what the user would notice:
a non-zero exit (2 for bad input), exactly one `error:` line and no traceback, no command of the
input's run (a payload would create a marker file), no hang (30 s per case), and nothing written
outside OUT (the command runs in an empty sentinel folder, which must stay empty).

The cases run the CLI in process (tests/support/cli_in_process.py). A process of its own stays where
the process is the subject: a file size limit, peak memory, what reaches the terminal, and the real
runs (one tiny run, one rank and one message size, makes the bundle the bundle cases start from; it
and the `verify` reruns start torchrun).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

from bench.bundle import canonical_pieces, digest, seal
from tests.conftest import REPO, bundle_path_from, cli
from tests.support.cli_in_process import ddpbench

CASE_TIMEOUT_S = 30
LOCAL_HOSTS = REPO / "hosts" / "local.yaml"

TINY_PLAN = """
name: tiny
suites:
  - suite: collectives
    world_sizes: [1]
    params: {ops: [all_reduce], dtypes: [float32], in_place: [true], begin_bytes: 4096, end_bytes: 4096,
             factor: 2, warmup_iters: 0, iters: 1, repetitions: 2}
    env: {NCCL_ALGO: Ring}
"""
TINY = {
    "name": "tiny",
    "suites": [{
        "suite": "collectives", "world_sizes": [1], "env": {"NCCL_ALGO": "Ring"},
        "params": {"ops": ["all_reduce"], "dtypes": ["float32"], "in_place": [True], "begin_bytes": 4096, "end_bytes": 4096,
                   "factor": 2, "warmup_iters": 0, "iters": 1, "repetitions": 2},
    }],
}


def run_cli(*args: str, cwd: Path, timeout_s: float = CASE_TIMEOUT_S):
    """The command in this process."""
    return ddpbench(*args, cwd=cwd, timeout_s=timeout_s)


def run_process(*args: str, cwd: Path, limit_fsize: "int | None" = None, timeout_s: float = CASE_TIMEOUT_S):
    """The command in a process of its own, under a file size limit where one is given."""
    def limit():
        if limit_fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_fsize, limit_fsize))

    return cli(*args, cwd=cwd, timeout=timeout_s, preexec_fn=limit)


@pytest.fixture
def sandbox(tmp_path):
    """(sentinel folder the command runs in, OUT, marker file a payload would create)."""
    sentinel = tmp_path / "sentinel"
    sentinel.mkdir()
    return sentinel, tmp_path / "out", tmp_path / "pwned"


def refused(result, sandbox, *fragments: str, code: int = 2) -> str:
    """Assert the one-line refusal; return the line."""
    sentinel, out, marker = sandbox
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    assert not marker.exists(), "a command from the input ran"
    assert list(sentinel.iterdir()) == [], "something was written outside OUT"
    if code == 2:
        assert not out.exists() or not any(out.rglob("bundle.json")), "a refused input still ran"
    return lines[0]


def survived(result, sandbox) -> None:
    sentinel, _, marker = sandbox
    assert result.returncode == 0, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr and "Warning" not in result.stderr, result.stderr
    assert not marker.exists() and list(sentinel.iterdir()) == []


@pytest.fixture(scope="module")
def tiny_bundle(tmp_path_factory) -> Path:
    """One real run of the tiny plan on this machine."""
    root = tmp_path_factory.mktemp("tiny")
    (root / "tiny.yaml").write_text(TINY_PLAN)
    # a real run on a shared 2-core machine: its limit is the run's, not a hostile case's
    done = run_process("run", "--plan", str(root / "tiny.yaml"), "--hosts", str(LOCAL_HOSTS), "--out", str(root / "out"), cwd=root,
                       timeout_s=300)
    assert done.returncode == 0, done.stderr
    return bundle_path_from(done.stdout)


@pytest.fixture
def bundle_doc(tiny_bundle) -> dict:
    return json.loads(tiny_bundle.read_text())


def write_bundle(path: Path, document: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(seal(document)))
    return path


def plan_file(tmp_path: Path, plan: dict) -> Path:
    path = tmp_path / "plan.yaml"
    path.write_text(json.dumps(plan))  # JSON is YAML
    return path


def with_env(env: dict) -> dict:
    plan = copy.deepcopy(TINY)
    plan["suites"][0]["env"] = env
    return plan


def payload(marker: Path) -> dict:
    """The environment that ran a command through Python's warnings and the web browser module."""
    return {"PYTHONWARNINGS": "all:0:antigravity.x:0:0", "BROWSER": f"/bin/sh -c 'touch {marker}' #%s",
            "PERL5OPT": f"-Mbase;system('touch {marker}');exit"}


# --- 1. The plan's environment: an allow-list ----------------------------------------------

REFUSED_ENV = {
    "ld_preload": {"LD_PRELOAD": "libevil.so"},
    "ld_library_path": {"LD_LIBRARY_PATH": "evil"},
    "pythonpath": {"PYTHONPATH": "evil"},
    "pythonstartup": {"PYTHONSTARTUP": "evil.py"},
    "path": {"PATH": "evil"},
    "bash_env": {"BASH_ENV": "evil"},
    "nccl_net_plugin": {"NCCL_NET_PLUGIN": "evil"},
    "nccl_tuner_plugin": {"NCCL_TUNER_PLUGIN": "evil"},
    "nccl_topo_file": {"NCCL_TOPO_FILE": "topo.xml"},
    "nccl_debug_file": {"NCCL_DEBUG_FILE": "log"},
    "nccl_graph_file": {"NCCL_GRAPH_FILE": "graph.xml"},
    "nccl_graph_dump_file": {"NCCL_GRAPH_DUMP_FILE": "graph.xml"},
    "nccl_conf_file": {"NCCL_CONF_FILE": "nccl.conf"},
    "nccl_comm_id": {"NCCL_COMM_ID": "198.51.100.1:9999"},
    "torch_debug_file": {"TORCH_NCCL_DEBUG_INFO_TEMP_FILE": "x"},
    "lowercase": {"nccl_algo": "Ring"},
    "name_trailing_newline": {"NCCL_ALGO\n": "Ring"},
    "value_trailing_newline": {"NCCL_ALGO": "Ring\n"},
    "value_shell": {"NCCL_ALGO": "$(touch pwned)"},
    "value_path": {"NCCL_ALGO": "/tmp/x"},
    "value_long": {"NCCL_ALGO": "R" * 300},
}


@pytest.mark.parametrize("env", REFUSED_ENV.values(), ids=REFUSED_ENV.keys())
def test_run_refuses_plan_env(env, tmp_path, sandbox):
    plan = plan_file(tmp_path, with_env(env))
    result = run_cli("run", "--plan", str(plan), "--hosts", str(LOCAL_HOSTS), "--out", str(sandbox[1]), cwd=sandbox[0])
    refused(result, sandbox, str(plan), "field suites[0].env")


def test_plan_env_allows_nccl_tuning_and_the_listed_knobs(tmp_path, sandbox):
    allowed = {"NCCL_P2P_DIRECT_DISABLE": "1", "NCCL_MAX_NCHANNELS": "8", "NCCL_PROTO": "^LL128", "NCCL_IB_HCA": "mlx5_0:1,mlx5_1:1",
               "CUDA_DEVICE_MAX_CONNECTIONS": "1", "OMP_NUM_THREADS": "4", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
               "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    plan = plan_file(tmp_path, with_env(allowed))
    result = run_cli("validate", str(plan), cwd=sandbox[0])
    assert result.returncode == 0 and "ok: plan file" in result.stdout, result.stderr


def test_run_refuses_the_browser_payload(tmp_path, sandbox):
    plan = plan_file(tmp_path, with_env(payload(sandbox[2])))
    result = run_cli("run", "--plan", str(plan), "--hosts", str(LOCAL_HOSTS), "--out", str(sandbox[1]), cwd=sandbox[0])
    refused(result, sandbox, "field suites[0].env")


# An env the allow-list takes but that would undo the run's label or blind its evidence: (transports, env, what the line names).
UNDOING_ENV = {
    "p2p_back_on_under_p2p_off": (["p2p_off"], {"NCCL_P2P_DISABLE": "0"},
                                  "NCCL_P2P_DISABLE=0 undoes transport preset 'p2p_off', which sets NCCL_P2P_DISABLE=1"),
    "ib_back_on_under_socket": (["socket"], {"NCCL_IB_DISABLE": "0"}, "NCCL_IB_DISABLE=0 undoes transport preset 'socket'"),
    "debug_warn": (["default"], {"NCCL_DEBUG": "WARN"}, "NCCL_DEBUG=WARN changes NCCL's log"),
    "debug_subsys": (["default"], {"NCCL_DEBUG_SUBSYS": "INIT"}, "NCCL_DEBUG_SUBSYS=INIT changes NCCL's log"),
    "debug_timestamps": (["default"], {"NCCL_DEBUG_TIMESTAMP_FORMAT": "%s"}, "NCCL_DEBUG_TIMESTAMP_FORMAT=%s changes NCCL's log"),
    "nvls_on": (["default"], {"NCCL_NVLS_ENABLE": "1"}, "NCCL_NVLS_ENABLE=1 turns on NVLink multicast"),
    "ras_listener": (["default"], {"NCCL_RAS_ADDR": "0.0.0.0:28028"}, "'NCCL_RAS_ADDR' is not allowed here"),
    "ras_enable": (["default"], {"NCCL_RAS_ENABLE": "1"}, "'NCCL_RAS_ENABLE' is not allowed here"),
}


@pytest.mark.parametrize("case", UNDOING_ENV, ids=UNDOING_ENV.keys())
def test_validate_and_run_refuse_an_env_that_undoes_or_blinds_the_measurement(case, tmp_path, sandbox):
    transports, env, says = UNDOING_ENV[case]
    plan = with_env(env)
    plan["suites"][0]["transports"] = transports
    path = plan_file(tmp_path, plan)
    refused(run_cli("validate", str(path), cwd=sandbox[0]), sandbox, f"{path}: field suites[0].env: {says}")
    result = run_cli("run", "--plan", str(path), "--hosts", str(LOCAL_HOSTS), "--out", str(sandbox[1]), cwd=sandbox[0])
    line = refused(result, sandbox, f"{path}: field suites[0].env: {says}")
    assert "remove it from env" in line or "remove NCCL_" in line or "hosts file's env" in line, line


VERIFY_ENV = {"ld_preload": {"LD_PRELOAD": "libevil.so"}, "nccl_net_plugin": {"NCCL_NET_PLUGIN": "evil"}, "browser": None}


@pytest.mark.parametrize("env", VERIFY_ENV.values(), ids=VERIFY_ENV.keys())
def test_verify_refuses_a_sealed_bundle_whose_plan_sets_env(env, bundle_doc, tmp_path, sandbox):
    bundle_doc["plan"]["suites"][0]["env"] = env or payload(sandbox[2])
    bundle = write_bundle(tmp_path / "pub" / "bundle.json", bundle_doc)
    result = run_cli("verify", str(bundle), "--hosts", str(LOCAL_HOSTS), "--out", str(sandbox[1]), cwd=sandbox[0])
    refused(result, sandbox, f"{bundle}: field plan.suites[0].env")


def test_verify_shows_the_plan_and_its_env_before_running(tiny_bundle, sandbox):
    """The one rerun: an allowed env is named before anything runs."""
    # A real rerun (torchrun, two ranks): 30 s was missed once on two loaded cores.
    result = run_process("verify", str(tiny_bundle), "--hosts", str(LOCAL_HOSTS), "--out", str(sandbox[1]), cwd=sandbox[0],
                         timeout_s=120)
    assert result.returncode == 4, result.stderr  # one rank's busbw is 0 by definition: nothing to compare
    assert "Traceback" not in result.stderr
    shown = result.stdout.index("env: NCCL_ALGO=Ring")
    assert "plan tiny: 1 suite entry" in result.stdout and shown < result.stdout.index("bundle: ")
    assert list(sandbox[0].iterdir()) == []


# --- 2. One validator; no NaN or infinity; strict YAML; regular, bounded files -------------------

PLAN_TEXT = {
    "timeout_nan": TINY_PLAN + "timeout_s: .nan\n",
    "timeout_inf": TINY_PLAN + "timeout_s: .inf\n",
    "timeout_overflow": TINY_PLAN + "timeout_s: 1.0e+999\n",
    "timeout_negative_inf": TINY_PLAN + "timeout_s: -.inf\n",
    "name_trailing_newline": TINY_PLAN.replace("name: tiny", 'name: "tiny\\n"'),
    "timestamp": TINY_PLAN + "description: 2001-12-14\n",
    "binary": TINY_PLAN + "description: !!binary aGVsbG8=\n",
    "set": TINY_PLAN + "description: !!set {a, b}\n",
    "python_object": TINY_PLAN + "description: !!python/object/apply:os.system ['touch pwned']\n",
    "integer_key": TINY_PLAN + "1: 2\n",
    "duplicate_key": TINY_PLAN + "name: again\n",
    "two_documents": TINY_PLAN + "---\nname: second\n",
    "alias_bomb": "a: &a [x,x,x,x,x,x,x,x,x,x]\n" + "".join(
        f"{c}: &{c} [{', '.join([f'*{p}'] * 10)}]\n" for p, c in zip("abcdefg", "bcdefgh")),
    "deep_nesting": "name: " + "[" * 5000 + "]" * 5000 + "\n",
    "not_utf8": None,
    "yaml_syntax": "name: [unclosed\n",
}
PLAN_REFUSALS = {
    "timeout_nan": "'.nan' is not a finite number", "timeout_inf": "'.inf' is not a finite number",
    "timeout_overflow": "not a finite number", "timeout_negative_inf": "not a finite number",
    "name_trailing_newline": "field name", "timestamp": "timestamp is not allowed", "binary": "binary is not allowed",
    "set": "set is not allowed", "python_object": "is not allowed", "integer_key": "the key '1' is not a string",
    "duplicate_key": "the key 'name' is given twice", "two_documents": "not valid YAML", "alias_bomb": "aliases are expanded",
    "deep_nesting": "", "not_utf8": "not UTF-8", "yaml_syntax": "not valid YAML at line",
}


@pytest.mark.parametrize("case", PLAN_TEXT, ids=PLAN_TEXT.keys())
def test_run_refuses_plan_text(case, tmp_path, sandbox):
    plan = tmp_path / "plan.yaml"
    if PLAN_TEXT[case] is None:
        plan.write_bytes(TINY_PLAN.encode() + b"description: \xff\xfe\n")
    else:
        plan.write_text(PLAN_TEXT[case])
    result = run_cli("run", "--plan", str(plan), "--hosts", str(LOCAL_HOSTS), "--out", str(sandbox[1]), cwd=sandbox[0])
    refused(result, sandbox, str(plan), PLAN_REFUSALS[case])


HOSTS_TEXT = {
    "timestamp_name": "hosts:\n  - {name: 2001-12-14, runtime: local}\n",
    "binary_label": "hosts:\n  - {name: a, runtime: local, labels: [!!binary aGVsbG8=]}\n",
    "set_labels": "hosts:\n  - {name: a, runtime: local, labels: !!set {x}}\n",
    "integer_key": "hosts:\n  - {name: a, runtime: local, 7: x}\n",
    "duplicate_host_key": "hosts:\n  - {name: a, runtime: local, runtime: native}\n",
    "nan_timeout": "hosts:\n  - {name: a, runtime: native, address: 127.0.0.1, connect_timeout_s: .nan}\n",
    "megabyte_name": "hosts:\n  - {name: " + "a" * 1_000_000 + ", runtime: local}\n",
    "too_many_hosts": "hosts:\n" + "".join(f"  - {{name: h{i}, runtime: local}}\n" for i in range(300)),
    "bidi_override_label": 'hosts:\n  - {name: a, runtime: local, labels: ["PCIe \\u202e4x"]}\n',
    "c1_control_label": 'hosts:\n  - {name: a, runtime: local, labels: ["a\\x9bb"]}\n',
}
HOSTS_REFUSALS = {
    "timestamp_name": "timestamp is not allowed", "binary_label": "binary is not allowed", "set_labels": "set is not allowed",
    "integer_key": "the key '7' is not a string", "duplicate_host_key": "given twice", "nan_timeout": "not a finite number",
    "megabyte_name": "field hosts[0].name", "too_many_hosts": "field hosts",
    "bidi_override_label": "field hosts[0].labels[0]", "c1_control_label": "field hosts[0].labels[0]",
}


@pytest.mark.parametrize("case", HOSTS_TEXT, ids=HOSTS_TEXT.keys())
def test_run_refuses_hosts_text(case, tmp_path, sandbox):
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text(HOSTS_TEXT[case])
    result = run_cli("run", "--hosts", str(hosts), "--plan", "quick", "--out", str(sandbox[1]), cwd=sandbox[0])
    refused(result, sandbox, str(hosts), HOSTS_REFUSALS[case])


def special_file(kind: str, tmp_path: Path) -> Path:
    if kind == "dev_zero":
        return Path("/dev/zero")
    path = tmp_path / f"special-{kind}"
    if kind == "fifo":
        os.mkfifo(path)  # nobody ever writes: reading would block forever
    elif kind == "directory":
        path.mkdir()
    elif kind == "oversized":
        with open(path, "wb") as sparse:  # a hole: no disk used
            sparse.truncate(300 * 1024 * 1024)
    return path


KINDS = {"dev_zero": "not a regular file", "fifo": "not a regular file", "directory": "a directory", "oversized": "-byte limit"}
ROLES = ["plan", "hosts", "bundle_validate", "bundle_report", "bundle_compare", "bundle_verify"]


@pytest.mark.parametrize("kind", KINDS, ids=KINDS.keys())
@pytest.mark.parametrize("role", ROLES)
def test_special_files_are_refused_without_reading(role, kind, tmp_path, sandbox, tiny_bundle):
    path = special_file(kind, tmp_path)
    out = str(sandbox[1])
    args = {
        "plan": ["run", "--plan", str(path), "--hosts", str(LOCAL_HOSTS), "--out", out],
        "hosts": ["run", "--hosts", str(path), "--out", out],
        "bundle_validate": ["validate", str(path)],
        "bundle_report": ["report", str(path), "--out", out],
        "bundle_compare": ["compare", str(tiny_bundle), str(path), "--out", out],
        "bundle_verify": ["verify", str(path), "--hosts", str(LOCAL_HOSTS), "--out", out],
    }[role]
    result = run_cli(*args, cwd=sandbox[0])
    refused(result, sandbox, str(path), KINDS[kind])


def test_bundle_with_nan_is_refused(tiny_bundle, tmp_path, sandbox):
    path = tmp_path / "bundle.json"
    path.write_text(tiny_bundle.read_text().replace('"complete": true', '"complete": NaN', 1))
    refused(run_cli("validate", str(path), cwd=sandbox[0]), sandbox, "NaN is not a number JSON allows")


def test_bundle_with_overflowing_number_is_refused(tiny_bundle, tmp_path, sandbox):
    document = json.loads(tiny_bundle.read_text())
    text = json.dumps(document).replace('"repetitions": 2', '"repetitions": 1e999', 1)
    path = tmp_path / "bundle.json"
    path.write_text(text)
    refused(run_cli("report", str(path), "--out", str(sandbox[1]), cwd=sandbox[0]), sandbox, "1e999 is not a finite number")


@pytest.mark.parametrize("tolerance", ["nan", "inf", "1e999", "-0.1", "busbw_gbps=inf%"])
def test_tolerance_must_be_positive_and_finite(tolerance, tiny_bundle, sandbox):
    result = run_cli("compare", str(tiny_bundle), str(tiny_bundle), "--tolerance", tolerance, "--out", str(sandbox[1]), cwd=sandbox[0])
    refused(result, sandbox, f"--tolerance {tolerance}", "not a positive finite number")


# --- 3. Caps in the schema and the planner; report and compare survive any valid bundle -------

def capped(plan_change) -> dict:
    plan = copy.deepcopy(TINY)
    plan_change(plan)
    return plan


CAPS = {
    "world_size_million": capped(lambda p: p["suites"][0].update(world_sizes=[1_000_000])),
    "repetitions_million": capped(lambda p: p["suites"][0]["params"].update(repetitions=1_000_000)),
    "iters_billion": capped(lambda p: p["suites"][0]["params"].update(iters=10**9)),
    "end_bytes_petabyte": capped(lambda p: p["suites"][0]["params"].update(end_bytes=10**15)),
    "timeout_year": capped(lambda p: p.update(timeout_s=3.2e7)),
    "suites_thousand": capped(lambda p: p.update(suites=p["suites"] * 1000)),
    "description_megabyte": capped(lambda p: p.update(description="x" * 1_000_000)),
    "pin_long": capped(lambda p: p.update(pin={"torch": "2" + ".1" * 100})),
    "ddp_steps_million": {"name": "t", "suites": [{"suite": "ddp", "params": {"model": "tiny", "micro_batch": 1, "seq_len": 8,
                                                                             "steps": 1_000_000, "warmup_steps": 0}}]},
}


@pytest.mark.parametrize("plan", CAPS.values(), ids=CAPS.keys())
def test_plan_caps(plan, tmp_path, sandbox):
    path = plan_file(tmp_path, plan)
    result = run_cli("run", "--plan", str(path), "--hosts", str(LOCAL_HOSTS), "--out", str(sandbox[1]), cwd=sandbox[0])
    refused(result, sandbox, str(path), "field ")


def test_cpu_host_refuses_more_ranks_than_cores(tmp_path, sandbox):
    cores = os.cpu_count() or 1
    path = plan_file(tmp_path, capped(lambda p: p["suites"][0].update(world_sizes=[cores + 1])))
    result = run_cli("run", "--plan", str(path), "--hosts", str(LOCAL_HOSTS), "--out", str(sandbox[1]), cwd=sandbox[0])
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    errors = [l for l in result.stderr.splitlines() if l.startswith("error: ")]
    assert len(errors) == 1 and f"world size {cores + 1} needs {cores + 1} processes" in errors[0], result.stderr
    assert not list(sandbox[1].rglob("*.log")), "torchrun was started"


def resealed(document: dict, change) -> dict:
    document = copy.deepcopy(document)
    change(document)
    return document


def first_run(document: dict) -> dict:
    return document["hosts"][0]["runs"][0]


def set_samples(document: dict, samples: list) -> None:
    """Every metric of the first run to samples; its times (positive, the schema says) to the least a double holds above 0 where 0 is asked."""
    for name, metric in first_run(document)["metrics"].items():
        metric["samples"] = [x or 5e-324 for x in samples] if name.endswith("time_s") or name == "time_max_rank_s" else samples


INVALID_BUNDLES = {
    "params_missing_key": (lambda d: first_run(d)["params"].pop("size_bytes"), "size_bytes"),
    "params_number_as_string": (lambda d: first_run(d)["params"].update(size_bytes="4096"), "params.size_bytes"),
    "params_op_unknown": (lambda d: first_run(d)["params"].update(op="<b>x</b>"), "params.op"),
    "lone_surrogate_label": (lambda d: d["hosts"][0]["labels"].append("a\ud800b"), "lone surrogate"),
    "lone_surrogate_error": (lambda d: d["hosts"][0].update(error="\udfff"), "lone surrogate"),
    "megabyte_host_name": (lambda d: d["hosts"][0].update(name="h" * 1_000_000), "field hosts[0].name"),
    "twenty_thousand_samples": (lambda d: set_samples(d, [1.0] * 20_000), "samples"),
    "negative_samples": (lambda d: set_samples(d, [-1.0]), "samples[0]"),
    "run_id_trailing_newline": (lambda d: d.update(run_id=d["run_id"] + "\n"), "field run_id"),
    "run_id_traversal": (lambda d: d.update(run_id="../../../../tmp/x"), "field run_id"),
    "three_hundred_hosts": (lambda d: d.update(hosts=d["hosts"] * 300), "field hosts"),
    # The plan's and hosts file's caps hold in a bundle too; integers past 2**53 are no I-JSON.
    "world_size_past_2_53": (lambda d: first_run(d).update(world_size=2**53 + 1), "past the integers JSON readers agree on"),
    "world_size_past_the_cap": (lambda d: first_run(d).update(world_size=1024 * 1024 + 1), "field hosts[0].runs[0].world_size"),
    "launch_of_a_billion_nodes": (lambda d: d["hosts"][0]["launches"][0].update(nodes=10**9), "field hosts[0].launches[0].nodes"),
    "steps_quintillion": (lambda d: first_run(d)["measured_window"].update(steps_count=10**18), "past the integers"),
    "size_petabyte": (lambda d: first_run(d)["params"].update(size_bytes=10**15), "field hosts[0].runs[0].params.size_bytes"),
    # Identifiers take no control, bidirectional or invisible character; free text is escaped when shown.
    "host_name_nul": (lambda d: d["hosts"][0].update(name="lo\x00cal"), "field hosts[0].name"),
    "label_bidi_override": (lambda d: d["hosts"][0].update(labels=["PCIe \u202e4x 0.4"]), "field hosts[0].labels[0]"),
    "label_c1_control": (lambda d: d["hosts"][0].update(labels=["a\x9b31mb"]), "field hosts[0].labels[0]"),
    "label_line_separator": (lambda d: d["hosts"][0].update(labels=["a\u2028b"]), "field hosts[0].labels[0]"),
    "launch_id_newline": (lambda d: d["hosts"][0]["launches"][0].update(id="00-x\n"), "field hosts[0].launches[0].id"),
}


# Both commands read a bundle the same way: compare takes every case (it starts faster), report a few.
BUNDLE_CASES = [("compare", case) for case in INVALID_BUNDLES] + [("report", "lone_surrogate_label"), ("report", "params_number_as_string")]


@pytest.mark.parametrize("command,case", BUNDLE_CASES, ids=[f"{c}-{k}" for c, k in BUNDLE_CASES])
def test_schema_refuses_hostile_bundles(command, case, bundle_doc, tiny_bundle, tmp_path, sandbox):
    change, fragment = INVALID_BUNDLES[case]
    path = write_bundle(tmp_path / "hostile" / "bundle.json", resealed(bundle_doc, change))
    args = ["report", str(path), "--out", str(sandbox[1])] if command == "report" else ["compare", str(tiny_bundle), str(path), "--out", str(sandbox[1])]
    refused(run_cli(*args, cwd=sandbox[0]), sandbox, str(path), fragment)


VALID_BUT_ODD = {
    "html_texts": lambda d: (d["hosts"][0].update(labels=["<img src=x onerror=alert(1)>"]),
                             d["hosts"][0]["fingerprint"]["software"].update(torch="<script>alert(1)</script>")),
    "html_error": lambda d: d["hosts"][0].update(status="partial", error="<iframe src=//x></iframe>\n|"),
    "no_metrics": lambda d: first_run(d).update(metrics={}),
    "zero_samples": lambda d: set_samples(d, [0.0, 0.0]),
    "huge_samples": lambda d: set_samples(d, [1e15, 1e-300]),
    "no_fingerprint": lambda d: d["hosts"][0].update(fingerprint=None),
    "no_runs": lambda d: d["hosts"][0].update(runs=[]),
    "no_hosts": lambda d: d.update(hosts=[]),
    "same_host_twice": lambda d: d["hosts"].append(copy.deepcopy(d["hosts"][0])),
    "failed_runs": lambda d: first_run(d).update(status="failed", error="<b>boom</b>"),
}


@pytest.mark.parametrize("case", VALID_BUT_ODD, ids=VALID_BUT_ODD.keys())
def test_report_and_compare_survive_valid_bundles(case, bundle_doc, tiny_bundle, tmp_path, sandbox):
    path = write_bundle(tmp_path / "odd" / "bundle.json", resealed(bundle_doc, VALID_BUT_ODD[case]))
    survived(run_cli("report", str(path), "--out", str(sandbox[1]), cwd=sandbox[0]), sandbox)
    compared = run_cli("compare", str(tiny_bundle), str(path), "--out", str(sandbox[1] / "verdict"), cwd=sandbox[0])
    # 4: nothing compared (one rank's busbw is 0 by definition), or a case that leaves no run
    assert compared.returncode in (0, 1, 4) and "Traceback" not in compared.stderr and "Warning" not in compared.stderr, compared.stderr
    for written in [*sandbox[1].glob("report.*"), *sandbox[1].glob("verdict/verdict.md")]:
        text = written.read_text()
        for tag in ("<script>", "<img src=x", "<iframe", "<b>"):
            assert tag not in text, (written.name, tag)


def with_a_key_twice(text: str, field: str, first_value: str) -> str:
    """The JSON text with `field` given twice: a made-up value first, the sealed one last (which
    json.loads keeps, so the seal holds for a reader that keeps the last)."""
    found = re.search(rf'"{field}": ', text)
    return text[:found.start()] + f'"{field}": {first_value}, ' + text[found.start():]


@pytest.mark.parametrize("field,value", [("run_id", '"20990101T000000Z-ffffff"'), ("status", '"failed"'), ("op", '"broadcast"')],
                         ids=["top_level", "in_a_host", "in_a_run"])
@pytest.mark.parametrize("command", ["validate", "report", "compare"])
def test_a_key_given_twice_is_refused(command, field, value, tiny_bundle, tmp_path, sandbox):
    path = tmp_path / "twice" / "bundle.json"
    path.parent.mkdir()
    path.write_text(with_a_key_twice(tiny_bundle.read_text(), field, value))
    assert json.loads(path.read_text()) == json.loads(tiny_bundle.read_text())  # the last key wins: the seal holds
    args = {"validate": ["validate", str(path)], "report": ["report", str(path), "--out", str(sandbox[1])],
            "compare": ["compare", str(tiny_bundle), str(path), "--out", str(sandbox[1])]}[command]
    refused(run_cli(*args, cwd=sandbox[0]), sandbox, str(path), f"the key '{field}' is given twice", "I-JSON")


def test_compare_pairs_hosts_by_the_bundles_names_not_by_the_new_bundles_own_record(bundle_doc, tiny_bundle, tmp_path, sandbox):
    """A bundle claiming to verify the original, recording that `local` is paired with another of
    its hosts (one that ran slower), is judged host by host as the names pair them."""
    stranger = copy.deepcopy(bundle_doc["hosts"][0])
    stranger["name"] = "someone-else"
    for run in stranger["runs"]:
        for metric in run["metrics"].values():
            metric["samples"] = [x / 10 for x in metric["samples"]]

    def claim(doc: dict) -> None:
        doc["hosts"].append(stranger)
        doc["verification"] = {
            "of_run_id": bundle_doc["run_id"], "of_sha256": bundle_doc["sha256"],
            "of_signature": {"state": "unsigned", "key": None, "principal": None, "text": "unsigned"},
            "hosts_paired": "by name", "host_pairs": [{"original": "local", "new": "someone-else"}],
            "image_requested": None, "images": [], "deviations": []}

    new = write_bundle(tmp_path / "claims" / "bundle.json", resealed(bundle_doc, claim))
    done = run_cli("compare", str(tiny_bundle), str(new), "--out", str(sandbox[1]), cwd=sandbox[0])
    assert done.returncode in (0, 4) and "Traceback" not in done.stderr, done.stdout + done.stderr  # 4: one rank's busbw is 0: nothing compared
    assert "hosts paired by name: local -> local" in done.stdout and "someone-else" not in done.stdout
    verdict = json.loads((sandbox[1] / "verdict.json").read_text())
    assert verdict["host_pairs"] == [{"original": "local", "new": "local"}]
    assert {run["new_host"] for run in verdict["runs"]} == {"local"}


HIDDEN = "\x00\x07\x1b[31m\x85\u202e\u2028\u2066\ufeff"  # C0, C1, bidi, separator, invisible


def test_control_characters_in_free_text_are_shown_escaped(bundle_doc, tiny_bundle, tmp_path, sandbox):
    """Free text (errors, notes, the CPU model, the transport NCCL named in a legend, a log line) may
    hold anything: every SVG stays XML, and report.md, report.html and the verdict show each such
    character as its escape."""
    def hide(doc: dict) -> None:
        host = doc["hosts"][0]
        host.update(status="partial", error=f"boom{HIDDEN}")
        host["fingerprint"]["cpu"]["model"] = f"cpu{HIDDEN}"
        host["launches"][0].update(status="failed", error=f"launch{HIDDEN}", log_tail=[f"log{HIDDEN}"])
        for run in host["runs"]:
            run["notes"] = [f"note{HIDDEN}"]
            run["transport"]["nccl_used"] = [f"P2P{HIDDEN}"]

    path = write_bundle(tmp_path / "hidden" / "bundle.json", resealed(bundle_doc, hide))
    survived(run_cli("report", str(path), "--out", str(sandbox[1]), cwd=sandbox[0]), sandbox)
    svgs = list(sandbox[1].glob("*.svg"))
    assert svgs
    for svg in svgs:
        ElementTree.parse(svg)  # raises on a character XML does not allow
    compared = run_cli("compare", str(tiny_bundle), str(path), "--out", str(sandbox[1] / "verdict"), cwd=sandbox[0])
    # The CPU model differs, so nothing is comparable (exit 4): the verdict names it, escaped
    assert compared.returncode == 4 and "Traceback" not in compared.stderr, compared.stderr
    assert "not comparable: cpu_model" in (sandbox[1] / "verdict" / "verdict.md").read_text()
    for name in ("report.md", "report.html", "verdict/verdict.md"):
        text = (sandbox[1] / name).read_text()
        assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]", text), name
    report = (sandbox[1] / "report.md").read_text()
    assert "boom\\x00\\x07\\x1b[31m\\x85\\u202e" in report  # a visible placeholder, where the error is
    assert "\\u202e" in " ".join(svg.read_text() for svg in svgs)  # the legend's transport


# --- 4. --resume trusts nothing in the run folder ---------------------------------------------

def run_folder(tmp_path: Path, run: "dict | str") -> Path:
    folder = tmp_path / "results" / "20250101T000000Z-abcdef"
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(run if isinstance(run, str) else json.dumps(run))
    return folder


RUN_JSON = {
    "run_id_dotdot": ({"run_id": "../../../escape", "started_at": "2025-01-01T00:00:00Z", "plan": TINY}, "field run_id"),
    "run_id_absolute": ({"run_id": "/tmp/escape", "started_at": "2025-01-01T00:00:00Z", "plan": TINY}, "field run_id"),
    "run_id_newline": ({"run_id": "20250101T000000Z-abcdef\n", "started_at": "2025-01-01T00:00:00Z", "plan": TINY}, "field run_id"),
    "run_id_number": ({"run_id": 7, "started_at": "2025-01-01T00:00:00Z", "plan": TINY}, "field run_id"),
    "extra_field": ({"run_id": "20250101T000000Z-abcdef", "started_at": "2025-01-01T00:00:00Z", "plan": TINY, "cmd": "x"}, "cmd"),
    "plan_env_payload": ({"run_id": "20250101T000000Z-abcdef", "started_at": "2025-01-01T00:00:00Z",
                          "plan": with_env({"LD_PRELOAD": "x"})}, "env"),
    "not_an_object": ("[1, 2]", "damaged"),
    "nan": ('{"run_id": NaN}', "NaN"),
    "key_twice": ('{"run_id": "../escape", "run_id": "20250101T000000Z-abcdef", "started_at": "2025-01-01T00:00:00Z", "plan": {}}',
                  "the key 'run_id' is given twice"),
}


@pytest.mark.parametrize("case", RUN_JSON, ids=RUN_JSON.keys())
def test_resume_refuses_hostile_run_json(case, tmp_path, sandbox):
    run, fragment = RUN_JSON[case]
    folder = run_folder(tmp_path, run)
    result = run_cli("run", "--resume", str(folder), "--hosts", str(LOCAL_HOSTS), cwd=sandbox[0])
    refused(result, sandbox, "run.json", fragment)
    assert sorted(p.name for p in folder.iterdir()) == ["run.json"]


def test_resume_refuses_a_planted_link(tmp_path, sandbox):
    folder = run_folder(tmp_path, {"run_id": "20250101T000000Z-abcdef", "started_at": "2025-01-01T00:00:00Z", "plan": TINY})
    (folder / "hosts").mkdir()
    (folder / "hosts" / "local").symlink_to(sandbox[0])
    result = run_cli("run", "--resume", str(folder), "--hosts", str(LOCAL_HOSTS), cwd=sandbox[0])
    refused(result, sandbox, "hosts/local: a symbolic link in the run folder")


def test_resume_refuses_a_file(tmp_path, sandbox):
    path = tmp_path / "notafolder"
    path.write_text("x")
    refused(run_cli("run", "--resume", str(path), "--hosts", str(LOCAL_HOSTS), cwd=sandbox[0]), sandbox, "not a folder")


# --- 5. The output folder ---------------------------------------------------------------------

@pytest.mark.parametrize("command", ["run", "report", "compare", "verify"])
def test_out_that_is_a_file(command, tiny_bundle, tmp_path, sandbox):
    out = tmp_path / "a-file"
    out.write_text("keep me")
    args = {
        "run": ["run", "--plan", "quick", "--hosts", str(LOCAL_HOSTS)], "report": ["report", str(tiny_bundle)],
        "compare": ["compare", str(tiny_bundle), str(tiny_bundle)], "verify": ["verify", str(tiny_bundle), "--hosts", str(LOCAL_HOSTS)],
    }[command]
    result = run_cli(*args, "--out", str(out), cwd=sandbox[0])
    refused(result, sandbox, str(out), "not a folder", code=2)
    assert out.read_text() == "keep me"


@pytest.mark.parametrize("planted", ["report.md", "report.html", "verdict.md", "verdict.json", "anything.svg"])
def test_planted_links_in_out_are_never_followed(planted, tiny_bundle, tmp_path, sandbox):
    out = tmp_path / "published"
    out.mkdir()
    victim = tmp_path / "victim"
    (out / planted).symlink_to(victim)
    command = ["report", str(tiny_bundle)] if planted.startswith("report") or planted.endswith(".svg") else ["compare", str(tiny_bundle), str(tiny_bundle)]
    result = run_cli(*command, "--out", str(out), cwd=sandbox[0])
    refused(result, sandbox, f"{out / planted}: a symbolic link")
    assert not victim.exists()


def test_compare_leaves_a_strangers_folder_with_a_planted_link_alone(tiny_bundle, tmp_path, sandbox):
    """compare only reads a downloaded bundle's folder: its verdict goes to --out (default results/),
    so a link planted beside the bundle is never followed."""
    folder = tmp_path / "download"
    folder.mkdir()
    new = folder / "bundle.json"
    new.write_text(tiny_bundle.read_text())
    victim = tmp_path / "victim"
    (folder / "verdict.md").symlink_to(victim)
    done = run_cli("compare", str(tiny_bundle), str(new), cwd=sandbox[0])
    assert done.returncode == 0, done.stdout + done.stderr
    assert not victim.exists() and sorted(p.name for p in folder.iterdir()) == ["bundle.json", "verdict.md"]
    assert (sandbox[0] / "results" / "verdict.md").is_file()


def test_out_under_a_file(tiny_bundle, tmp_path, sandbox):
    parent = tmp_path / "a-file"
    parent.write_text("x")
    refused(run_cli("report", str(tiny_bundle), "--out", str(parent / "sub"), cwd=sandbox[0]), sandbox, "cannot create the report's folder")


def test_out_where_writing_is_not_permitted(tiny_bundle, sandbox):
    refused(run_cli("report", str(tiny_bundle), "--out", "/sys/ddpbench-report", cwd=sandbox[0]), sandbox, "/sys/ddpbench-report")


def test_out_that_fills_up(tiny_bundle, sandbox):
    """A file size limit stands in for a full disk: the write fails part-way, in one line."""
    result = run_process("report", str(tiny_bundle), "--out", str(sandbox[1]), cwd=sandbox[0], limit_fsize=4096)
    refused(result, sandbox, "over the file size limit")


def test_run_writes_a_new_folder_under_an_existing_out(tmp_path, sandbox):
    """OUT may hold earlier runs; each run gets a folder of its own, created new (no planted content)."""
    earlier = sandbox[1] / "20250101T000000Z-abcdef"
    earlier.mkdir(parents=True)
    (earlier / "keep").write_text("x")
    plan = plan_file(tmp_path, with_env({"LD_PRELOAD": "x"}))
    refused(run_cli("run", "--plan", str(plan), "--hosts", str(LOCAL_HOSTS), "--out", str(sandbox[1]), cwd=sandbox[0]), sandbox, "env")
    assert [p.name for p in sandbox[1].iterdir()] == [earlier.name] and (earlier / "keep").read_text() == "x"


# --- 6. Reading a bundle takes bounded memory, whatever the file under the size limit ----------

MEMORY_LIMIT_BYTES = 1024**3
BUNDLE_START = {"schema_version": 1, "kind": "ddpbench.bundle", "run_id": "20250101T000000Z-abcdef",
                "started_at": "2025-01-01T00:00:00Z", "finished_at": "2025-01-01T00:00:00Z", "complete": True,
                "tool": {"name": "ddpbench", "version": "0", "git_commit": None}, "plan": TINY}


def numbers_file(path: Path, size: int) -> None:
    """A bundle-shaped file of `size` bytes, nearly all of it one list of numbers."""
    head = json.dumps(BUNDLE_START)[:-1] + ', "hosts": [{"name": "h", "runs": [{"metrics": {"time_s": {"samples": ['
    tail = '0.5]}}}]}], "sha256": "' + "0" * 64 + '"}'
    chunk = "0.5," * (1 << 18)
    with open(path, "w") as out:
        out.write(head)
        written = len(head) + len(tail)
        while written + len(chunk) <= size:
            written += out.write(chunk)
        out.write("0," * ((size - written) // 2) + tail)


def text_file(path: Path, size: int) -> None:
    """A bundle-shaped file of `size` bytes, nearly all of it one label."""
    head, tail = json.dumps(BUNDLE_START)[:-1] + ', "hosts": [{"name": "h", "labels": ["', '"]}]}'
    chunk = "x" * (1 << 20)
    with open(path, "w") as out:
        written = out.write(head) + len(tail)
        while written + len(chunk) <= size:
            written += out.write(chunk)
        out.write("x" * (size - written) + tail)


def sealed_samples_file(path: Path, runs: int) -> None:
    """A sealed bundle of `runs` runs of two full sample lists each, written as canonical JSON and
    hashed as it is written (never held whole); schema-invalid only in what each run lacks."""
    samples = "[" + ",".join(["0.5"] * 10_000) + "]"
    run = '{"metrics":{' + ",".join(f'"m{i}_s":{{"samples":{samples}}}' for i in range(2)) + "}}"

    def canonical(part: dict) -> str:
        return json.dumps(part, sort_keys=True, separators=(",", ":"))[1:-1]

    hashed = hashlib.sha256()
    with open(path, "w") as out:
        def put(text: str) -> None:
            hashed.update(text.encode())
            out.write(text)
        put("{" + canonical({k: v for k, v in BUNDLE_START.items() if k < "hosts"}) + ',"hosts":[{"name":"h","runs":[')
        for i in range(runs):
            put(("," if i else "") + run)
        put("]}]," + canonical({k: v for k, v in BUNDLE_START.items() if k > "hosts"}))
        hashed.update(b"}")  # the canonical text ends here; the file has its sha256 before its end
        out.write(f',"sha256":"{hashed.hexdigest()}"}}')


# Measured from a small launcher: a child's peak memory starts from its parent's at the fork (the
# test process's, which may be large), the launcher's is a few MiB.
LAUNCHER = ("import os, subprocess, sys; child = subprocess.Popen(sys.argv[1:]); _, status, usage = os.wait4(child.pid, 0); "
            "print(usage.ru_maxrss * 1024, os.waitstatus_to_exitcode(status))")


def peak_memory(*args: str, cwd: Path) -> "tuple[int, str]":
    """The command's peak resident memory (bytes, of that process alone) and its stderr."""
    done = subprocess.run([sys.executable, "-c", LAUNCHER, sys.executable, "-m", "bench", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    peak, status = map(int, done.stdout.split())
    assert status == 2, (status, done.stderr)
    return peak, done.stderr


BIG_FILES = {
    # Refused from its text: its 62 million numbers would take 3 GiB once parsed.
    "numbers_250_mb": (lambda path: numbers_file(path, 250_000_000), "once read, over the 384 MiB a bundle may take"),
    # Parsed (the text of one string is its memory), then refused before the schema quotes it.
    "one_text_of_250_mb": (lambda path: text_file(path, 250_000_000), "longer than any field of a bundle holds"),
    # Parsed, hashed and checked against the schema: 6.8 million samples, explained on one run.
    "sealed_27_mb_of_samples": (lambda path: sealed_samples_file(path, 340), 'field hosts[0].runs[0]: "suite" is a required property'),
}


@pytest.mark.parametrize("case", BIG_FILES, ids=BIG_FILES.keys())
def test_a_big_file_is_read_in_bounded_memory(case, tmp_path, sandbox):
    """The 256 MiB size limit holds in under 1 GiB: 7.3 GB was taken once to refuse a file of numbers."""
    make, fragment = BIG_FILES[case]
    path = tmp_path / "big.json"
    make(path)
    assert path.stat().st_size < 256 * 1024**2
    peak, stderr = peak_memory("validate", str(path), cwd=sandbox[0])
    assert "Traceback" not in stderr and stderr.count("\n") == 1 and fragment in stderr, stderr
    print(f"{case}: {path.stat().st_size / 1e6:.0f} MB read in {peak / 2**20:.0f} MiB")
    assert peak < MEMORY_LIMIT_BYTES, f"{peak / 2**20:.0f} MiB"


def test_the_digest_hashed_in_pieces_is_the_canonical_jsons(bundle_doc):
    """Bundles sealed by any ddpbench hash alike: the pieces join to json.dumps' canonical text."""
    doc = copy.deepcopy(bundle_doc)
    doc["hosts"][0]["labels"] = ["é 中文 \U0001f600 \\ \"quoted\""]
    doc["hosts"][0]["runs"][0]["notes"] = ["\x00\u202e", "1e300"]
    doc["hosts"].append({**doc["hosts"][0], "runs": [], "launches": []})
    body = {k: v for k, v in doc.items() if k != "sha256"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    assert "".join(canonical_pieces(body)) == canonical
    assert digest(doc) == hashlib.sha256(canonical.encode()).hexdigest()
    assert digest(bundle_doc) == bundle_doc["sha256"]


def test_non_ascii_text_counts_as_python_holds_it(tmp_path, sandbox):
    """One character beyond U+FFFF makes Python hold every character of the text in 4 bytes."""
    path = tmp_path / "wide.json"
    text_file(path, 70_000_000)
    path.write_bytes(path.read_bytes().replace(b"xxxx", "\U0001f600".encode(), 1))
    refused(run_cli("validate", str(path), cwd=sandbox[0]), sandbox, str(path), "characters Python holds in 4 bytes each")


# --- 7. What a host cannot run, and a plan that measured nothing --------------------------------

def unrunnable(document: dict, change) -> dict:
    document = copy.deepcopy(document)
    change(document["plan"]["suites"][0])
    return document


UNRUNNABLE = {
    # NCCL's algorithms on a host without a GPU: its ranks talk over gloo
    "nccl_algorithm_without_a_gpu": (lambda entry: (entry.pop("env"), entry.update(algorithms=["ring"])),
                                     "choose NCCL's, and this host has no GPU"),
    # more processes than this host has cores
    "processes_past_the_cores": (lambda entry: entry.update(world_sizes=[(os.cpu_count() or 1) + 2]),
                                 f"needs {(os.cpu_count() or 1) + 2} processes on this host, which has {os.cpu_count()} cores"),
}


@pytest.mark.parametrize("case", UNRUNNABLE, ids=UNRUNNABLE.keys())
def test_verify_of_an_entry_no_host_can_run_is_not_comparable_before_anything_launches(case, bundle_doc, tmp_path, sandbox):
    change, says = UNRUNNABLE[case]
    bundle = write_bundle(tmp_path / "pub" / "bundle.json", unrunnable(bundle_doc, change))
    result = run_cli("verify", str(bundle), "--hosts", str(LOCAL_HOSTS), "--out", str(sandbox[1]), cwd=sandbox[0])
    assert result.returncode == 4 and "Traceback" not in result.stderr, (result.returncode, result.stdout, result.stderr)
    lines = result.stdout.splitlines()
    assert lines[0].startswith("NOT COMPARABLE: nothing of bundle") and lines[0].endswith("so nothing ran:"), result.stdout
    assert lines[1].startswith("- suites[0]: host local cannot run this collectives entry: ") and says in lines[1], lines
    assert not sandbox[1].exists() and list(sandbox[0].iterdir()) == [], "verify launched or wrote something"


def test_a_plan_that_measured_nothing_fails_saying_so(tmp_path, sandbox):
    """nodes: 4 on a host whose 'all' is two processes: every launch is skipped, so the run failed."""
    plan = copy.deepcopy(TINY)
    plan["suites"][0].update(world_sizes=["all"], nodes=4)
    path = plan_file(tmp_path, plan)
    result = run_cli("run", "--plan", str(path), "--hosts", str(LOCAL_HOSTS), "--out", str(sandbox[1]), cwd=sandbox[0], timeout_s=300)
    assert result.returncode == 1 and "Traceback" not in result.stderr, (result.returncode, result.stderr)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert errors == ["error: nothing was measured: every launch was skipped (host local: 00-collectives-default-n4-ws2: world "
                      "size all is 2 here, which 4 nodes do not divide); give the plan world sizes, nodes and GPUs these hosts have"]
    assert "bundle: " in result.stdout  # what it did (the skips) is kept


# --- 8. Text from a bundle on the terminal and in Markdown ----------------------------------------

ESCAPES = "\x1b]0;owned\x07\x1b[2J\x1b[31m"  # a window title, a cleared screen, red
SHOWN = ESCAPES.encode("unicode_escape").decode()
RAW = re.compile("[\x07\x1b]")


def test_a_bundles_text_reaches_the_terminal_escaped(tiny_bundle, bundle_doc, tmp_path, sandbox):
    """A CPU model verify names, an incomplete run's reason it announces, a host's error a resumed run
    prints: each shown as \\x1b, never as the byte that clears the screen."""
    def other_cpu(doc: dict) -> None:
        doc["hosts"][0]["fingerprint"]["cpu"]["model"] = f"cpu{ESCAPES}"

    path = write_bundle(tmp_path / "cpu" / "bundle.json", resealed(bundle_doc, other_cpu))
    said = run_process("verify", str(path), "--hosts", str(LOCAL_HOSTS), "--out", str(sandbox[1]), cwd=sandbox[0])
    assert said.returncode == 4 and f"cpu{SHOWN}" in said.stdout, said.stdout
    assert not RAW.search(said.stdout + said.stderr)

    def incomplete(doc: dict) -> None:
        doc.update(complete=False, incomplete_reason=f"stopped{ESCAPES}")

    path = write_bundle(tmp_path / "stopped" / "bundle.json", resealed(bundle_doc, incomplete))
    rerun = run_process("verify", str(path), "--hosts", str(LOCAL_HOSTS), "--out", str(sandbox[1]), cwd=sandbox[0], timeout_s=300)
    assert "Traceback" not in rerun.stderr and f"the launches the original did not finish (stopped{SHOWN})" in rerun.stdout, rerun.stdout
    assert not RAW.search(rerun.stdout + rerun.stderr)

    folder = tmp_path / "resumed" / tiny_bundle.parent.name
    shutil.copytree(tiny_bundle.parent, folder)

    def lost_host(doc: dict) -> None:  # a host of the run that the hosts file no longer lists: its entry stays
        doc["hosts"].append({**copy.deepcopy(doc["hosts"][0]), "name": "ghost", "status": "partial", "error": f"lost{ESCAPES}",
                             "runs": [], "launches": []})

    write_bundle(folder / "bundle.json", resealed(bundle_doc, lost_host))
    resumed = run_process("run", "--resume", str(folder), "--hosts", str(LOCAL_HOSTS), cwd=sandbox[0], timeout_s=300)
    assert "Traceback" not in resumed.stderr, resumed.stderr
    assert f"error: host ghost: failed: lost{SHOWN}" in resumed.stderr, resumed.stderr
    assert not RAW.search(resumed.stdout + resumed.stderr)


LINK = "[x](javascript:alert(1))"


def test_a_markdown_link_in_a_runs_env_is_shown_as_text(bundle_doc, tmp_path, sandbox):
    """A run's env value (any text, in a bundle) is part of its label in report.md, report.html and
    verdict.md: shown as text, never a link, an image or an autolink."""
    def linked(doc: dict) -> None:
        for run in doc["hosts"][0]["runs"]:
            run["env"] = {"NCCL_ALGO": LINK, "NCCL_X": "![t](https://evil.example/t.png) <https://evil.example>"}

    path = write_bundle(tmp_path / "linked" / "bundle.json", resealed(bundle_doc, linked))
    again = write_bundle(tmp_path / "again" / "bundle.json",
                         resealed(bundle_doc, lambda doc: (linked(doc), doc.update(run_id=doc["run_id"][:-6] + "0a0a0a"))))
    survived(run_cli("report", str(path), "--out", str(sandbox[1]), cwd=sandbox[0]), sandbox)
    compared = run_cli("compare", str(path), str(again), "--out", str(sandbox[1] / "verdict"), cwd=sandbox[0])
    assert compared.returncode in (0, 4) and "Traceback" not in compared.stderr, compared.stderr  # 4: one rank's busbw is 0
    for name in ("report.md", "verdict/verdict.md"):
        text = (sandbox[1] / name).read_text()
        assert "NCCL_ALGO=[x\\](javascript:alert(1))" in text, name
        unescaped = text.replace("\\](", "")
        assert "](javascript" not in unescaped and "](https" not in unescaped and "<https" not in text, name
    page = (sandbox[1] / "report.html").read_text()
    assert "javascript:alert(1)" in page and "href=" not in page and "<https" not in page


def test_a_report_of_more_series_than_it_draws_is_refused_in_seconds(bundle_doc, tmp_path, sandbox):
    """One bundle whose 15,000 runs each ran under another env: 15,000 series, past the 200 a report
    draws (drawing them took past a minute): refused naming the bound and the bundle."""
    def many(doc: dict) -> None:
        run = first_run(doc)
        doc["hosts"][0]["runs"] = [{**run, "env": {"NCCL_BUFFSIZE": str(4096 + i)}} for i in range(15_000)]

    path = write_bundle(tmp_path / "many" / "bundle.json", resealed(bundle_doc, many))
    result = run_cli("report", str(path), "--out", str(sandbox[1]), cwd=sandbox[0], timeout_s=120)
    refused(result, sandbox, f"these bundles hold 15000 series (15000 in bundle {bundle_doc['run_id']}), more than the 200 "
                             "one report draws")
