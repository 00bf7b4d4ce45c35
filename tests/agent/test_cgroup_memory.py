"""The memory check reads the limit of the cgroup the agent runs in, not the root cgroup's: a Slurm
job's, a systemd scope's, a container's, under cgroup v2 or v1's memory controller, the tightest on
the way up to the hierarchy's root; and a refusal names that cgroup and its limit. Fake /proc and /sys
trees for each layout, and a real cgroup this test makes where the machine lets it (root, a memory
hierarchy it may write)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from bench.agent.fingerprint import system
from tests.conftest import bundle_path_from, cli

GIB = 1 << 30
V1_NO_LIMIT = "9223372036854771712\n"
V2_MOUNT = "41 31 0:38 / /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw\n"
V1_MOUNT = "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"


def tree(root: Path, cgroup: str, mountinfo: str, files: dict) -> Path:
    (root / "proc" / "self").mkdir(parents=True)
    (root / "proc" / "self" / "cgroup").write_text(cgroup)
    (root / "proc" / "self" / "mountinfo").write_text(mountinfo)
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


@pytest.mark.parametrize("cgroup, mountinfo, files, expected", [
    ("0::/system.slice/slurmstepd.scope/job_12\n", V2_MOUNT, {
        "sys/fs/cgroup/system.slice/slurmstepd.scope/job_12/memory.max": f"{4 * GIB}\n",
        "sys/fs/cgroup/system.slice/memory.max": "max\n"}, (4 * GIB, "/system.slice/slurmstepd.scope/job_12")),
    ("0::/user.slice/user-0.slice/session-3.scope\n", V2_MOUNT, {
        "sys/fs/cgroup/user.slice/user-0.slice/session-3.scope/memory.max": "max\n",
        "sys/fs/cgroup/user.slice/memory.max": f"{2 * GIB}\n"}, (2 * GIB, "/user.slice")),
    ("4:memory:/slurm/uid_0/job_7\n0::/\n", V1_MOUNT + V2_MOUNT.replace("/sys/fs/cgroup ", "/sys/fs/cgroup/unified "), {
        "sys/fs/cgroup/memory/slurm/uid_0/job_7/memory.limit_in_bytes": f"{8 * GIB}\n",
        "sys/fs/cgroup/memory/memory.limit_in_bytes": V1_NO_LIMIT}, (8 * GIB, "/slurm/uid_0/job_7")),
    ("4:memory:/docker/abc\n", "35 31 0:32 /docker/abc /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n", {
        "sys/fs/cgroup/memory/memory.limit_in_bytes": f"{3 * GIB}\n"}, (3 * GIB, "/docker/abc")),
    ("4:memory:/\n", V1_MOUNT, {"sys/fs/cgroup/memory/memory.limit_in_bytes": V1_NO_LIMIT}, None),
    ("0::/../../escape\n", V2_MOUNT, {"escape/memory.max": f"{GIB}\n"}, None),
    ("0::/job\n4:memory:/job\n", V2_MOUNT + V1_MOUNT.replace("/sys/fs/cgroup/memory", "/sys/fs/cgroup/v1mem"), {
        "sys/fs/cgroup/job/memory.max": f"{6 * GIB}\n", "sys/fs/cgroup/v1mem/job/memory.limit_in_bytes": f"{5 * GIB}\n"},
     (5 * GIB, "/job")),
], ids=["v2_slurm_job", "v2_tighter_above", "v1_slurm", "v1_container_without_cgroupns", "v1_no_limit", "no_way_out_of_the_mount",
        "v1_and_v2_the_tighter"])
def test_the_limit_of_the_agents_own_cgroup_is_read(tmp_path, cgroup, mountinfo, files, expected):
    assert system.memory_limit(tree(tmp_path, cgroup, mountinfo, files)) == expected


def test_without_proc_the_hierarchies_roots_are_read(tmp_path):
    """No /proc/self/cgroup or mountinfo (a stripped container): the roots at their usual places."""
    (tmp_path / "sys" / "fs" / "cgroup").mkdir(parents=True)
    (tmp_path / "sys" / "fs" / "cgroup" / "memory.max").write_text(f"{4 * GIB}\n")
    assert system.memory_limit(tmp_path) == (4 * GIB, "/")


def writable_memory_cgroup() -> "tuple[Path, str] | str":
    """(the folder of this process's memory cgroup, its path as /proc/self/cgroup names it), or why
    this machine gives none a test may make a child in."""
    if os.geteuid() != 0:
        return "not root: no cgroup can be made"
    own = system._own_cgroups(Path("/proc/self/cgroup").read_text())
    for kind, mount_root, mount_point in system._cgroup_mounts(Path("/proc/self/mountinfo").read_text()):
        path = own.get(kind)
        if path is None or not (path + "/").startswith(mount_root.rstrip("/") + "/"):
            continue
        folder = Path(mount_point) / os.path.relpath(path, mount_root)
        if kind == "v2" and "memory" not in (folder / "cgroup.subtree_control").read_text().split():
            continue  # a child would have no memory.max: enabling it here would change the machine
        if os.access(folder, os.W_OK):
            return folder, path
    return "no memory cgroup hierarchy this process may make a child in"


@pytest.fixture
def four_gib_cgroup():
    """A child of this process's memory cgroup limited to 4 GiB, and a preexec_fn that moves a child process into it."""
    found = writable_memory_cgroup()
    if isinstance(found, str):
        pytest.skip(found)
    parent, path = found
    child = parent / f"ddpbench-test-{os.getpid()}"
    try:
        child.mkdir()
    except OSError as err:
        pytest.skip(f"cannot make a cgroup under {parent}: {err.strerror}")
    limit = child / ("memory.limit_in_bytes" if (child / "memory.limit_in_bytes").exists() else "memory.max")
    limit.write_text(str(4 * GIB))

    def enter() -> None:
        (child / "cgroup.procs").write_text(str(os.getpid()))

    yield enter, f"{path.rstrip('/')}/{child.name}"
    for _ in range(50):  # its processes have ended; the kernel lets go of it a moment later
        try:
            child.rmdir()
            break
        except OSError:
            time.sleep(0.1)


def test_a_process_in_a_4_gib_cgroup_reads_that_cgroup_and_is_refused_by_its_limit(four_gib_cgroup, tmp_path):
    enter, cgroup = four_gib_cgroup
    done = cli("fingerprint", preexec_fn=enter, timeout=120)
    assert done.returncode == 0, done.stderr
    fingerprint = json.loads(done.stdout)
    assert (fingerprint["memory_limit_bytes"], fingerprint["memory_limit_cgroup"]) == (4 * GIB, cgroup)
    plan = tmp_path / "plan.yaml"  # 3 GiB of activations by the estimate, and 1 GiB for the process: not within 4 GiB
    plan.write_text("name: big\ntimeout_s: 600\nsuites:\n  - suite: ddp\n    world_sizes: [1]\n    params: {model: tiny, "
                    "micro_batch: 2048, seq_len: 32, steps: 2, warmup_steps: 1, precision: fp32, compile: false}\n")
    done = cli("run", "--plan", plan, "--out", tmp_path / "results", preexec_fn=enter, timeout=300)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    (line,) = [l for l in done.stderr.splitlines() if l.startswith("error: ")]
    assert line.startswith("error: host local: failed: ddp: tiny at micro_batch 2048 over 1 rank(s) needs about 3.07 GiB per rank ")
    assert f"the memory limit of cgroup {cgroup} (4 GiB) gives each of the 1 rank(s) it runs here 4 GiB; it would fit with micro_batch 1024" in line
    assert bundle_path_from(done.stdout).exists()
