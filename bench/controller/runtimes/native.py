"""Runtime `native`: the host's own Python with torch runs the agent, reached over SSH.

connect -> check python, torch and the plan's pin -> copy the agent (a zipapp) and the plan
by SFTP into a folder of its own -> run the agent, streaming its progress -> fetch raw.json
and the launch logs -> remove the folder. A vast.ai or RunPod instance is itself a container
started from an image, so it is a native host too.
"""

from __future__ import annotations

import json
import posixpath

from bench.common.protocol import Stage, Warned
from bench.controller import pins
from bench.controller.agent_package import agent_zipapp
from bench.controller.runtimes.base import (INTERRUPTED, KEPT_RESULTS, AgentJob, HostError, StagedRuntime, agent_output_listener,
                                            exited_early, read_raw, remote_run_dir, stream_agent)
from bench.controller.inventory import Host
from bench.controller.shell import CommandNotFound, Result, last_line
from bench.controller.ssh import SSHShell
from bench.controller.ssh.connection import where

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


def short_command(shell: SSHShell, argv: list[str], what: str, cwd: str = "") -> Result:
    """A command on the host that must end within its command_timeout_s."""
    return shell.run(argv, shell.host.command_timeout_s, cwd=cwd, what=what, timeout_name="command_timeout_s")


def python_missing(host: Host, why: str) -> HostError:
    return HostError(
        f"python {host.python!r} was not found on the host or cannot run ({why}); "
        "set python: in the hosts file to the host's Python with torch"
    )


class NativeRuntime(StagedRuntime):
    results_folder = "out"  # the agent's --out, in the work folder
    kept_results_folder = "out"

    def __init__(self) -> None:
        super().__init__()
        self.pin_mismatches = ()
        self._made_from = ""  # the topmost folder the deploy made above the run's ("": none)

    def _prepare(self, job: AgentJob) -> None:
        shell = self._connect(job)
        self._check(job, shell)
        self._stage(job, "deploy")
        self._deploy(job, shell)

    def cancel(self, reason: str = INTERRUPTED) -> None:
        with self._lock:
            self._cancelled = self._cancelled or reason
            shell = self._shell
        if shell is not None:
            shell.stop(f"was ended: {reason}")

    def _check(self, job: AgentJob, shell: SSHShell) -> None:
        """What must hold on the host before the agent is copied there."""
        self._stage(job, "check python")
        self._check_python(job, shell)

    def _check_python(self, job: AgentJob, shell: SSHShell) -> None:
        host, pin = job.host, job.plan.get("pin") or {}
        argv = [host.python, "-c", CHECK_SCRIPT, *(["import"] if {"cuda", "nccl"} & set(pin) else [])]
        try:
            done = short_command(shell, argv, f"checking {host.python}")
        except CommandNotFound as err:
            raise python_missing(host, str(err)) from None
        if done.code in (126, 127):
            raise python_missing(host, last_line(done.stderr))
        try:
            facts = json.loads(done.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            facts = None
        if not isinstance(facts, dict) or set(facts) != {"python", "torch", "cuda", "nccl", "error"}:
            raise HostError(
                f"{host.python} did not answer like a Python (exit status {done.code}: "
                f"{last_line(done.stderr) or 'no output'}); set python: in the hosts file to the host's Python with torch"
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

    def _deploy(self, job: AgentJob, shell: SSHShell) -> None:
        host = job.host
        self._remote_dir = remote_run_dir(job)
        # The topmost folder above the run's that mkdir -p makes (a nested workdir's parents), so that
        # the clean-up removes what this run made and nothing that was there before.
        made = ('top=; d="$1"; while [ ! -e "$d" ]; do top="$d"; d=$(dirname -- "$d"); done; '
                'mkdir -p -- "$2" && printf "%s" "$top"')
        done = short_command(shell, ["sh", "-c", made, "sh", posixpath.dirname(self._remote_dir),
                                     posixpath.join(self._remote_dir, "out")], "creating the work folder")
        if done.code != 0:
            raise HostError(f"creating the work folder failed on {where(host)}: {last_line(done.stderr) or f'exit status {done.code}'}")
        self._made_from = done.stdout
        shell.put(agent_zipapp(), posixpath.join(self._remote_dir, "agent.pyz"))
        shell.put(json.dumps(job.plan).encode(), posixpath.join(self._remote_dir, "plan.json"))

    def _run_agent(self, job: AgentJob) -> dict:
        errors: list = []
        argv = job.agent_args("plan.json", "out", stop_on_stdin_eof=True).argv([job.host.python, "agent.pyz"])
        with self._lock:
            if self._cancelled:
                raise HostError(self._cancelled)
        try:
            done = stream_agent(self._shell, job, argv, agent_output_listener(job, errors), cwd=self._remote_dir)
        finally:
            self._fetch(job)
        return read_raw(job, errors, lambda: exited_early(done), self._kept_in())

    def _fetch(self, job: AgentJob) -> None:
        self._fetched = self._shell.fetch_results(posixpath.join(self._remote_dir, self.results_folder), job.result_dir, job.progress)

    def _close(self, job: AgentJob) -> None:
        """Remove what was copied and close the connection."""
        with self._lock:
            shell, self._shell = self._shell, None
        if shell is None:
            return
        try:
            if self._remote_dir and not self._fetched:
                job.progress(Warned(KEPT_RESULTS.format(where=f"{job.host.address}:{self._remote_dir}")))
            elif self._remote_dir and shell.is_open():
                job.progress(Stage("clean up"))
                workdir = posixpath.dirname(self._remote_dir)
                # Paths go in as arguments; the workdir goes only when nothing else is in it, and so do
                # the parents this run made for it, up to the topmost ($3), never one that was there before.
                remove = ('rm -rf -- "$1"; d="$2"; while rmdir -- "$d" 2>/dev/null && [ -n "$3" ] && [ "$d" != "$3" ]; '
                          'do d=$(dirname -- "$d"); done; true')
                short_command(shell, ["sh", "-c", remove, "sh", self._remote_dir, workdir, self._made_from],
                              "removing the work folder")
        except (HostError, CommandNotFound) as err:
            job.progress(Warned(str(err)))
        finally:
            shell.close()
