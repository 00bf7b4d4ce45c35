"""What every runtime shares: the job it is given, the error it raises, its interface, the
run's folder on a host, how long the agent may stay silent, and reading its raw result."""

from __future__ import annotations

import json
import posixpath
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, ClassVar

from bench.common.protocol import AgentArgs, Event, Failed, Placement, Stage, read_event
from bench.controller.errors import HostError
from bench.controller.inventory import Host
from bench.controller.shell import Result, Shell, last_line
from bench.controller.ssh import SSHShell

INTERRUPTED = "interrupted (Ctrl-C)"
# A host's work folder goes only after its results arrived intact (see Shell.fetch_results).
KEPT_RESULTS = "kept {where}: its results could not be fetched intact; copy them by hand, then remove the folder"


@dataclass
class AgentJob:
    host: Host
    plan: dict
    result_dir: Path  # on this machine: where raw.json and the launch logs end up
    progress: Callable[[Event], None]
    run_id: str = "run"
    skip_launch_ids: frozenset = frozenset()
    placement: "Placement | None" = None  # multi-node placement, set by the group runner
    extra_env: dict = field(default_factory=dict)  # for the ranks, on top of the host's env (group interfaces)
    history: "dict | None" = None  # launch durations of an earlier run of this plan here (bench/common/history.py)
    dry_run: bool = False  # the agent plans and prices the launches, and runs none

    def agent_args(self, plan_path: str, out_dir: str, *, stop_on_stdin_eof: bool = False) -> AgentArgs:
        """What the agent is told, wherever it runs: every runtime builds its command line from this
        (AgentArgs.argv with how the host starts the agent)."""
        return AgentArgs(plan_path, out_dir, {**self.host.env, **self.extra_env}, self.placement,
                         tuple(sorted(self.skip_launch_ids)), self.history, stop_on_stdin_eof, self.dry_run)


class Runtime:
    """run(job) starts the agent with the plan, streams its progress events to job.progress,
    and returns the agent's raw result, or raises HostError; cancel() ends it from another
    thread. prepare(job) does what can fail before the agent starts (a group prepares every
    member before starting any); run() calls it when nobody did."""

    pin_mismatches: tuple = ()  # where the host's versions differ from the plan's pin
    scheduler_job: "dict | None" = None  # the batch job the agent ran in (runtime slurm), for the bundle

    # What a host entry of this runtime needs (bench/controller/hosts.py asks; it names no runtime).
    needs_address: ClassVar[bool] = True  # reached over SSH: the entry gives its address
    group_refusal: ClassVar[str] = ""  # why its hosts cannot join a multi-node group; "" where they can
    settings_key: ClassVar[str] = ""  # the entry's own block of settings for this runtime (slurm:), if any

    @classmethod
    def entry_problem(cls, entry: dict) -> "str | None":
        """What else is wrong with a host entry of this runtime, said after "host NAME", or None."""
        return None

    def check_input(self, host: Host, plan: dict) -> None:
        """Bad input this runtime can find before anything runs (a UserError, exit 2)."""

    def prepare(self, job: AgentJob) -> None:
        pass

    def collect_kept(self, job: AgentJob) -> bool:
        """Fetch into job.result_dir the raw.json (and launch logs) the host kept of an earlier attempt
        of this run, where it keeps one (its connection was lost after some launches had finished):
        True when a raw.json came. A resumed run calls it before it runs anything."""
        return False

    def run(self, job: AgentJob) -> dict:
        raise NotImplementedError

    def cancel(self, reason: str = INTERRUPTED) -> None:
        raise NotImplementedError


