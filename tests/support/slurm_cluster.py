"""A real Slurm cluster on this machine for the tests: munged, slurmctld and two slurmd
(node1, node2: 2 CPUs each, both at 127.0.0.1 on ports of their own), all in one temp folder.

Partition `debug` holds both nodes; partition `empty` holds only a node that is down (no slurmd
runs for it), so a job there stays pending. There is no slurmdbd (a database server is too much for the tests):
accounts are checked by a job_submit.lua that knows `physics` and `chemistry`, as a real cluster
checks them against its associations; sacct answers "accounting storage is disabled", so the
runtime reads a job's end from scontrol (MinJobAge keeps finished jobs there for 5 minutes).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from tests.support.loopback_hosts import free_port

ACCOUNTS = ("physics", "chemistry")
NODES = ("node1", "node2")
PORT_TRIES = 3  # ports are chosen free, and another test's process can take one before a daemon binds it
DAEMONS = {"munged": "/usr/sbin/munged", "slurmctld": "/usr/sbin/slurmctld", "slurmd": "/usr/sbin/slurmd"}

JOB_SUBMIT_LUA = """\
-- The test cluster's accounts (a real cluster checks them against slurmdbd's associations).
local accounts = { %s }
function slurm_job_submit(job_desc, part_list, submit_uid)
   if job_desc.account ~= nil and not accounts[job_desc.account] then
      slurm.log_user("Invalid account " .. job_desc.account)
      return slurm.ESLURM_INVALID_ACCOUNT
   end
   return slurm.SUCCESS
end
function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
   return slurm.SUCCESS
