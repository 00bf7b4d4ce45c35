"""Runtime `slurm`: the plan runs as one batch job of a Slurm cluster, reached at its login node.

connect to the login node -> copy the agent and the plan into a work folder on the shared file
system (as runtime native does) -> write a batch script and submit it with sbatch -> while the
job waits, show squeue's pending reason; while it runs, stream the first node's agent events
from its file -> when it has left the queue, name its end (sacct, or scontrol where the cluster
keeps no accounting) and fetch the results -> remove the work folder.

The script starts the agent once per node (srun, one task per node); with several nodes the
agents meet at a c10d rendezvous on the job's first node. Every value from the hosts file
reaches the login node as an argv element (shlex-quoted by ssh.process.command_line) or is shlex-quoted
into the script: none is ever read as shell syntax.
"""

from __future__ import annotations

import json
import posixpath
import re
import time
from typing import NoReturn

from bench.common.polling import wait_until
from bench.common.protocol import Stage, Warned
from bench.controller.errors import HostError
from bench.controller.inventory import Host
from bench.controller.runtimes.base import INTERRUPTED, AgentJob, agent_output_listener
from bench.controller.runtimes.native import NativeRuntime, short_command
from bench.controller.runtimes.slurm_job import EVENTS, MODULE_FAILED, SBATCH_ALLOWED, SCRIPT, batch_script, sbatch_options
from bench.controller.shell import CommandNotFound, Result
from bench.controller.ssh import SSHShell
from bench.controller.ssh.connection import where
from bench.controller.ssh.files import get_anew
from bench.errors import UserError

DEFAULT_PATIENCE_S = 3600.0
DEFAULT_POLL_S = 10.0
END_WAIT_S = 120.0  # how long a cancelled job may take to leave the running states
ACTIVE = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING", "STOPPED", "SIGNALING", "STAGE_OUT"}
# "slurmstepd: error: *** JOB 12 ON node1 CANCELLED AT ... DUE TO TIME LIMIT ***"
STEPD_END = re.compile(r"\*\*\* JOB \d+ ON \S+ (\S+) AT \S+(?: DUE TO ([A-Z ]+?))? \*\*\*")
# What sbatch --parsable prints first: a job id, or an array job's id_task. Anything else (a path, a
# line of shell) never becomes a file name, a command's argument or a field of the bundle.
JOB_ID = re.compile(r"^[0-9]{1,20}(_[0-9]{1,20})?$")
CLUSTER = re.compile(r"^[A-Za-z0-9_.-]{0,64}$")  # --parsable's "id;cluster" on a federation
# The most of each field the login node's commands may put into the bundle (bundle schema's scheduler_job).
SCHEDULER_TEXT_MAX = {"state": 64, "exit_code": 64, "source": 64, "node": 253, "reason": 1024}