class StagedRuntime(Runtime):
    """A runtime that readies a host in named stages (connect, check, deploy ...) before the
    agent starts, and always cleans up after it, also when a stage fails; cancel() between
    stages starts nothing more. Subclasses give _prepare(), _run_agent() and _close()."""

    # Where in the run's folder on an SSH host the agent's results lie, to be collected by a resume
    # when the controller lost the host before fetching them ("": the runtime keeps none there).
    kept_results_folder: ClassVar[str] = ""

    def collect_kept(self, job: AgentJob) -> bool:
        if not self.kept_results_folder or not job.host.address:
            return False
        try:
            shell = SSHShell.connect(job.host)
        except HostError:
            return False  # not back yet: its run then fails with the reason, and the host keeps its results
        try:
            fetched = shell.fetch_results(posixpath.join(remote_run_dir(job), self.kept_results_folder), job.result_dir, job.progress)
        finally:
            shell.close()
        return fetched and (job.result_dir / "raw.json").exists()

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancelled = ""
        self._prepared = False
        self._shell: "Shell | None" = None  # the host's, from the connect stage until _close()
        self._remote_dir = ""  # the run's folder on the host (SSH hosts), removed by _close()
        self._fetched = True  # False while the host holds results that did not arrive intact: its folder stays

    def prepare(self, job: AgentJob) -> None:
        if self._prepared:
            return
        try:
            self._prepare(job)
        except BaseException:
            self._close(job)
            raise
        self._prepared = True

    def _connect(self, job: AgentJob, env: "dict | None" = None) -> Shell:
        self._stage(job, "connect")
        shell = SSHShell.connect(job.host, env)
        with self._lock:
            self._shell = shell
        return shell

    def _stage(self, job: AgentJob, stage: str) -> None:
        with self._lock:
            if self._cancelled:
                raise HostError(self._cancelled)
        job.progress(Stage(stage))

    def run(self, job: AgentJob) -> dict:
        self.prepare(job)
        try:
            return self._run_agent(job)
        finally:
            self._close(job)

    def _kept_in(self) -> str:
        """Where the host keeps results that did not arrive intact; "" when they did."""
        return "" if self._fetched else self._remote_dir

    def _prepare(self, job: AgentJob) -> None:
        raise NotImplementedError

    def _run_agent(self, job: AgentJob) -> dict:
        raise NotImplementedError

    def _close(self, job: AgentJob) -> None:
        raise NotImplementedError


def remote_workdir(host: Host) -> str:
    """The host's workdir as the remote commands and SFTP take it: relative = from the home folder."""
    return host.workdir[2:] if host.workdir.startswith("~/") else host.workdir


def remote_run_dir(job: AgentJob) -> str:
    """The run's own folder in the host's workdir."""
    return posixpath.join(remote_workdir(job.host), f"{job.run_id}-{job.host.name}")


def stream_agent(shell: Shell, job: AgentJob, argv: list[str], on_line: Callable[[str], None], *,
                 cwd: str = "", what: str = "the agent") -> Result:
    """Run the agent, handing its stdout lines to on_line; ended when it sends nothing for longer
    than it may: it reports at least once per launch, and ends a launch after the plan's timeout_s."""
    return shell.stream(argv, on_line, idle_timeout_s=job.plan["timeout_s"] + job.host.command_timeout_s,
                        timeout_name="the plan's timeout_s + command_timeout_s", cwd=cwd, what=what)


def exited_early(exited: Result, agent: str = "the agent", why: str = "") -> str:
    """Why there is no raw.json when the agent ended without writing one."""
    return f"{agent} exited with status {exited.code} before writing results: {why or last_line(exited.stderr) or 'no output'}"


def read_raw(job: AgentJob, errors: list, why_none: Callable[[], str], kept_in: str = "") -> dict:
    """The agent's raw result from job.result_dir, or a HostError saying why there is none: the
    first error event it sent, the host keeping results that did not arrive intact (kept_in: where),
    else why_none()."""
    if errors:
        raise HostError(errors[0])
    if kept_in:
        raise HostError(f"its results could not be fetched intact; they stay on the host in {kept_in}")
    raw_path = job.result_dir / "raw.json"
    if not raw_path.exists():
        raise HostError(why_none())
    return json.loads(raw_path.read_text())


def agent_output_listener(job: AgentJob, errors: list) -> Callable[[str], None]:
    """A handler for the agent's stdout lines: progress events go to the job, error events are kept."""

    def on_line(line: str) -> None:
        event = read_event(line)
        if event is None:
            return
        if isinstance(event, Failed):
            errors.append(event.message)
        job.progress(event)

    return on_line
