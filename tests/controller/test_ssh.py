"""The controller over real SSH: sshd hosts on loopback addresses, runtime native with this
machine's Python, the real agent and torchrun (gloo on the CPU). Each test runs `python -m
bench run` as a user would and judges what the user sees: the exit status, one line per
failed host, the bundle, the files fetched, and that nothing is left running on the hosts.
The remote command line itself is checked with a local sh."""

from __future__ import annotations

import getpass
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml
from fabric import Connection

from bench.bundle import read_bundle
from bench.controller import ssh
from bench.controller.inventory import Host
from bench.controller.runtimes import HostError
from bench.controller.ssh.process import PID_MARK, command_line
from tests.conftest import TEST_PLANS as PLANS, bundle_path_from as bundle_path, cli, start_cli
from tests.support.loopback_hosts import free_port, stop_host

PYTHON = sys.executable


def write_hosts(path: Path, loopback, names, overrides=None, groups=()) -> Path:
    """A hosts file for some of the loopback hosts; overrides: name -> settings, or a new name -> a whole host."""
    document = loopback.hosts_document(PYTHON, path.parent / "work")
    by_name = {h["name"]: h for h in document["hosts"]}
    hosts = []
    for name in names:
        entry = dict(by_name[name]) if name in by_name else {"name": name}
        entry.update((overrides or {}).get(name, {}))
        entry["name"] = name
        hosts.append(entry)
    document["hosts"] = hosts
    if groups:
        document["groups"] = list(groups)
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def bench_args(hosts: Path, plan: "Path | None", out: Path, *extra: str) -> list[str]:
    args = ["run", "--hosts", str(hosts), "--out", str(out), *extra]
    return args + (["--plan", str(plan)] if plan else [])


def ddpbench(hosts: Path, plan: "Path | None", out: Path, *extra: str) -> subprocess.CompletedProcess:
    return cli(*bench_args(hosts, plan, out, *extra), timeout=240)


def error_lines(stderr: str) -> dict:
    """host name -> its `error: host NAME: ...` line."""
    lines = [l for l in stderr.splitlines() if l.startswith("error: host ")]
    return {l.split()[2].rstrip(":"): l for l in lines}