class SlurmRuntime(NativeRuntime):
    results_folder = "node0/out"  # node 0's agent holds the job's runs (its rank 0 measured them)
    kept_results_folder = "node0/out"
    group_refusal = "a group's hosts need runtime native or docker (a slurm job spans nodes by itself: set slurm: nodes)"
    settings_key = "slurm"

    @classmethod
    def entry_problem(cls, entry: dict) -> "str | None":
        if "partition" not in entry.get("slurm", {}):
            return "has runtime slurm but no slurm: partition; add slurm: {partition: NAME} (sinfo lists them)"
        return None

    def __init__(self) -> None:
        super().__init__()
        self.job_id = ""
        self._nodes_asked = 1  # a node list longer than the job's is not the job's
        self.scheduler_job = None

    # -- before anything runs -------------------------------------------------------------------

    def check_input(self, host: Host, plan: dict) -> None:
        """The hosts file's slurm settings against the allow-list and the plan, then the cluster's
        own verdict on partition, account and QOS (sbatch --test-only): exit 2 before submission."""
        settings = host.slurm
        for option in settings.get("sbatch_options", []):
            name = option.split("=", 1)[0]
            if name not in SBATCH_ALLOWED:
                raise UserError(
                    f"host {host.name!r}: slurm.sbatch_options {option!r} is not allowed (ddpbench sets the job's shape, "
                    f"script, output and time itself); remove it, or use one of {', '.join(sorted(SBATCH_ALLOWED))}"
                )
        nodes, gpus = settings.get("nodes", 1), settings.get("gpus_per_node", 0)
        # World sizes are ranks per node: the agent skips those a node cannot hold (a plan's
        # 2-GPU runs on 1-GPU nodes); a job where every one of them is skipped is of no use.
        per_node = {w for entry in plan["suites"] for w in entry.get("world_sizes", ["all"])}
        if gpus and "all" not in per_node and min(map(int, per_node)) > gpus:
            raise UserError(
                f"host {host.name!r}: every world size of the plan ({', '.join(map(str, sorted(per_node)))} ranks per node) needs more "
                f"than slurm.gpus_per_node {gpus}; raise gpus_per_node, or use a plan with world sizes up to {gpus}"
            )
        if nodes > 1:
            copy_engine = [e["suite"] for e in plan["suites"] if e.get("params", {}).get("allreduce") == "copy_engine"]
            if copy_engine:
                raise UserError(
                    f"host {host.name!r}: slurm.nodes {nodes}: the plan's {copy_engine[0]} runs allreduce copy_engine, which works "
                    "within one node; set slurm.nodes: 1 or use allreduce: nccl"
                )
        try:
            shell = SSHShell.connect(host)
        except HostError:
            return  # the run reports an unreachable login node as this host's failure
        try:
            done = query(shell, ["sbatch", "--test-only", *sbatch_options(host, plan), "--wrap", "true"], "sbatch --test-only")
        except HostError:
            return
        finally:
            shell.close()
        if done.code == 127:
            raise UserError(f"host {host.name!r}: sbatch was not found on {where(host)}; set address: to the cluster's login node")
        # --test-only also says this when the partition's nodes are down or drained for now: a job
        # submitted there waits for them, as long as pending_patience_s allows.
        if done.code != 0 and "Requested node configuration is not available" not in done.stderr:
            raise UserError(f"host {host.name!r}: the cluster refuses the job: {rejection(done.stderr, settings)}")

    def _check(self, job: AgentJob, shell: SSHShell) -> None:
        """The compute nodes' Python is checked by the job itself (a login node may have another)."""

    # -- the job --------------------------------------------------------------------------------

    def cancel(self, reason: str = INTERRUPTED) -> None:
        with self._lock:
            self._cancelled = self._cancelled or reason  # the polling loop sees it and cancels the job

    def _run_agent(self, job: AgentJob) -> dict:
        host, settings = job.host, job.host.slurm
        errors: list = []
        on_line = agent_output_listener(job, errors)
        self._stage(job, "submit")
        self._shell.put(batch_script(job).encode(), posixpath.join(self._remote_dir, SCRIPT))
        done = query(self._shell, ["sbatch", "--parsable", *sbatch_options(host, plan=job.plan), SCRIPT], "sbatch", cwd=self._remote_dir)
        if done.code != 0:
            raise HostError(f"sbatch refused the job: {rejection(done.stderr, settings)}")
        self.job_id = job_id_of(done.stdout)
        self._nodes_asked = settings.get("nodes", 1)
        submitted = time.monotonic()
        self.scheduler_job = {"scheduler": "slurm", "job_id": self.job_id, "partition": settings["partition"],
                              "account": settings.get("account"), "nodes": [], "state": "PENDING", "reason": None,
                              "queued_s": None, "node_fingerprints": []}
        job.progress(Stage(f"job {self.job_id} submitted"))
        try:
            state = self._follow(job, on_line, submitted)
        except HostError as err:
            if self._connected():
                raise
            raise HostError(f"{err}; slurm job {self.job_id} may still run: scancel {self.job_id} on the login node, "
                            "or let it end and rerun with --resume") from None
        finally:
            self._fetch(job)
        self.scheduler_job.update(state)
        module_failed = module_failure(self._job_output(job))
        if module_failed:
            raise HostError(f"slurm job {self.job_id}: {module_failed}")
        if errors:
            raise HostError(errors[0])
        raw_path = job.result_dir / "raw.json"
        raw = json.loads(raw_path.read_text()) if raw_path.exists() else None
        # FAILED with every launch run: the agent's exit status 1, some launch failed (its record says which).
        if state["state"] != "COMPLETED" and not (state["state"] == "FAILED" and raw and raw.get("complete")):
            raise HostError(self._ended_line(state))
        if raw is None:
            raise HostError(f"slurm job {self.job_id} ended {state['state']} before the agent wrote results: {self._last_words(job)}")
        return self._job_raw(job, raw)

    def _job_raw(self, job: AgentJob, raw: dict) -> dict:
        """Node 0's raw result with the runs of every node: torchrun's rendezvous gives global rank 0,
        which records the runs, to whichever node it likes."""
        for rank in range(1, len(self.scheduler_job["nodes"])):
            path = job.result_dir / f"node{rank}" / "out" / "raw.json"
            try:
                raw["runs"] += json.loads(path.read_text())["runs"] if path.exists() else []
            except (ValueError, KeyError):
                job.progress(Warned(f"node {rank}'s raw.json is damaged; its runs are left out"))
        raw["runs"].sort(key=lambda run: run["launch_id"])
        return raw

    def _follow(self, job: AgentJob, on_line, submitted: float) -> dict:
        """Poll the job until it leaves the queue, streaming node 0's events; cancel it when asked,
        or when it waits past the patience. Returns its end state."""
        settings = job.host.slurm
        poll_s = settings.get("poll_s", DEFAULT_POLL_S)
        patience_s = settings.get("pending_patience_s", DEFAULT_PATIENCE_S)
        events = _Tail(posixpath.join(self._remote_dir, "node0", EVENTS))
        shown, started = "", None
        while True:
            with self._lock:
                cancelled = self._cancelled
            if cancelled:
                self._cancel_job(job, on_line, events, cancelled)
            queued = self._squeue()
            if queued is False:  # squeue did not answer (a busy controller): ask again
                time.sleep(poll_s)
                continue
            state = queued["state"] if queued else ""
            if state == "PENDING":
                waited = time.monotonic() - submitted
                reason = queued["reason"] if queued["reason"] not in ("", "None") else ""
                note = f"job {self.job_id} queued" + (f": {reason}" if reason else "")
                if note != shown:
                    job.progress(Stage(note))
                    shown = note
                if waited > patience_s:
                    self._scancel()
                    self.scheduler_job.update(state="CANCELLED", reason=reason or None)
                    raise HostError(
                        f"slurm job {self.job_id} waited {waited:.0f} s in partition {settings['partition']}{f' ({reason})' if reason else ''}, "
                        f"past slurm.pending_patience_s {patience_s:g}; it was cancelled: choose a partition with free nodes, "
                        "or raise pending_patience_s"
                    )
            elif state:
                if started is None:
                    started = time.monotonic()
                    self.scheduler_job["queued_s"] = round(started - submitted, 3)
                    self.scheduler_job["nodes"] = self._hostnames(queued["nodelist"])
                    job.progress(Stage(f"job {self.job_id} running on {','.join(self.scheduler_job['nodes'])}"))
                events.read(self._shell, on_line)
            if state not in ACTIVE:
                ended = self._end_state(job)
                if ended["state"].split("+")[0] not in ACTIVE:  # squeue can miss a job scontrol still shows running
                    events.read(self._shell, on_line)
                    return ended
            time.sleep(poll_s)

    def _cancel_job(self, job: AgentJob, on_line, events: "_Tail", reason: str) -> NoReturn:
        """scancel, wait for the job to leave (its agent ends its ranks on SIGTERM), keep its last events."""
        self._scancel()

        def left_queue() -> bool:
            queued = self._squeue()
            return queued is None or bool(queued and queued["state"] not in ACTIVE)

        wait_until(left_queue, END_WAIT_S, every_s=min(job.host.slurm.get("poll_s", DEFAULT_POLL_S), 2.0))
        events.read(self._shell, on_line)
        self.scheduler_job.update(self._end_state(job))
        raise HostError(f"{reason}: slurm job {self.job_id} was cancelled (scancel)")

    def _scancel(self) -> None:
        query(self._shell, ["scancel", self.job_id], f"scancel {self.job_id}")

    def _squeue(self) -> "dict | None | bool":
        """The job's state, pending reason and node list; None when the queue no longer knows it,
        False when squeue could not answer."""
        done = query(self._shell, ["squeue", "--noheader", "--states=all", "--jobs", self.job_id, "--format=%T|%r|%N"], "squeue")
        line = next((l for l in done.stdout.splitlines() if l.count("|") == 2), "")
        if done.code != 0:
            return None if "Invalid job id" in done.stderr else False
        if not line:
            return None
        state, reason, nodelist = line.split("|")
        return {"state": scheduler_text(state, "state"), "reason": scheduler_text(reason, "reason"), "nodelist": nodelist.strip()}

    def _hostnames(self, nodelist: str) -> list:
        if not nodelist or nodelist == "(null)":
            return []
        done = query(self._shell, ["scontrol", "show", "hostnames", nodelist], "scontrol show hostnames")
        nodes = done.stdout.split() or [nodelist]
        return [scheduler_text(node, "node") for node in nodes[:self._nodes_asked]]

    def _end_state(self, job: AgentJob) -> dict:
        """How the job ended: sacct's state and reason, scontrol's where the cluster keeps no
        accounting, the job's output where it has forgotten the job too."""
        done = query(self._shell, ["sacct", "--noheader", "--parsable2", "--allocations", "--jobs", self.job_id,
                                   "--format=State,Reason,ExitCode"], "sacct")
        line = next((l for l in done.stdout.splitlines() if l.count("|") == 2), "")
        if done.code == 0 and line:
            state, reason, exit_code = line.split("|")
            return {"state": scheduler_text(state.split()[0] if state.split() else "UNKNOWN", "state"),
                    "reason": scheduler_text(reason, "reason") or None, "exit_code": scheduler_text(exit_code, "exit_code"),
                    "source": "sacct"}
        done = query(self._shell, ["scontrol", "show", "job", "--oneliner", self.job_id], "scontrol show job")
        fields = dict(part.split("=", 1) for part in done.stdout.split() if "=" in part)
        if done.code == 0 and "JobState" in fields:
            reason = fields.get("Reason")
            return {"state": scheduler_text(fields["JobState"], "state"),
                    "reason": None if reason in (None, "None") else scheduler_text(reason, "reason"),
                    "exit_code": scheduler_text(fields.get("ExitCode") or "", "exit_code") or None, "source": "scontrol"}
        ended = state_from_job_output(self._job_output(job))
        if ended:
            return ended
        return {"state": "UNKNOWN", "reason": "neither sacct nor scontrol know the job any more", "exit_code": None, "source": None}

    def _ended_line(self, state: dict) -> str:
        reason = f", reason {state['reason']}" if state.get("reason") else ""
        hint = {
            "TIMEOUT": "raise slurm.time_limit_min (or the plan's timeout_s) and rerun with --resume",
            "CANCELLED": "someone or something cancelled it (scancel, an administrator); rerun with --resume",
            "NODE_FAIL": "a node of the job failed; rerun with --resume (slurm.sbatch_options --exclude can leave the node out)",
            "PREEMPTED": "a job of higher priority took its nodes; rerun with --resume, or use a partition or QOS without preemption",
            "OUT_OF_MEMORY": "it ran out of memory; ask for more with slurm.sbatch_options --mem",
        }.get(state["state"], "see job-<id>.out in the run folder; rerun with --resume")
        source = f" ({state['source']})" if state.get("source") else ""
        return f"slurm job {self.job_id} ended {state['state']}{reason}{source}; what finished is kept: {hint}"

    def _job_output(self, job: AgentJob) -> str:
        path = job.result_dir / f"job-{self.job_id}.out"
        return path.read_text(errors="replace") if path.exists() else ""

    def _connected(self) -> bool:
        return self._shell is not None and self._shell.is_open()

    def _last_words(self, job: AgentJob) -> str:
        for name in ("node0/agent.err", f"job-{self.job_id}.out"):
            path = job.result_dir / name
            lines = [l.strip() for l in path.read_text(errors="replace").splitlines() if l.strip()] if path.exists() else []
            if lines:
                return f"{lines[-1]} ({name})"
        return "no output"

    def _fetch(self, job: AgentJob) -> None:
        """Node 0's results (its runs are the job's), the job's output, and every node's
        fingerprint and stderr."""
        super()._fetch(job)
        if not self.job_id or not self._connected():
            return
        try:
            sftp = self._shell.sftp()
            wanted = [SCRIPT, f"job-{self.job_id}.out"]
            nodes = self.scheduler_job["nodes"] if self.scheduler_job else []
            for rank in range(max(1, len(nodes))):
                wanted += [f"node{rank}/agent.err", f"node{rank}/out/raw.json"]
            for name in wanted:
                local = job.result_dir / name
                local.parent.mkdir(parents=True, exist_ok=True)
                try:
                    get_anew(sftp, posixpath.join(self._remote_dir, name), local)
                except FileNotFoundError:
                    local.unlink(missing_ok=True)
        except (OSError, EOFError) as err:
            job.progress(Warned(f"could not fetch the job's output: {err}"))
            return
        fingerprints = []
        for rank, name in enumerate(nodes):
            raw = job.result_dir / f"node{rank}" / "out" / "raw.json"
            try:
                fingerprint = json.loads(raw.read_text()).get("fingerprint") if raw.exists() else None
            except ValueError:
                fingerprint = None
            fingerprints.append({"node": name, "node_rank": rank, "fingerprint": fingerprint})
        self.scheduler_job["node_fingerprints"] = fingerprints


