"""Runtime slurm against a real Slurm (tests/support/slurm_cluster.py: munged, slurmctld, two slurmd on
this machine) reached through a loopback sshd as its login node. Each test runs `python -m bench
run` as a user would and judges the exit status, the one error line, the bundle, and the queue."""

from __future__ import annotations

import getpass
import json
import re
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from bench.bundle import read_bundle
from bench.controller.inventory import Host
from bench.controller.errors import HostError
from bench.controller.runtimes.base import AgentJob
from bench.controller.runtimes.slurm import SlurmRuntime, batch_script, state_from_job_output
from tests.conftest import TEST_PLANS as PLANS, bundle_path_from as bundle_path, cli, start_cli
from tests.support.loopback_hosts import SSHD, LoopbackHosts, stop_host

PYTHON = sys.executable


@pytest.fixture(scope="session")
def login_node(slurm_cluster, tmp_path_factory):
    """A loopback sshd whose sessions find the test cluster's slurm.conf, as a login node's find /etc/slurm."""
    if not Path(SSHD).exists():
        pytest.fail("sshd is missing: `bash tests/system-deps.sh` installs it (openssh-server)")
    hosts = LoopbackHosts(tmp_path_factory.mktemp("login"), count=1, first_octet=30,
                          extra_config=f"SetEnv SLURM_CONF={slurm_cluster.conf}\n").start()
    yield hosts
    hosts.stop()