def processes_in(root: Path) -> list[str]:
    """Processes whose working folder is under root: the agent, torchrun and the ranks a host ran there."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cwd = os.readlink(entry / "cwd")
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError):
            continue
        if cwd.startswith(str(root)):
            found.append(f"{entry.name}: {cmdline}")
    return found


def processes_running(argv_text: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        if cmdline == argv_text:
            found.append(entry.name)
    return found


def wait_until_gone(find, timeout_s: float = 40) -> list:
    deadline = time.monotonic() + timeout_s
    while (left := find()) and time.monotonic() < deadline:
        time.sleep(0.5)
    return left


def test_hosts_and_a_group_run_in_parallel_into_one_bundle(loopback_hosts, tmp_path):
    port = free_port("127.0.0.4")
    group = {"name": "pair", "hosts": ["host3", "host4"], "socket_ifname": "lo", "rendezvous_port": port}
    hosts = write_hosts(tmp_path / "hosts.yaml", loopback_hosts, ["host1", "host2", "host3", "host4"], groups=[group])
    done = ddpbench(hosts, PLANS / "ssh-tiny.yaml", tmp_path / "results")
    assert done.returncode == 0, done.stderr
    path = bundle_path(done.stdout)
    bundle = read_bundle(path)
    entries = {h["name"]: h for h in bundle["hosts"]}
    assert list(entries) == ["host1", "host2", "host3", "host4"]
    assert all(e["status"] == "ok" and e["error"] is None for e in entries.values())
    for name in ("host1", "host2"):
        assert entries[name]["group"] is None
        assert [r["world_size"] for r in entries[name]["runs"]] == [1, 1]  # 4 KiB and 16 KiB
        assert entries[name]["fingerprint"]["software"]["torch"]
        assert (path.parent / "hosts" / name / "launches" / "00-collectives-default-ws1.log").is_file()
    # The group: one job of world size 2 over both hosts, its runs on the first member's entry.
    first, second = entries["host3"], entries["host4"]
    assert (first["group"], first["node_rank"], second["group"], second["node_rank"]) == ("pair", 0, "pair", 1)
    assert [r["world_size"] for r in first["runs"]] == [2, 2] and second["runs"] == []
    assert [(l["id"], l["nodes"], l["status"]) for l in second["launches"]] == [("00-collectives-default-ws2", 2, "ok")]
    assert first["fingerprint"] and second["fingerprint"]
    # The two solo hosts ran at the same time.
    raws = [json.loads((path.parent / "hosts" / n / "raw.json").read_text()) for n in ("host1", "host2")]
    assert max(r["started_at"] for r in raws) < min(r["finished_at"] for r in raws)
    assert (path.parent / "report.md").exists()
    assert not (tmp_path / "work").exists() or not any((tmp_path / "work").iterdir()), "the copied agent was left on a host"
    assert processes_in(tmp_path / "work") == []


def test_resume_skips_finished_launches_and_merges_old_and_new_runs(loopback_hosts, tmp_path):
    hosts = write_hosts(tmp_path / "hosts.yaml", loopback_hosts, ["host1"])
    first = ddpbench(hosts, PLANS / "ssh-two-launches.yaml", tmp_path / "results")
    assert first.returncode == 0, first.stderr
    # The plan pins torch 1.0, not fatal: reported, recorded, and the host still ran.
    assert "warning: host host1: torch " in first.stderr and ", the plan pins 1.0" in first.stderr
    run_dir = bundle_path(first.stdout).parent
    complete = read_bundle(run_dir / "bundle.json")
    assert complete["hosts"][0]["pin_mismatches"][0].startswith("torch ")

    # The controller died during launch 01: no bundle, a raw.json that holds launch 00 only.
    (run_dir / "bundle.json").unlink()
    raw_path = run_dir / "hosts" / "host1" / "raw.json"
    raw = json.loads(raw_path.read_text())
    old_launch_00 = raw["launches"][0]
    raw.update(complete=False, launches=raw["launches"][:1], runs=[r for r in raw["runs"] if r["launch_id"].startswith("00-")])
    raw_path.write_text(json.dumps(raw))

    resumed = ddpbench(hosts, None, tmp_path / "results", "--resume", str(run_dir))
    assert resumed.returncode == 0, resumed.stderr
    assert "00-collectives-default-ws1 finished in the run resumed: kept" in resumed.stderr and "01-collectives-gloo-ws1 ok" in resumed.stderr
    assert bundle_path(resumed.stdout) == run_dir / "bundle.json"
    merged = read_bundle(run_dir / "bundle.json")
    assert merged["run_id"] == complete["run_id"] and merged["started_at"] == complete["started_at"]
    entry = merged["hosts"][0]
    assert entry["status"] == "ok"
    assert [l["id"] for l in entry["launches"]] == ["00-collectives-default-ws1", "01-collectives-gloo-ws1"]
    assert entry["launches"][0] == old_launch_00  # kept, not run again
    assert sorted({r["launch_id"] for r in entry["runs"]}) == ["00-collectives-default-ws1", "01-collectives-gloo-ws1"]

    # Everything finished: resuming from the bundle runs nothing and keeps every run.
    again = ddpbench(hosts, None, tmp_path / "results", "--resume", str(run_dir))
    assert again.returncode == 0, again.stderr
    assert "01-collectives-gloo-ws1 finished in the run resumed: kept" in again.stderr and " ok\n" not in again.stderr.replace("] done", "")
    assert read_bundle(run_dir / "bundle.json")["hosts"][0]["runs"] == entry["runs"]


def test_resume_refuses_a_folder_that_is_not_a_run(loopback_hosts, tmp_path):
    hosts = write_hosts(tmp_path / "hosts.yaml", loopback_hosts, ["host1"])
    done = ddpbench(hosts, None, tmp_path / "results", "--resume", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"error: {tmp_path}: neither bundle.json nor run.json is there; give a run folder that `ddpbench run` wrote (results/<run-id>)"
    )


# One invocation with a good host beside every kind of broken one; each test below reads its part.
@pytest.fixture(scope="module")
def faults(loopback_hosts, tmp_path_factory):
    root = tmp_path_factory.mktemp("faults")
    pwned = root / "pwned"
    other_key = root / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other_key)], check=True)
    empty_known_hosts = root / "empty_known_hosts"
    empty_known_hosts.write_text("")
    no_torch = root / "python-without-torch"
    no_torch.write_text(f'#!/bin/sh\nexec {PYTHON} -S "$@"\n')  # no site-packages: the stdlib, no torch
    hang_seconds = f"{3000 + uuid.uuid4().int % 1000}.5"
    hangs = root / "python-that-hangs"
    hangs.write_text(f"#!/bin/sh\nsleep {hang_seconds}\n")
    for script in (no_torch, hangs):
        script.chmod(0o755)
    silent = socket.socket()
    silent.bind(("127.0.0.10", 0))
    silent.listen(8)  # the kernel completes the handshake; nothing ever says SSH-2.0
    refused_port = free_port("127.0.0.9")
    workdir = root / "work dir; $(touch {}) it's \"quoted\"".format(pwned)
    overrides = {
        "good": {"address": "127.0.0.2", "port": loopback_hosts.hosts[0].port, "workdir": str(workdir),
                 "known_hosts_file": str(empty_known_hosts), "accept_new_host_key": True,
                 "env": {"NCCL_DEBUG_SUBSYS": f"$(touch {pwned})", "SPACED": "a b; c 'd' \"e\"\nsecond line"},
                 "labels": ["PCIe 4.0 x4", f"quotes ' \" and ; $(touch {pwned})"]},
        "refused": {"address": "127.0.0.9", "port": refused_port},
        "silent": {"address": "127.0.0.10", "port": silent.getsockname()[1], "connect_timeout_s": 2},
        "wrongkey": {"identity_file": str(other_key)},
        "unknownkey": {"known_hosts_file": str(empty_known_hosts)},
        "nopython": {"python": "/nonexistent/bin/python3"},
        "notorch": {"python": str(no_torch)},
        "hangs": {"python": str(hangs), "command_timeout_s": 3},
    }
    for name in ("wrongkey", "unknownkey", "nopython", "notorch", "hangs"):
        overrides[name].update(address="127.0.0.3", port=loopback_hosts.hosts[1].port)
    hosts = write_hosts(root / "hosts.yaml", loopback_hosts, list(overrides), overrides)
    done = ddpbench(hosts, PLANS / "ssh-tiny.yaml", root / "results")
    silent.close()
    bundle = read_bundle(bundle_path(done.stdout))
    yield {"done": done, "lines": error_lines(done.stderr), "root": root, "pwned": pwned,
           "entries": {h["name"]: h for h in bundle["hosts"]}, "hang": f"sleep {hang_seconds}",
           "ports": {"refused": refused_port, "silent": overrides["silent"]["port"]}, "known_hosts": empty_known_hosts,
           "sshd_port": loopback_hosts.hosts[1].port}


def assert_failed(faults, name: str, message: str) -> None:
    assert faults["lines"][name] == f"error: host {name}: failed: {message}"
    assert faults["entries"][name]["status"] == "failed"
    assert faults["entries"][name]["error"] == message


def test_faults_the_good_host_still_runs_and_the_exit_status_says_something_failed(faults):
    assert faults["done"].returncode == 1
    assert set(faults["lines"]) == set(faults["entries"]) - {"good"}
    good = faults["entries"]["good"]
    assert good["status"] == "ok" and len(good["runs"]) == 2
    assert processes_in(faults["root"]) == []


def test_fault_refused_connection(faults):
    port = faults["ports"]["refused"]
    assert_failed(faults, "refused", f"connection refused by 127.0.0.9:{port}; check the address and port in the hosts file and that sshd runs there")


def test_fault_unreachable_host_times_out(faults):
    port = faults["ports"]["silent"]
    assert_failed(faults, "silent", f"no SSH answer from 127.0.0.10:{port} within 2 s (connect_timeout_s); check the address and port, and that the machine is up")


def test_fault_wrong_key(faults):
    port = faults["sshd_port"]
    assert_failed(faults, "wrongkey", f"authentication as {getpass.getuser()} with {faults['root'] / 'other_key'} was refused by "
                  f"127.0.0.3:{port}; check user and identity_file, and that the public key is in the host's authorized_keys")


def test_fault_unknown_host_key(faults):
    port, known = faults["sshd_port"], faults["known_hosts"]
    assert_failed(faults, "unknownkey", f"host key of 127.0.0.3:{port} is not in {known}; check it and add it "
                  f"(ssh-keyscan -p {port} 127.0.0.3 >> {known}), or set accept_new_host_key: true for a throwaway machine")
    # accept_new_host_key trusted the good host's key for that run only: known_hosts stays as it was.
    assert known.read_text() == ""


def test_fault_host_without_python(faults):
    line = faults["lines"]["nopython"]
    assert line.startswith("error: host nopython: failed: python '/nonexistent/bin/python3' was not found on the host or cannot run (")
    assert line.endswith("); set python: in the hosts file to the host's Python with torch")


def test_fault_python_without_torch(faults):
    python = faults["root"] / "python-without-torch"
    assert_failed(faults, "notorch", f"{python} on the host has no torch; install torch there, or set python: in the hosts file to a Python that has it")


def test_fault_command_that_hangs_is_ended_after_its_timeout(faults):
    python = faults["root"] / "python-that-hangs"
    assert_failed(faults, "hangs", f"checking {python} did not finish within 3 s (command_timeout_s) and was ended")
    assert wait_until_gone(lambda: processes_running(faults["hang"]), 30) == []  # 10 s was missed once on a loaded 2-core machine


def test_hosts_file_values_are_never_run_as_shell(faults):
    good = faults["entries"]["good"]
    assert good["status"] == "ok"
    assert not faults["pwned"].exists()
    assert good["labels"][1].endswith(f"$(touch {faults['pwned']})")
    assert not (faults["root"] / "work dir; $(touch {}) it's \"quoted\"".format(faults["pwned"])).exists()  # removed afterwards


def test_plan_that_needs_a_gpu_fails_on_a_cpu_host(loopback_hosts, tmp_path):
    hosts = write_hosts(tmp_path / "hosts.yaml", loopback_hosts, ["host1"])
    done = ddpbench(hosts, PLANS / "ssh-p2p-off.yaml", tmp_path / "results")
    assert done.returncode == 1
    assert error_lines(done.stderr)["host1"] == (
        "error: host host1: failed: collectives: transport preset 'p2p_off' needs NCCL and a GPU, this host has none; use 'gloo' or 'default'"
    )
    assert read_bundle(bundle_path(done.stdout))["hosts"][0]["status"] == "failed"


def test_fatal_pin_mismatch_stops_the_host_before_it_runs(loopback_hosts, tmp_path):
    plan = yaml.safe_load((PLANS / "ssh-tiny.yaml").read_text())
    plan["pin"] = {"torch": "1.0", "fatal": True}
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump(plan))
    hosts = write_hosts(tmp_path / "hosts.yaml", loopback_hosts, ["host1"])
    done = ddpbench(hosts, tmp_path / "plan.yaml", tmp_path / "results")
    assert done.returncode == 1
    line = error_lines(done.stderr)["host1"]
    assert line.startswith("error: host host1: failed: torch ") and line.endswith(
        ", the plan pins 1.0; the plan's pin is fatal: use a host with these versions, or relax the pin")
    entry = read_bundle(bundle_path(done.stdout))["hosts"][0]
    assert entry["status"] == "failed" and entry["launches"] == [] and entry["pin_mismatches"]


def start_run(hosts: Path, plan: Path, out: Path) -> subprocess.Popen:
    return start_cli(*bench_args(hosts, plan, out))


def read_until(process: subprocess.Popen, wanted: set, seen: list) -> None:
    """Read progress lines until every wanted line has appeared."""
    while wanted:
        line = process.stderr.readline()
        assert line, f"the run ended before {wanted}: {''.join(seen)}"
        seen.append(line)
        wanted.discard(line.strip())


def test_sshd_killed_during_a_run(loopback_hosts, tmp_path):
    victim = loopback_hosts.hosts[2]
    hosts = write_hosts(tmp_path / "hosts.yaml", loopback_hosts, ["host3", "host4"])
    process = start_run(hosts, PLANS / "ssh-tiny.yaml", tmp_path / "results")
    seen = []
    try:
        read_until(process, {"[host3] 00-collectives-default-ws1 ..."}, seen)
        stop_host(victim, sessions_too=True)
        stdout, stderr = process.communicate(timeout=240)
    finally:
        process.kill()
        loopback_hosts.restart(victim)
    stderr = "".join(seen) + stderr
    assert process.returncode == 1, stderr
    assert error_lines(stderr)["host3"] == (
        f"error: host host3: failed: the agent: lost the connection to 127.0.0.4:{victim.port} (the host went away or its sshd stopped)"
    )
    entries = {h["name"]: h for h in read_bundle(bundle_path(stdout))["hosts"]}
    assert entries["host3"]["status"] == "failed" and entries["host4"]["status"] == "ok"
    # Nobody is left to end the agent on the lost host: it saw its SSH session close and ended itself and its ranks.
    assert wait_until_gone(lambda: processes_in(tmp_path / "work")) == []


def test_ctrl_c_ends_every_agent_and_keeps_what_finished(loopback_hosts, tmp_path):
    hosts = write_hosts(tmp_path / "hosts.yaml", loopback_hosts, ["host1", "host2"])
    process = start_run(hosts, PLANS / "slow-second-launch.yaml", tmp_path / "results")
    seen = []
    try:
        read_until(process, {"[host1] 01-ddp-default-ws2 ...", "[host2] 01-ddp-default-ws2 ..."}, seen)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=120)
    finally:
        process.kill()
    stderr = "".join(seen) + stderr
    assert process.returncode == 130, stderr
    lines = error_lines(stderr)
    for name in ("host1", "host2"):
        assert lines[name] == f"error: host {name}: partial: the agent was ended: interrupted (Ctrl-C)"
    bundle = read_bundle(bundle_path(stdout))
    assert bundle["complete"] is False and bundle["incomplete_reason"] == "interrupted (Ctrl-C)"
    for entry in bundle["hosts"]:
        assert [l["id"] for l in entry["launches"]] == ["00-collectives-default-ws2"]  # what finished is kept
        assert entry["runs"] and all(r["launch_id"] == "00-collectives-default-ws2" for r in entry["runs"])
    assert wait_until_gone(lambda: processes_in(tmp_path / "work"), 10) == []
    assert not (tmp_path / "work").exists() or not any((tmp_path / "work").iterdir())


def loopback_host(loopback, index: int, **settings) -> Host:
    document = loopback.hosts_document(PYTHON, Path("/tmp"))
    entry = {**document["defaults"], **document["hosts"][index], **settings}
    return Host(**{**entry, "labels": tuple(entry["labels"])})


def test_jump_host_carries_the_connection(loopback_hosts):
    first = loopback_hosts.hosts[0]
    target = loopback_host(loopback_hosts, 1, jump=f"{getpass.getuser()}@{first.address}:{first.port}")
    connection = ssh.connect(target)
    try:
        done = ssh.SSHShell(connection, target).run(["sh", "-c", 'echo "$SSH_CONNECTION"'])
        assert done.stdout.split()[2:] == [target.address, str(target.port)]
        assert isinstance(connection.gateway, Connection) and connection.gateway.is_connected
    finally:
        ssh.close(connection)
    assert not connection.gateway.is_connected


def test_jump_host_that_fails_is_named(loopback_hosts):
    dead_port = free_port("127.0.0.2")
    target = loopback_host(loopback_hosts, 1, jump=f"127.0.0.2:{dead_port}")
    with pytest.raises(HostError) as failed:
        ssh.connect(target)
    assert str(failed.value) == (
        f"jump host 127.0.0.2:{dead_port}: connection refused by 127.0.0.2:{dead_port}; "
        "check the address and port in the hosts file and that sshd runs there"
    )


def test_group_member_that_fails_stops_its_group_not_the_other_hosts(loopback_hosts, tmp_path):
    group = {"name": "pair", "hosts": ["host2", "host3"], "rendezvous_port": free_port("127.0.0.3")}
    hosts = write_hosts(tmp_path / "hosts.yaml", loopback_hosts, ["host1", "host2", "host3"],
                        {"host3": {"python": "/nonexistent/python3"}}, groups=[group])
    done = ddpbench(hosts, PLANS / "ssh-tiny.yaml", tmp_path / "results")
    assert done.returncode == 1
    lines = error_lines(done.stderr)
    assert set(lines) == {"host2", "host3"}
    assert "python '/nonexistent/python3' was not found on the host" in lines["host3"]
    assert lines["host2"] == "error: host host2: failed: host host3 of group pair failed"
    entries = {h["name"]: h for h in read_bundle(bundle_path(done.stdout))["hosts"]}
    assert entries["host1"]["status"] == "ok"
    assert not (tmp_path / "work" / "host2").exists() or not any((tmp_path / "work" / "host2").iterdir())


def test_a_nested_workdir_is_removed_up_to_what_the_run_made(loopback_hosts, tmp_path):
    """mkdir -p made three folders for the workdir; the clean-up takes them all, and nothing that was there before."""
    before = tmp_path / "there-before"
    before.mkdir()
    workdir = before / "made" / "by" / "the run"
    hosts = write_hosts(tmp_path / "hosts.yaml", loopback_hosts, ["host1"], {"host1": {"workdir": str(workdir)}})
    done = ddpbench(hosts, PLANS / "ssh-tiny.yaml", tmp_path / "results")
    assert done.returncode == 0, done.stderr
    assert before.is_dir() and not any(before.iterdir())


def test_remote_command_line_passes_every_argument_as_plain_text(tmp_path):
    pwned = tmp_path / "pwned"
    argv = ["printf", "[%s]\\n", f"$(touch {pwned})", "a b", "it's", '"q"', "x;y", "line1\nline2", "`id`", "*"]
    done = subprocess.run(["sh", "-c", command_line(argv, cwd=str(tmp_path))], capture_output=True, text=True)
    assert done.returncode == 0
    assert done.stdout == "".join(f"[{a}]\n" for a in argv[2:])
    assert done.stderr.startswith(PID_MARK)
    assert not pwned.exists()