def job_id_of(sbatch_stdout: str) -> str:
    """The job id sbatch --parsable printed ("12" or "12;cluster"), or a HostError naming what it printed instead."""
    lines = sbatch_stdout.strip().splitlines()
    answer = lines[-1].strip() if lines else ""
    job_id, _, cluster = answer.partition(";")
    if not JOB_ID.match(job_id) or not CLUSTER.match(cluster):
        shown = ascii(answer[:64]) + ("..." if len(answer) > 64 else "")
        raise HostError(f"sbatch answered {shown} where a job id (digits) belongs: the login node's sbatch is not Slurm's "
                        "or printed more than --parsable asks; the job may be queued: check squeue on the login node")
    return job_id


def scheduler_text(value: str, field: str) -> str:
    """A field of the scheduler's answer as the bundle may hold it: printable, cut to its limit."""
    printable = "".join(ch for ch in value.strip() if ch.isprintable())
    return printable[:SCHEDULER_TEXT_MAX[field]]


def module_failure(job_output: str) -> "str | None":
    """The batch script's line for a module that did not load, with the shell's own words before it."""
    lines = [line.strip() for line in job_output.splitlines() if line.strip()]
    for index, line in enumerate(lines):
        if line.startswith(MODULE_FAILED):
            name = scheduler_text(line[len(MODULE_FAILED):], "reason")
            why = f" ({scheduler_text(lines[index - 1], 'reason')})" if index else ""
            return (f"module load {name} failed on the compute node{why}, so nothing ran on another Python and torch; "
                    "fix the host's slurm.modules (module avail lists them), or leave them out where the nodes' python has torch")
    return None


