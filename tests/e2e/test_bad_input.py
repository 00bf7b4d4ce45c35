"""Every kind of bad input: one line naming the file, the field and the fix; exit 2; no traceback.
Each case runs the CLI in process (tests/support/cli_in_process.py), in a folder of its own; a file
size limit is a process's, so that case starts one."""

from __future__ import annotations

import json
import resource
import shutil

import pytest

from bench.bundle import seal
from tests.conftest import cli
from tests.support.cli_in_process import ddpbench


def assert_one_line_error(result, *fragments: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


@pytest.fixture
def write(tmp_path):
    def write(name: str, text: str):
        path = tmp_path / name
        path.write_text(text)
        return path

    return write


QUICK_PLAN = """
name: t
suites:
  - suite: collectives
    params: {ops: [all_reduce], dtypes: [float32], in_place: [true], begin_bytes: 4096, end_bytes: 8192,
             factor: 2, warmup_iters: 1, iters: 1, repetitions: 1}
"""


def test_hosts_file_not_yaml(write):
    hosts = write("hosts.yaml", "hosts:\n  - name: a\n   runtime: local\n")
    assert_one_line_error(ddpbench("run", "--hosts", str(hosts)), str(hosts), "not valid YAML at line 3", "fix the hosts file")


def test_hosts_file_fails_schema(write):
    hosts = write("hosts.yaml", "hosts:\n  - name: a\n    runtime: local\n    colour: blue\n")
    assert_one_line_error(ddpbench("run", "--hosts", str(hosts)), str(hosts), "field hosts[0]", "colour", "fix the hosts file")


def test_hosts_file_unknown_runtime(write):
    hosts = write("hosts.yaml", "hosts:\n  - name: a\n    runtime: kubernetes\n")
    assert_one_line_error(ddpbench("run", "--hosts", str(hosts)), "field hosts[0].runtime", "kubernetes")


def test_group_names_unknown_host(write):
    hosts = write("hosts.yaml", "hosts:\n  - {name: a, runtime: local}\ngroups:\n  - {name: g, hosts: [a, ghost]}\n")
    assert_one_line_error(ddpbench("run", "--hosts", str(hosts)), "group 'g' names unknown host 'ghost'")


def test_missing_hosts_file(tmp_path):
    assert_one_line_error(ddpbench("run", "--hosts", str(tmp_path / "nope.yaml")), "nope.yaml: no such hosts file")


def test_an_empty_hosts_file_is_named_with_the_fix(write):
    hosts = write("empty.yaml", "# nothing yet\n")
    assert_one_line_error(ddpbench("run", "--hosts", str(hosts)), f"{hosts}: empty (no YAML value in it); write the hosts file "
                          "there, starting from a copy of hosts/local.yaml")


def test_a_shipped_plan_given_as_a_file_name_gets_its_name(tmp_path):
    assert_one_line_error(ddpbench("run", "--plan", "quick.yaml", "--out", tmp_path / "results"),
                          "quick.yaml: no such plan file; the shipped plan of that name is --plan quick")


def test_plan_unknown_suite(write):
    plan = write("plan.yaml", QUICK_PLAN.replace("suite: collectives", "suite: allreduce"))
    assert_one_line_error(ddpbench("run", "--plan", str(plan)), str(plan), "field suites[0].suite", "'allreduce'", "fix the plan")


def test_plan_unknown_preset(write):
    plan = write("plan.yaml", QUICK_PLAN.replace("  - suite: collectives\n", "  - suite: collectives\n    transports: [nvlink]\n"))
    assert_one_line_error(ddpbench("run", "--plan", str(plan)), "field suites[0].transports[0]", "'nvlink'")


def test_plan_unknown_dtype(write):
    plan = write("plan.yaml", QUICK_PLAN.replace("float32", "float8"))
    assert_one_line_error(ddpbench("run", "--plan", str(plan)), "field suites[0].params.dtypes[0]", "'float8'")


def test_plan_name_unknown():
    assert_one_line_error(ddpbench("run", "--plan", "warp-speed"), "unknown plan 'warp-speed'", "quick")


def test_plan_sizes_not_increasing(write, tmp_path):
    plan = write("plan.yaml", QUICK_PLAN.replace("begin_bytes: 4096, end_bytes: 8192", "begin_bytes: 8192, end_bytes: 4096"))
    result = ddpbench("run", "--plan", str(plan), "--out", tmp_path / "results")  # never the user's results/
    assert result.returncode == 1
    assert "begin_bytes 8192 is larger than end_bytes 4096" in result.stderr and "Traceback" not in result.stderr


def test_plan_nccl_preset_on_cpu_host(write, tmp_path):
    plan = write("plan.yaml", QUICK_PLAN.replace("  - suite: collectives\n", "  - suite: collectives\n    transports: [p2p_off]\n"))
    result = ddpbench("run", "--plan", str(plan), "--out", tmp_path / "results")
    assert result.returncode == 1
    assert "'p2p_off' needs NCCL and a GPU" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("where, edit", [
    ("field suites[0].world_sizes[0]: 2.0 is not an integer; write 2", ("world_sizes: [2]", "world_sizes: [2.0]")),
    ("field suites[0].params.iters: 2.0 is not an integer; write 2", (" iters: 1,", " iters: 2.0,")),
])
def test_plan_float_where_an_integer_belongs(write, tmp_path, where, edit):
    """JSON Schema counts 2.0 as an integer; the worker's range() does not: refused before any launch."""
    plan = write("plan.yaml", QUICK_PLAN.replace("  - suite: collectives\n", "  - suite: collectives\n    world_sizes: [2]\n")
                 .replace(*edit))
    assert_one_line_error(ddpbench("run", "--plan", str(plan), "--out", str(tmp_path / "results")), where, "fix the plan")
    assert not (tmp_path / "results").exists()


@pytest.fixture
def bundle_file(quick_run, tmp_path):
    path = tmp_path / "bundle.json"
    shutil.copy(quick_run[1], path)
    return path


def test_validate_good_bundle(bundle_file):
    result = ddpbench("validate", str(bundle_file))
    assert result.returncode == 0 and "ok: bundle" in result.stdout


def test_truncated_bundle(bundle_file):
    bundle_file.write_bytes(bundle_file.read_bytes()[:-200])
    assert_one_line_error(ddpbench("validate", str(bundle_file)), str(bundle_file), "truncated")


def test_bundle_not_json(bundle_file):
    bundle_file.write_text("<html>404</html>")
    assert_one_line_error(ddpbench("report", str(bundle_file), "--out", str(bundle_file.parent)), "not valid JSON")


def test_bundle_unknown_schema_version(bundle_file):
    document = json.loads(bundle_file.read_text())
    document["schema_version"] = 99
    bundle_file.write_text(json.dumps(seal(document)))
    assert_one_line_error(ddpbench("validate", str(bundle_file)), "field schema_version", "99")


def test_bundle_sha256_mismatch(bundle_file):
    document = json.loads(bundle_file.read_text())
    document["hosts"][0]["runs"][0]["metrics"]["busbw_gbps"]["samples"][0] *= 2
    bundle_file.write_text(json.dumps(document))
    assert_one_line_error(ddpbench("validate", str(bundle_file)), "field sha256", "changed after it was written")


def test_bundle_fails_schema_after_resealing(bundle_file):
    document = json.loads(bundle_file.read_text())
    document["hosts"][0]["runs"][0]["metrics"]["speed"] = document["hosts"][0]["runs"][0]["metrics"]["time_s"]
    bundle_file.write_text(json.dumps(seal(document)))
    assert_one_line_error(ddpbench("validate", str(bundle_file)), "field hosts[0].runs[0].metrics", "speed")


def test_bundle_float_where_an_integer_belongs(bundle_file):
    document = json.loads(bundle_file.read_text())
    document["hosts"][0]["runs"][0]["world_size"] = 2.0
    bundle_file.write_text(json.dumps(seal(document)))
    assert_one_line_error(ddpbench("report", str(bundle_file), "--out", str(bundle_file.parent / "r")),
                          "field hosts[0].runs[0].world_size: 2.0 is not an integer; write 2")


def test_a_full_disk_or_a_file_size_limit_names_the_file_it_stopped(bundle_file, tmp_path):
    """ulimit -f (EFBIG) stands for a full disk (ENOSPC): the one line names the file that could not be written."""
    out = tmp_path / "report"
    done = cli("report", str(bundle_file), "--out", str(out),
               preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (16384, 16384)))
    assert_one_line_error(done, f"{out}/", "over the file size limit (ulimit -f): raise it or choose another --out")
    assert "writing the results" not in done.stderr