@pytest.fixture(scope="session")
def hostile_login_node(slurm_cluster, tmp_path_factory):
    """A login node whose sbatch answers what the file `answer` beside it holds, and submits nothing:
    a broken or hostile cluster's front end."""
    if not Path(SSHD).exists():
        pytest.fail("sshd is missing: `bash tests/system-deps.sh` installs it (openssh-server)")
    fake = tmp_path_factory.mktemp("fake-slurm")
    (fake / "sbatch").write_text(f"#!/bin/sh\ncat {fake / 'answer'}\n")
    (fake / "sbatch").chmod(stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    hosts = LoopbackHosts(tmp_path_factory.mktemp("hostile-login"), count=1, first_octet=31,
                          extra_config=f"SetEnv SLURM_CONF={slurm_cluster.conf} PATH={fake}:/usr/bin:/bin\n").start()
    yield hosts, fake / "answer"
    hosts.stop()


def write_hosts(path: Path, login, **slurm) -> Path:
    host = login.hosts[0]
    settings = {"partition": "debug", "account": "physics", "poll_s": 0.5, **slurm}
    document = {
        "defaults": {"user": getpass.getuser(), "identity_file": str(login.user_key), "known_hosts_file": str(login.known_hosts)},
        "hosts": [{"name": "cluster", "runtime": "slurm", "address": host.address, "port": host.port, "python": PYTHON,
                   "workdir": str(path.parent / "shared"), "socket_ifname": "lo", "slurm": settings}],
    }
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def run_args(hosts: Path, plan: Path, out: Path, *extra: str) -> list:
    return ["run", "--hosts", str(hosts), "--out", str(out), "--plan", str(plan), *extra]


def error_line(stderr: str) -> str:
    return next(l for l in stderr.splitlines() if l.startswith("error: "))


def test_two_node_gloo_job_makes_a_bundle_with_the_job_and_every_node(login_node, slurm_cluster, tmp_path):
    marker = tmp_path / "pwned"
    comment = f"$(touch {marker}) `touch {marker}`; touch {marker}"
    hosts = write_hosts(tmp_path / "hosts.yaml", login_node, nodes=2, sbatch_options=[f"--comment={comment}"])
    started = time.monotonic()
    result = cli(*run_args(hosts, PLANS / "ssh-tiny.yaml", tmp_path / "results"), timeout=300)
    assert result.returncode == 0, result.stderr
    bundle = read_bundle(bundle_path(result.stdout))
    (entry,) = bundle["hosts"]
    job = entry["scheduler_job"]
    assert entry["status"] == "ok" and entry["runtime"] == "slurm"
    assert job["state"] == "COMPLETED" and job["partition"] == "debug" and job["account"] == "physics"
    assert job["nodes"] == ["node1", "node2"]
    assert [(n["node"], n["node_rank"]) for n in job["node_fingerprints"]] == [("node1", 0), ("node2", 1)]
    assert all(n["fingerprint"]["cpu"] for n in job["node_fingerprints"])
    # One launch over both nodes: one rank per node, two in the job.
    assert [(l["id"], l["nodes"], l["world_size"], l["status"]) for l in entry["launches"]] == [
        ("00-collectives-default-ws2", 2, 2, "ok")]
    assert entry["runs"] and all(r["world_size"] == 2 for r in entry["runs"])
    assert f"[cluster] job {job['job_id']} running on node1,node2" in result.stderr
    # The hosts file's text reached Slurm as text: no shell ran it.
    assert slurm_cluster.scontrol_job(job["job_id"]).get("Comment", "").startswith("$(touch")
    assert not marker.exists()
    run_dir = bundle_path(result.stdout).parent / "hosts" / "cluster"
    script = (run_dir / "job.sh").read_text()
    assert script.startswith("#!/bin/bash") and """'{"NCCL_SOCKET_IFNAME": "lo", "GLOO_SOCKET_IFNAME": "lo"}'""" in script
    assert not (tmp_path / "shared").exists()  # the work folder is removed
    # The report keeps a 2-node job apart from one node with as many ranks.
    # (busy): both slurmd nodes are this one machine, each node's ranks the other's "other processes"
    assert re.search(r"\| cluster( \(busy\))? \| 2 nodes x CPU only \| default \(gloo\), 2 nodes x 1 \| all_reduce \|",
                     (run_dir.parent.parent / "report.md").read_text())
    print(f"submit to bundle: {time.monotonic() - started:.1f} s")


def test_job_killed_by_its_time_limit_keeps_what_finished_and_says_so(login_node, slurm_cluster, tmp_path):
    hosts = write_hosts(tmp_path / "hosts.yaml", login_node, time_limit_min=1)
    result = cli(*run_args(hosts, PLANS / "slow-second-launch.yaml", tmp_path / "results"), timeout=300)
    assert result.returncode == 1, result.stderr
    line = error_line(result.stderr)
    assert line.startswith("error: host cluster: partial: slurm job ") and " ended TIMEOUT, reason TimeLimit (scontrol); " in line
    assert "raise slurm.time_limit_min" in line and "--resume" in line
    entry = read_bundle(bundle_path(result.stdout))["hosts"][0]
    assert entry["scheduler_job"]["state"] == "TIMEOUT"
    assert [l["id"] for l in entry["launches"]] == ["00-collectives-default-ws2"]  # the launch that finished in time
    assert "gate" not in entry["fingerprint"]  # a CPU has no P2P to check (the gate's --out out: tests/agent/test_gate.py)
    assert entry["runs"]
    assert slurm_cluster.active_jobs() == []


def test_sigterm_of_the_controller_cancels_the_job_and_keeps_what_finished(login_node, slurm_cluster, tmp_path):
    hosts = write_hosts(tmp_path / "hosts.yaml", login_node)
    process = start_run(hosts, PLANS / "slow-second-launch.yaml", tmp_path / "results")
    job_id, stdout, stderr = act_during_the_ddp_launch(process, lambda: process.send_signal(signal.SIGTERM))
    assert process.returncode == 143, stderr
    assert error_line(stderr) == f"error: host cluster: partial: interrupted (SIGTERM): slurm job {job_id} was cancelled (scancel)"
    assert slurm_cluster.scontrol_job(job_id)["JobState"] == "CANCELLED"
    bundle = read_bundle(bundle_path(stdout))
    assert bundle["complete"] is False
    entry = bundle["hosts"][0]
    assert [l["id"] for l in entry["launches"]] == ["00-collectives-default-ws2"] and entry["runs"]
    assert entry["scheduler_job"]["state"] == "CANCELLED"


def start_run(hosts: Path, plan: Path, out: Path) -> subprocess.Popen:
    return start_cli(*run_args(hosts, plan, out))


def act_during_the_ddp_launch(process: subprocess.Popen, action) -> tuple[str, str, str]:
    """Once the job runs the plan's DDP launch, `action`; then (job id, stdout, the progress seen + stderr)."""
    seen = []
    try:
        job_id = read_until(process, "[cluster] 01-ddp-default-ws2 ...", seen)
        action()
        stdout, stderr = process.communicate(timeout=120)
    finally:
        process.kill()
    return job_id, stdout, "\n".join(seen) + "\n" + stderr


def read_until(process: subprocess.Popen, wanted: str, seen: list) -> str:
    """Progress lines until `wanted`; returns the job id the controller announced."""
    while wanted not in seen:
        line = process.stderr.readline()
        assert line, f"the run ended early: {''.join(seen)}"
        seen.append(line.strip())
    return next(l.split()[2] for l in seen if l.startswith("[cluster] job ") and l.endswith(" submitted ..."))


def test_login_node_lost_during_the_job_names_the_job_left_running(login_node, slurm_cluster, tmp_path):
    hosts = write_hosts(tmp_path / "hosts.yaml", login_node)
    process = start_run(hosts, PLANS / "slow-second-launch.yaml", tmp_path / "results")
    try:
        job_id, stdout, stderr = act_during_the_ddp_launch(process, lambda: stop_host(login_node.hosts[0], sessions_too=True))
    finally:
        for left_running in slurm_cluster.active_jobs():
            subprocess.run(["scancel", left_running], env=slurm_cluster.env)
        login_node.restart(login_node.hosts[0])
    assert process.returncode == 1, stderr
    assert error_line(stderr).endswith(
        f"(the host went away or its sshd stopped); slurm job {job_id} may still run: scancel {job_id} on the login node, "
        "or let it end and rerun with --resume")
    entry = read_bundle(bundle_path(stdout))["hosts"][0]
    assert entry["scheduler_job"]["job_id"] == job_id


def test_job_pending_past_the_patience_is_cancelled_with_one_line(login_node, slurm_cluster, tmp_path):
    hosts = write_hosts(tmp_path / "hosts.yaml", login_node, partition="empty", pending_patience_s=3)
    result = cli(*run_args(hosts, PLANS / "ssh-tiny.yaml", tmp_path / "results"), timeout=120)
    assert result.returncode == 1, result.stderr
    line = error_line(result.stderr)
    assert line.startswith("error: host cluster: failed: slurm job ") and "in partition empty (" in line
    assert line.endswith("past slurm.pending_patience_s 3; it was cancelled: choose a partition with free nodes, or raise pending_patience_s")
    job_id = line.split()[6]
    assert slurm_cluster.scontrol_job(job_id)["JobState"] == "CANCELLED"
    # The queue wait is shown as such, with squeue's reason.
    assert f"[cluster] job {job_id} queued: Nodes required for job are DOWN, DRAINED" in result.stderr
    run_dir = bundle_path(result.stdout).parent
    assert read_bundle(run_dir / "bundle.json")["hosts"][0]["scheduler_job"]["state"] == "CANCELLED"

    # --resume in a partition with free nodes runs the plan into the same run folder.
    write_hosts(hosts, login_node)
    resumed = cli("run", "--hosts", str(hosts), "--out", str(tmp_path / "results"), "--resume", str(run_dir), timeout=180)
    assert resumed.returncode == 0, resumed.stderr
    assert bundle_path(resumed.stdout) == run_dir / "bundle.json"
    entry = read_bundle(run_dir / "bundle.json")["hosts"][0]
    assert entry["status"] == "ok" and entry["scheduler_job"]["state"] == "COMPLETED" and entry["runs"]


@pytest.mark.parametrize("field, value, expected", [
    ("account", "nosuch", "error: host 'cluster': the cluster refuses the job: Invalid account nosuch; set slurm.account (now 'nosuch') "
                          "to one of yours (sacctmgr show associations user=$USER)"),
    ("partition", "nosuch", "error: host 'cluster': the cluster refuses the job: invalid partition specified: nosuch; "
                            "set slurm.partition (now 'nosuch') to one that sinfo lists"),
])
def test_what_the_cluster_rejects_stops_the_run_before_submission(login_node, slurm_cluster, tmp_path, field, value, expected):
    hosts = write_hosts(tmp_path / "hosts.yaml", login_node, **{field: value})
    before = slurm_cluster.active_jobs()
    result = cli(*run_args(hosts, PLANS / "ssh-tiny.yaml", tmp_path / "results"), timeout=60)
    assert (result.returncode, result.stderr.strip()) == (2, expected)
    assert not (tmp_path / "results").exists() and slurm_cluster.active_jobs() == before


@pytest.mark.parametrize("slurm, plan, expected", [
    ({"sbatch_options": ["--output=/tmp/elsewhere"]}, "ssh-tiny.yaml",
     "error: host 'cluster': slurm.sbatch_options '--output=/tmp/elsewhere' is not allowed"),
    ({"nodes": 2, "gpus_per_node": 1}, "slow-second-launch.yaml",
     "error: host 'cluster': every world size of the plan (2 ranks per node) needs more than slurm.gpus_per_node 1; "
     "raise gpus_per_node, or use a plan with world sizes up to 1"),
    ({"nodes": 2, "gpus_per_node": 1}, "copy-engine-two-nodes.yaml",
     "error: host 'cluster': slurm.nodes 2: the plan's ddp runs allreduce copy_engine, which works within one node; "
     "set slurm.nodes: 1 or use allreduce: nccl"),
])
def test_settings_the_plan_or_the_allow_list_refuse_exit_2_before_any_ssh(tmp_path, slurm, plan, expected):
    document = {"hosts": [{"name": "cluster", "runtime": "slurm", "address": "127.0.0.1", "port": 9,
                           "slurm": {"partition": "debug", **slurm}}]}
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text(yaml.safe_dump(document))
    plan_path = PLANS / plan
    if plan == "copy-engine-two-nodes.yaml":
        plan_path = tmp_path / plan
        plan_path.write_text(yaml.safe_dump({"name": "ce", "suites": [{"suite": "ddp", "world_sizes": [1], "params": {
            "model": "tiny", "micro_batch": 2, "seq_len": 32, "steps": 2, "warmup_steps": 1, "precision": "fp32",
            "allreduce": "copy_engine"}}]}))
    result = cli(*run_args(hosts, plan_path, tmp_path / "results"), timeout=60)
    assert result.returncode == 2 and result.stderr.startswith(expected), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_partition_with_shell_syntax_is_refused_by_the_schema(tmp_path):
    marker = tmp_path / "pwned"
    document = {"hosts": [{"name": "cluster", "runtime": "slurm", "address": "127.0.0.1",
                           "slurm": {"partition": f"$(touch {marker})"}}]}
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text(yaml.safe_dump(document))
    result = cli(*run_args(hosts, PLANS / "ssh-tiny.yaml", tmp_path / "results"), timeout=60)
    assert result.returncode == 2 and "slurm" in result.stderr and "partition" in result.stderr, result.stderr
    assert not marker.exists()


def test_the_batch_script_passes_hostile_values_as_plain_text(tmp_path):
    """The script as bash runs it, with srun and module as stubs that print their arguments."""
    marker = tmp_path / "pwned"
    hostile = f"$(touch {marker})'\"; touch {marker} #"
    host = Host(name="cluster", runtime="slurm", address="login", python=f"/opt/py {hostile}",
                env={"NCCL_DEBUG": hostile}, slurm={"partition": "debug", "nodes": 2, "modules": [hostile]})
    job = AgentJob(host=host, plan={"suites": [], "timeout_s": 60}, result_dir=tmp_path, progress=lambda e: None, run_id="r1")
    stubs = tmp_path / "bin"
    stubs.mkdir()
    for name, body in {"srun": 'printf "%s\\n" "$@"', "scontrol": "echo node7"}.items():
        (stubs / name).write_text(f"#!/bin/bash\n{body}\n")
        (stubs / name).chmod(stat.S_IRWXU)
    script = tmp_path / "job.sh"
    shebang, rest = batch_script(job).split("\n", 1)
    assert shebang == "#!/bin/bash -l"  # a login shell: the cluster's profile defines `module`
    script.write_text(shebang + "\nmodule() { printf '%s\\n' \"$@\"; }\n" + rest)
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, cwd=tmp_path,
                          env={"PATH": f"{stubs}:/usr/bin:/bin", "SLURM_JOB_NUM_NODES": "2", "SLURM_JOB_NODELIST": "node[7-8]",
                               "SLURM_JOB_ID": "42"})
    assert done.returncode == 0, done.stderr
    argv = done.stdout.splitlines()
    assert argv[:2] == ["load", hostile]
    assert f"/opt/py {hostile}" in argv and json.dumps({"NCCL_DEBUG": hostile}) in argv
    assert argv[argv.index("--rendezvous") + 1] == "node7:29400"
    assert not marker.exists()


