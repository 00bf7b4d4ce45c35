"""Hosts files: the schema and the loader."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from bench.controller.hosts import load_hosts
from bench.errors import UserError
from tests.conftest import REPO


def hosts_file(tmp_path: Path, document: dict) -> Path:
    path = tmp_path / "hosts.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def one_host(**settings) -> dict:
    return {"hosts": [{"name": "gpu1", "address": "10.0.0.1", **settings}]}


@pytest.mark.parametrize("path", ["hosts/local.yaml", "hosts/vast.yaml", "hosts/hpc-example.yaml"])
def test_shipped_hosts_files_load(path):
    inventory = load_hosts(REPO / path)
    assert inventory.hosts


def test_example_files_say_what_they_promise():
    vast = load_hosts(REPO / "hosts/vast.yaml")
    assert {(h.runtime, h.user, h.accept_new_host_key) for h in vast.hosts} == {("native", "root", True)}
    assert all(h.port != 22 for h in vast.hosts)
    hpc = load_hosts(REPO / "hosts/hpc-example.yaml")
    # Seed 002's two job shapes, through the login node's scheduler; the defaults' slurm settings merged into each.
    assert {h.runtime for h in hpc.hosts} == {"slurm"} and not hpc.groups
    assert [(h.slurm["nodes"], h.slurm["gpus_per_node"], h.slurm["partition"]) for h in hpc.hosts] == [(1, 2, "gpu"), (2, 1, "gpu")]


@pytest.mark.parametrize(("document", "message"), [
    ({"hosts": [{"name": "c", "runtime": "slurm", "address": "login"}]}, "host 'c' has runtime slurm but no slurm: partition"),
    ({"hosts": [{"name": "c", "address": "login", "slurm": {"partition": "gpu"}}]}, "host 'c' has slurm: settings but runtime native"),
    ({"hosts": [{"name": "a", "runtime": "slurm", "address": "l", "slurm": {"partition": "gpu"}}, {"name": "b", "address": "n"}],
      "groups": [{"name": "g", "hosts": ["a", "b"]}]}, "group 'g': host 'a' has runtime slurm"),
])
def test_slurm_settings_that_cannot_work_are_named(tmp_path, document, message):
    with pytest.raises(UserError, match=re.escape(message)):
        load_hosts(hosts_file(tmp_path, document))


def test_defaults_apply_and_a_host_wins(tmp_path):
    document = {
        "defaults": {"user": "alice", "port": 2222, "env": {"NCCL_DEBUG": "WARN", "A": "1"}},
        "hosts": [{"name": "gpu1", "address": "10.0.0.1", "port": 22, "env": {"A": "2"}}],
    }
    host = load_hosts(hosts_file(tmp_path, document)).hosts[0]
    assert (host.user, host.port, host.env) == ("alice", 22, {"NCCL_DEBUG": "WARN", "A": "2"})


@pytest.mark.parametrize(("settings", "field"), [
    ({"labels": ["two\nlines"]}, "hosts[0].labels[0]"),
    ({"python": "/usr/bin/python3\nrm -rf /"}, "hosts[0].python"),
    ({"workdir": "/tmp/x\r"}, "hosts[0].workdir"),
    ({"address": "10.0.0.1; touch /tmp/x"}, "hosts[0].address"),
    ({"user": "root; id"}, "hosts[0].user"),
    ({"env": {"lower_case": "1"}}, "hosts[0].env"),
    ({"jump": "bastion $(id)"}, "hosts[0].jump"),
    ({"socket_ifname": "eth0; id"}, "hosts[0].socket_ifname"),
    ({"name": "has space"}, "hosts[0].name"),
])
def test_schema_refuses_values_that_could_become_commands(tmp_path, settings, field):
    with pytest.raises(UserError) as refused:
        load_hosts(hosts_file(tmp_path, one_host(**settings)))
    message = str(refused.value)
    assert f"field {field}" in message and "\n" not in message
    assert message.endswith("fix the hosts file (schema/hosts.schema.json lists what is allowed)")


def test_a_thread_count_that_is_no_number_is_refused_before_anything_runs(tmp_path):
    """The agent's planner reads OMP_NUM_THREADS as each rank's thread count: a word there would end it."""
    with pytest.raises(UserError) as refused:
        load_hosts(hosts_file(tmp_path, one_host(env={"OMP_NUM_THREADS": "INFO"})))
    assert "field hosts[0].env.OMP_NUM_THREADS" in str(refused.value) and "a whole number from 1" in str(refused.value)
    assert load_hosts(hosts_file(tmp_path, one_host(env={"OMP_NUM_THREADS": "4"}))).hosts[0].env["OMP_NUM_THREADS"] == "4"


def test_schema_takes_free_text_where_it_is_only_data(tmp_path):
    settings = {"labels": ["PCIe 4.0 x4", "quote ' \" ; $(id)"], "env": {"X": "$(touch /tmp/pwned)\nline 2"},
                "workdir": "/tmp/with space; $(id) 'q'"}
    host = load_hosts(hosts_file(tmp_path, one_host(**settings))).hosts[0]
    assert host.labels[1] == "quote ' \" ; $(id)" and host.env["X"].startswith("$(touch")


@pytest.mark.parametrize(("groups", "complaint"), [
    ([{"name": "g", "hosts": ["gpu1", "nope"]}], "group 'g' names unknown host 'nope'"),
    ([{"name": "g", "hosts": ["gpu1", "gpu2"]}, {"name": "h", "hosts": ["gpu2", "gpu1"]}], "host 'gpu2' is in groups 'g' and 'h'"),
    ([{"name": "g", "hosts": ["gpu1", "here"]}], "group 'g': host 'here' has runtime local"),
])
def test_groups_are_checked(tmp_path, groups, complaint):
    document = {"hosts": [{"name": "gpu1", "address": "a"}, {"name": "gpu2", "address": "b"},
                          {"name": "here", "runtime": "local"}], "groups": groups}
    with pytest.raises(UserError, match=complaint.replace("(", r"\(")):
        load_hosts(hosts_file(tmp_path, document))


def test_the_hosts_schema_names_exactly_the_runtimes_there_are():
    """A runtime is added in one place (bench/controller/runtimes) and named in the schema: never one without the other."""
    from bench import schemas
    from bench.controller.runtimes import RUNTIMES

    assert set(schemas.schema("hosts")["$defs"]["host_settings"]["properties"]["runtime"]["enum"]) == set(RUNTIMES)