# --- validate and the schemas' words ----------------------------------------------------------------

def test_validate_of_a_hosts_file_says_fix_the_hosts_file(write):
    hosts = write("hosts.yaml", "defaults:\n  user: root\n")
    assert_one_line_error(ddpbench("validate", str(hosts)), "field (top level): 'hosts' is a required property", "fix the hosts file")


def test_validate_of_a_file_that_is_neither_plan_nor_hosts_file_says_so(write):
    odd = write("odd.yaml", "host:\n  - name: a\n")
    assert_one_line_error(ddpbench("validate", str(odd)), "neither a plan (it has no suites:) nor a hosts file (no hosts:)",
                          "(did you mean 'hosts' for 'host'?)")


@pytest.mark.parametrize("command", ["validate", "run"])
def test_a_misspelled_key_gets_the_key_it_resembles(write, command):
    hosts = write("hosts.yaml", "hosts:\n  - name: a\n    adress: 10.0.0.5\n")
    args = [str(hosts)] if command == "validate" else ["--hosts", str(hosts)]
    assert_one_line_error(ddpbench(command, *args), "field hosts[0]", "'adress' was unexpected", "(did you mean 'address'?)",
                          "fix the hosts file")


def test_a_misspelled_plan_key_gets_the_key_it_resembles(write):
    plan = write("plan.yaml", QUICK_PLAN.replace("    params:", "    parms:"))
    assert_one_line_error(ddpbench("validate", str(plan)), "field suites[0]", "(did you mean 'params'?)", "fix the plan")


def test_a_hand_written_entry_learns_every_missing_field_at_once(write):
    plan = write("plan.yaml", "name: t\nsuites:\n  - suite: collectives\n    params: {ops: [all_reduce], iters: 2}\n")
    assert_one_line_error(ddpbench("validate", str(plan)), "field suites[0].params: 'dtypes', 'in_place', 'begin_bytes', "
                          "'end_bytes', 'factor', 'warmup_iters', 'repetitions' are required properties")