@pytest.mark.parametrize("output, state, reason", [
    # What the test cluster's job of test_job_killed_by_its_time_limit... wrote (Slurm 22.05).
    ("slurmstepd-node1: error: *** STEP 4.0 ON node1 CANCELLED AT 2026-11-23T13:03:43 DUE TO TIME LIMIT ***\n"
     "slurmstepd-node1: error: *** JOB 4 ON node1 CANCELLED AT 2026-11-23T13:03:43 DUE TO TIME LIMIT ***\n"
     "srun: error: node1: task 0: Exited with exit code 143", "TIMEOUT", "Time limit"),
    ("slurmstepd: error: *** JOB 12 ON gpu-b07 CANCELLED AT 2026-11-23T12:00:01 DUE TO PREEMPTION ***", "PREEMPTED", "Preemption"),
    ("srun: error: ...\nslurmstepd: error: *** JOB 12 ON node1 CANCELLED AT 2026-11-23T12:00:01 ***", "CANCELLED", None),
])
def test_a_job_the_cluster_forgot_is_named_from_its_output(output, state, reason):
    assert state_from_job_output(output) == {"state": state, "reason": reason, "exit_code": None, "source": "job output"}
    assert state_from_job_output("all fine") is None


@pytest.mark.parametrize("answer", ["12/../../../escaped", "1" * 80, "12;$(touch /tmp/pwned-by-sbatch)", "12 && reboot", ""])
def test_a_job_id_that_is_no_job_id_is_refused_and_writes_nothing_outside_the_run(hostile_login_node, tmp_path, answer):
    login, answer_file = hostile_login_node
    answer_file.write_text(answer + "\n")
    hosts = write_hosts(tmp_path / "hosts.yaml", login)
    result = cli(*run_args(hosts, PLANS / "ssh-tiny.yaml", tmp_path / "results"), timeout=120)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    line = error_line(result.stderr)
    assert line.startswith("error: host cluster: failed: sbatch answered ") and "where a job id (digits) belongs" in line
    assert len(line) < 400  # the answer is cut, never pasted whole
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert written and all(p.is_relative_to(tmp_path / "results") or p.name == "hosts.yaml" for p in written), written
    assert not any(p.name.startswith("job-") or "escaped" in p.name for p in written)
    assert read_bundle(bundle_path(result.stdout))["hosts"][0]["status"] == "failed"