def state_from_job_output(text: str) -> "dict | None":
    """The end slurmstepd wrote into the job's output, for a cluster that has forgotten the job."""
    ends = STEPD_END.findall(text)
    if not ends:
        return None
    state, due = ends[-1]
    state = {"TIME LIMIT": "TIMEOUT", "PREEMPTION": "PREEMPTED", "NODE FAILURE": "NODE_FAIL"}.get(due, state)
    return {"state": scheduler_text(state, "state"), "reason": scheduler_text(due.capitalize(), "reason") if due else None,
            "exit_code": None, "source": "job output"}


def query(shell: SSHShell, argv: list[str], what: str, cwd: str = "") -> Result:
    """A Slurm command on the login node; one that is not installed there fails as a shell's does (exit 127)."""
    try:
        return short_command(shell, argv, what, cwd)
    except CommandNotFound as err:
        return Result(127, "", str(err))


def rejection(stderr: str, settings: dict) -> str:
    """sbatch's refusal in one line, with the hosts-file field that fixes it."""
    lines = [l.strip() for l in stderr.splitlines() if l.strip()]
    message = next((l for l in lines if l.startswith("sbatch: error: ")), lines[-1] if lines else "no reason given")
    message = re.sub(r"^(sbatch: error: |allocation failure: )", "", message)
    lowered = message.lower()
    if "account" in lowered:
        fix = f"set slurm.account (now {settings.get('account', 'unset')!r}) to one of yours (sacctmgr show associations user=$USER)"
    elif "partition" in lowered:
        fix = f"set slurm.partition (now {settings['partition']!r}) to one that sinfo lists"
    elif "qos" in lowered:
        fix = f"set slurm.qos (now {settings.get('qos', 'unset')!r}) to one your account may use"
    elif "node configuration" in lowered or "node count" in lowered:
        fix = ("the partition has no nodes of this shape: check slurm.nodes, gpus_per_node and constraint against "
               f"sinfo -p {settings['partition']}")
    else:
        fix = "check the slurm: settings in the hosts file"
    return f"{message}; {fix}"


class _Tail:
    """The new lines of a growing file on the login node, read by SFTP from where the last read stopped."""

    def __init__(self, path: str) -> None:
        self.path, self.offset, self.partial = path, 0, b""

    def read(self, shell: SSHShell, on_line) -> None:
        try:
            with shell.sftp().open(self.path, "rb") as remote:
                remote.seek(self.offset)
                data = remote.read()
        except FileNotFoundError:
            return
        except (OSError, EOFError) as err:
            raise HostError(f"reading the job's progress ({self.path}) failed: {err}") from None
        self.offset += len(data)
        *complete, self.partial = (self.partial + data).split(b"\n")
        for line in complete:
            on_line(line.decode(errors="replace"))