end
return slurm.SUCCESS
""" % ", ".join(f"{name} = true" for name in ACCOUNTS)


def missing_daemons() -> list[str]:
    return [name for name, path in DAEMONS.items() if not Path(path).exists()] + [
        name for name in ("sbatch", "squeue", "scontrol", "scancel") if shutil.which(name) is None
    ]


class SlurmCluster:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.conf = folder / "slurm.conf"
        self.processes: list = []

    @property
    def env(self) -> dict:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def start(self) -> "SlurmCluster":
        """munged, slurmctld and the slurmd, answering; where one fails to (or a signal stops the start),
        those started are ended. A port that another process took between its choice and a daemon's
        bind is chosen again, up to PORT_TRIES times in all."""
        for _ in range(PORT_TRIES - 1):
            try:
                return self._start_or_stop()
            except RuntimeError:
                if not self._port_taken():
                    raise
                self.processes = []
                shutil.rmtree(self.folder / "log")
                (self.folder / "munge" / "socket").unlink(missing_ok=True)
        return self._start_or_stop()

    def _start_or_stop(self) -> "SlurmCluster":
        try:
            return self._start()
        except BaseException:
            self.stop()
            raise

    def _port_taken(self) -> bool:
        return any("Address already in use" in log.read_text(errors="replace") for log in (self.folder / "log").iterdir())

    def _start(self) -> "SlurmCluster":
        f = self.folder
        for sub in ("munge", "state", "log", *(f"spool/{n}" for n in NODES)):
            (f / sub).mkdir(parents=True, exist_ok=True)
        (f / "munge").chmod(0o711)
        key = f / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        socket = f / "munge" / "socket"
        ports = [free_port("127.0.0.1") for _ in range(2 + len(NODES))]
        node_ports = ",".join(map(str, ports[2:]))
        self.conf.write_text(
            "ClusterName=ddpbenchtest\n"
            f"SlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort={ports[0]}\nSlurmdPort={ports[1]}\n"
            "SlurmUser=root\nSlurmdUser=root\n"
            f"AuthType=auth/munge\nAuthInfo=socket={socket}\nCredType=cred/munge\n"
            f"StateSaveLocation={f}/state\nSlurmdSpoolDir={f}/spool/%n\n"
            f"SlurmctldPidFile={f}/slurmctld.pid\nSlurmdPidFile={f}/slurmd-%n.pid\n"
            f"SlurmctldLogFile={f}/log/slurmctld.log\nSlurmdLogFile={f}/log/slurmd-%n.log\n"
            # No systemd and no cgroups in a container: processes are tracked by their parents.
            "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nJobAcctGatherType=jobacct_gather/none\n"
            "SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n"
            "AccountingStorageType=accounting_storage/none\nJobSubmitPlugins=lua\nEnforcePartLimits=ALL\n"
            "MpiDefault=none\nReturnToService=2\n"
            # Quick answers: schedule every second, keep ended jobs visible, end timed-out jobs at once.
            "SchedulerType=sched/backfill\nSchedulerParameters=sched_interval=1\nMinJobAge=300\n"
            "KillWait=2\nOverTimeLimit=0\nInactiveLimit=0\nMessageTimeout=5\n"
            f"NodeName=node[1-2] NodeHostname=localhost NodeAddr=127.0.0.1 Port=[{node_ports}] CPUs=2 RealMemory=1000 State=UNKNOWN\n"
            f"NodeName=ghost NodeAddr=127.0.0.1 Port={free_port('127.0.0.1')} CPUs=2 State=DOWN\n"
            "PartitionName=debug Nodes=node[1-2] Default=YES MaxTime=INFINITE State=UP\n"
            "PartitionName=empty Nodes=ghost MaxTime=INFINITE State=UP\n"
        )
        (f / "job_submit.lua").write_text(JOB_SUBMIT_LUA)
        munge_files = {"--key-file": key, "--log-file": f / "munge" / "log", "--pid-file": f / "munge" / "pid",
                       "--seed-file": f / "munge" / "seed"}
        self._start_daemon([DAEMONS["munged"], "-F", "--force", "-S", str(socket), *(f"{k}={v}" for k, v in munge_files.items())], "munged")
        self._wait_for(lambda: socket.exists(), "munged")
        self._start_daemon([DAEMONS["slurmctld"], "-D", "-c"], "slurmctld")
        self._wait_for(lambda: self._ask(["scontrol", "ping"]).returncode == 0, "slurmctld")
        for node in NODES:
            self._start_daemon([DAEMONS["slurmd"], "-D", "-N", node], f"slurmd-{node}")
        self._wait_for(lambda: self._ask(["sinfo", "-h", "-p", "debug", "-t", "idle", "-o", "%D"]).stdout.strip() == str(len(NODES)),
                       "the slurmd nodes")
        return self

    def _start_daemon(self, argv: list, name: str) -> None:
        # In a session of its own: a Ctrl-C reaches the tests, whose teardown ends it after the jobs.
        with open(self.folder / "log" / f"{name}.out", "ab") as log:
            self.processes.append(subprocess.Popen(argv, stdout=log, stderr=log, env=self.env, start_new_session=True))

    def _ask(self, argv: list) -> subprocess.CompletedProcess:
        return subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=30)

    def _wait_for(self, ready, what: str, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if ready():
                return
            if any(p.poll() is not None for p in self.processes):
                break
            time.sleep(0.2)
        raise RuntimeError(f"{what} did not start; see {self.folder / 'log'}")

    def scontrol_job(self, job_id: str) -> dict:
        done = self._ask(["scontrol", "show", "job", "--oneliner", job_id])
        return dict(part.split("=", 1) for part in done.stdout.split() if "=" in part)

    def active_jobs(self) -> list[str]:
        return self._ask(["squeue", "-h", "-o", "%i"]).stdout.split()

    def stop(self) -> None:
        """Cancel what is left in the queue and let its steps end (a slurmstepd whose slurmd is gone
        stays behind), then end the daemons, whatever the queue answered."""
        try:
            left = self.active_jobs() if self.processes and self.processes[-1].poll() is None else []
            if left:
                self._ask(["scancel", "--full", *left])
                deadline = time.monotonic() + 30
                while self.active_jobs() and time.monotonic() < deadline:
                    time.sleep(0.5)
        finally:
            self._end_daemons()

    def _end_daemons(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
        for process in reversed(self.processes):
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
