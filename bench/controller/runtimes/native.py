"""Runtime `native`: the host's own Python with torch runs the agent, reached over SSH.

connect -> check python, torch and the plan's pin -> copy the agent (a zipapp) and the plan
by SFTP into a folder of its own -> run the agent, streaming its progress -> fetch raw.json
and the launch logs -> remove the folder. A vast.ai or RunPod instance is itself a container
started from an image, so it is a native host too.
"""

from __future__ import annotations

import json
import posixpath

from bench.controller import pins, ssh
from bench.controller.agent_package import agent_zipapp
from bench.controller.runtimes.base import INTERRUPTED, KEPT_RESULTS, AgentJob, HostError, StagedRuntime, agent_output_listener

MIN_PYTHON = (3, 9)

# Run by the host's python before anything is copied. It imports torch only when the plan
# pins CUDA or NCCL: finding it is enough otherwise, and much cheaper.
CHECK_SCRIPT = r"""
import json, sys
facts = {"python": list(sys.version_info[:3]), "torch": None, "cuda": None, "nccl": None, "error": None}
try:
    import importlib.util
    if importlib.util.find_spec("torch") is not None:
        if "import" in sys.argv[1:]:
            import torch
            facts["torch"], facts["cuda"] = str(torch.__version__), torch.version.cuda
            if torch.version.cuda:
                facts["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        else:
            import importlib.metadata
            facts["torch"] = importlib.metadata.version("torch")
except Exception as err:
    facts["error"] = "%s: %s" % (type(err).__name__, err)
print(json.dumps(facts))
"""


class NativeRuntime(StagedRuntime):
    results_folder = "out"  # the agent's --out, in the work folder

    def __init__(self) -> None:
        super().__init__()
        self._connection = None
        self._process: "ssh.RemoteProcess | None" = None
        self._remote_dir = ""
        self._fetched = True  # False while the host holds results that did not arrive intact: its folder stays
        self.pin_mismatches = ()

    def prepare(self, job: AgentJob) -> None:
        if self._connection is not None:
            return
        host = job.host
        self._stage(job, "connect")
        connection = ssh.connect(host)
        with self._lock:
            self._connection = connection
        try:
            self._check(job)
            self._stage(job, "deploy")
            self._deploy(job)
        except BaseException:
            self._close(job)
            raise

    def cancel(self, reason: str = INTERRUPTED) -> None:
        with self._lock:
            self._cancelled = self._cancelled or reason
            process = self._process
        if process is not None:
            process.stop(f"was ended: {reason}")

    def _check(self, job: AgentJob) -> None:
        """What must hold on the host before the agent is copied there."""
        self._stage(job, "check python")
        self._check_python(job)

    def _check_python(self, job: AgentJob) -> None:
        host, pin = job.host, job.plan.get("pin") or {}
        argv = [host.python, "-c", CHECK_SCRIPT, *(["import"] if {"cuda", "nccl"} & set(pin) else [])]
        done = ssh.run(self._connection, host, argv, f"checking {host.python}", check=False)
        if done.exit_status in (126, 127):
            raise HostError(
                f"python {host.python!r} was not found on the host or cannot run ({done.last_error_line()}); "
                "set python: in the hosts file to the host's Python with torch"
            )
        try:
            facts = json.loads(done.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            facts = None
        if not isinstance(facts, dict) or set(facts) != {"python", "torch", "cuda", "nccl", "error"}:
            raise HostError(
                f"{host.python} did not answer like a Python (exit status {done.exit_status}: "
                f"{done.last_error_line() or 'no output'}); set python: in the hosts file to the host's Python with torch"
            )
        if tuple(facts["python"]) < MIN_PYTHON:
            raise HostError(
                f"{host.python} is Python {'.'.join(map(str, facts['python']))}; the agent needs "
                f"{'.'.join(map(str, MIN_PYTHON))} or newer: set python: in the hosts file"
            )
        if facts["torch"] is None:
            cause = f" ({facts['error']})" if facts["error"] else ""
            raise HostError(
                f"{host.python} on the host has no torch{cause}; install torch there, "
                "or set python: in the hosts file to a Python that has it"
            )
        self.pin_mismatches = tuple(pins.mismatches(pin, facts))
        if self.pin_mismatches and pin.get("fatal"):
            raise HostError(f"{'; '.join(self.pin_mismatches)}; the plan's pin is fatal: use a host with these versions, or relax the pin")

    def _deploy(self, job: AgentJob) -> None:
        host = job.host
        workdir = host.workdir[2:] if host.workdir.startswith("~/") else host.workdir  # relative = from the home folder
        self._remote_dir = posixpath.join(workdir, f"{job.run_id}-{host.name}")
        ssh.run(self._connection, host, ["mkdir", "-p", "--", posixpath.join(self._remote_dir, "out")], "creating the work folder")
        ssh.put_bytes(self._connection, host, agent_zipapp(), posixpath.join(self._remote_dir, "agent.pyz"))
        ssh.put_bytes(self._connection, host, json.dumps(job.plan).encode(), posixpath.join(self._remote_dir, "plan.json"))

    def _run_agent(self, job: AgentJob) -> dict:
        host, errors = job.host, []
        on_line = agent_output_listener(job, errors)
        argv = job.agent_command([host.python, "agent.pyz"], "plan.json", "out", "--stop-on-stdin-eof")
        with self._lock:
            if self._cancelled:
                raise HostError(self._cancelled)
            self._process = ssh.RemoteProcess(self._connection, host, argv, "the agent", cwd=self._remote_dir)
        try:
            # The agent reports at least once per launch, and ends a launch after the plan's timeout_s.
            done = self._process.wait(
                on_line, idle_timeout_s=job.plan["timeout_s"] + host.command_timeout_s,
                timeout_name="the plan's timeout_s + command_timeout_s",
            )
        finally:
            self._fetch(job)
        if errors:
            raise HostError(errors[0])
        raw_path = job.result_dir / "raw.json"
        if not self._fetched:
            raise HostError(f"its results could not be fetched intact; they stay on the host in {self._remote_dir}")
        if not raw_path.exists():
            raise HostError(
                f"the agent exited with status {done.exit_status} before writing results: {done.last_error_line() or 'no output'}"
            )
        return json.loads(raw_path.read_text())

    def _fetch(self, job: AgentJob) -> None:
        self._fetched = ssh.fetch_results(self._connection, posixpath.join(self._remote_dir, self.results_folder), job.result_dir, job.progress)

    def _close(self, job: AgentJob) -> None:
        """Remove what was copied and close the connection."""
        with self._lock:
            connection, self._connection = self._connection, None
        if connection is None:
            return
        try:
            if self._remote_dir and not self._fetched:
                job.progress({"event": "warning", "message": KEPT_RESULTS.format(where=f"{job.host.address}:{self._remote_dir}")})
            elif self._remote_dir and connection.transport is not None and connection.transport.is_active():
                job.progress({"event": "stage", "stage": "clean up"})
                workdir = posixpath.dirname(self._remote_dir)
                # Paths go in as arguments; the workdir goes only when nothing else is in it.
                ssh.run(connection, job.host, ["sh", "-c", 'rm -rf -- "$1"; rmdir -- "$2" 2>/dev/null; true',
                                               "sh", self._remote_dir, workdir], "removing the work folder", check=False)
        except HostError as err:
            job.progress({"event": "warning", "message": str(err)})
        finally:
            ssh.close(connection)