def test_a_module_that_does_not_load_ends_the_job_with_its_reason(login_node, slurm_cluster, tmp_path):
    """The test cluster has no `module` command at all (no Lmod): the job must not go on without it."""
    hosts = write_hosts(tmp_path / "hosts.yaml", login_node, modules=["cuda/12.4"])
    result = cli(*run_args(hosts, PLANS / "ssh-tiny.yaml", tmp_path / "results"), timeout=300)
    assert result.returncode == 1, result.stderr
    line = error_line(result.stderr)
    assert "module load cuda/12.4 failed on the compute node (" in line and "command not found" in line, line
    assert "fix the host's slurm.modules" in line
    entry = read_bundle(bundle_path(result.stdout))["hosts"][0]
    assert entry["status"] == "failed" and entry["runs"] == []
    assert slurm_cluster.active_jobs() == []


def test_a_job_cancelled_while_slurm_gives_no_reason_says_none(tmp_path, monkeypatch):
    """squeue's reason of a job not yet considered is "None": the line says nothing rather than "(None)"."""
    host = Host(name="cluster", runtime="slurm", address="login", slurm={"partition": "debug", "pending_patience_s": 0, "poll_s": 0.01})
    job = AgentJob(host=host, plan={"suites": [], "timeout_s": 60}, result_dir=tmp_path, progress=lambda e: None, run_id="r1")
    runtime = SlurmRuntime()
    runtime.job_id, runtime._remote_dir = "12", "/work/r1-cluster"
    runtime.scheduler_job = {"scheduler": "slurm", "job_id": "12", "partition": "debug", "nodes": [], "state": "PENDING", "reason": None}
    monkeypatch.setattr(runtime, "_squeue", lambda: {"state": "PENDING", "reason": "None", "nodelist": ""})
    monkeypatch.setattr(runtime, "_scancel", lambda: None)
    with pytest.raises(HostError) as refused:
        runtime._follow(job, lambda line: None, submitted=time.monotonic() - 5)
    assert re.fullmatch(r"slurm job 12 waited \d+ s in partition debug, past slurm\.pending_patience_s 0; it was cancelled: "
                        r"choose a partition with free nodes, or raise pending_patience_s", str(refused.value)), str(refused.value)
    assert runtime.scheduler_job["reason"] is None


def test_the_test_cluster_starts_when_a_port_it_chose_is_taken_before_its_daemon_binds_it(tmp_path, monkeypatch):
    """Another test's process may take a port between its choice and slurmctld's bind: chosen again."""
    import socket

    from tests.support import slurm_cluster

    taken = socket.create_server(("127.0.0.1", 0))
    first = iter([taken.getsockname()[1]])  # slurmctld's port, the first chosen
    chosen = slurm_cluster.free_port
    monkeypatch.setattr(slurm_cluster, "free_port", lambda host: next(first, None) or chosen(host))
    cluster = slurm_cluster.SlurmCluster(tmp_path).start()
    try:
        assert subprocess.run(["scontrol", "ping"], env=cluster.env, capture_output=True, text=True).returncode == 0
        assert f"SlurmctldPort={taken.getsockname()[1]}\n" not in cluster.conf.read_text()
    finally:
        cluster.stop()
        taken.close()
