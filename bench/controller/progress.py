"""Progress per host: what will run and how long it should take, then a bar with the current
launch and configuration, done/total and an ETA on a terminal; one plain line per finished
configuration and launch elsewhere (CI logs, `nohup`, a batch job's output file).

The agent sends the estimate of each launch with its plan (each suite's cost model); the ETA is
what is left of the estimates, the running launch's counted from its start. Launches whose steps the
host's CPU paces run as fast as that CPU, which hosts of one GPU kind differ in (1.5x among lent
H100s): what is left of theirs is scaled by how long those that finished took against theirs.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn
from rich.text import Text

from bench.common import protocol
from bench.common.escape import terminal
from bench.common.units import count


SAID_SLOWDOWN = 1.2  # a CPU host this many times slower than idle says so beside its estimate
SAID_PACE = 0.15  # host-paced launches this far off their estimates so far: the ETA's line says by how much


def describe_s(seconds: float) -> str:
    """'45 s', '3 min 20 s', '1 h 05 min'."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


@dataclass
class HostState:
    started: float = field(default_factory=time.monotonic)
    estimates_s: dict = field(default_factory=dict)
    finished: set = field(default_factory=set)
    launch: str = ""
    launch_started: float = 0.0
    ended: bool = False
    gate_s: float = 0.0  # the P2P gate's estimate, counted down from the plan until the first launch starts
    planned: float = 0.0
    host_paced: set = field(default_factory=set)  # launches the host's CPU is expected to pace (Planned.host_paced)
    paced_taken_s: float = 0.0  # those that finished ok: the seconds they took ...
    paced_estimated_s: float = 0.0  # ... and their estimates

    def pace(self) -> float:
        """How many times their estimates the host-paced launches that finished ok took here; 1 before any."""
        return self.paced_taken_s / self.paced_estimated_s if self.paced_estimated_s else 1.0

    def ended_launch(self, event: protocol.LaunchEnded) -> None:
        """A launch ended: one of the host-paced that ended ok tells their pace here."""
        if event.status == "ok" and event.id in self.host_paced and event.id in self.estimates_s:
            self.paced_taken_s += event.duration_s
            self.paced_estimated_s += self.estimates_s[event.id]

    def eta_s(self) -> "float | None":
        if not self.estimates_s or self.ended:
            return None
        pace = self.pace()
        expected = {launch: s * (pace if launch in self.host_paced else 1.0) for launch, s in self.estimates_s.items()}
        left = sum(s for launch, s in expected.items() if launch not in self.finished and launch != self.launch)
        if self.launch in expected and self.launch not in self.finished:
            left += max(0.0, expected[self.launch] - (time.monotonic() - self.launch_started))
        if not self.launch:
            left += max(0.0, self.gate_s - (time.monotonic() - self.planned))
        return left


class EtaColumn(ProgressColumn):
    """The ETA, counted down at every refresh of the bar (not only when the agent reports)."""

    def __init__(self, states: dict) -> None:
        super().__init__()
        self.states = states

    def render(self, task) -> Text:
        eta = self.states[task.fields["host"]].eta_s()
        return Text("" if eta is None else f"ETA {describe_s(eta)}")


class HostProgress:
    def __init__(self, hosts: list[str], console: "Console | None" = None) -> None:
        self.console = console or Console(stderr=True)
        self.live = self.console.is_terminal
        self._lock = threading.Lock()
        self._states = {h: HostState() for h in hosts}
        self._bar = Progress(
            TextColumn("[bold]{task.fields[host]}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.description}", markup=False), TimeElapsedColumn(), EtaColumn(self._states),
            console=self.console, disable=not self.live,
        )
        self._tasks = {h: self._bar.add_task("connect", total=None, host=h) for h in hosts}
        self.planned: "dict[str, protocol.Planned]" = {}  # each host's plan, as its agent said it

    def __enter__(self) -> "HostProgress":
        self._bar.start()
        return self

    def __exit__(self, *exc) -> None:
        self._bar.stop()

    def _say(self, host: str, text: str) -> None:
        if not self.live:
            with self._lock:
                print(terminal(f"[{host}] {text}"), file=sys.stderr, flush=True)

    def _announce(self, host: str, text: str) -> None:
        """On a terminal too: above the bars."""
        with self._lock:
            self.console.print(terminal(f"[{host}] {text}"), markup=False, highlight=False, soft_wrap=True)

    def _show(self, host: str, text: str) -> None:
        """What the host's bar says it is doing (its text as it stands: no markup of the agent's output)."""
        self._bar.update(self._tasks[host], description=terminal(text))

    def _eta(self, host: str) -> str:
        state = self._states[host]
        eta, pace = state.eta_s(), state.pace()
        if eta is None:
            return ""
        return f"ETA {describe_s(eta)}" + (f", host-paced launches at {pace:.2f}x their estimates here" if abs(pace - 1) > SAID_PACE else "")

    def update(self, host: str, event: protocol.Event) -> None:
        task, state = self._tasks[host], self._states[host]
        if isinstance(event, protocol.Planned):
            self.planned[host] = event
            state.estimates_s, state.gate_s, state.planned = dict(event.estimates_s), event.gate_s, time.monotonic()
            state.host_paced = set(event.host_paced)
            self._bar.update(task, total=len(event.launches), description="planned")
            self._announce(host, self._plan_text(event))
        elif isinstance(event, protocol.LaunchStarted):
            state.launch, state.launch_started = event.id, time.monotonic()
            self._show(host, event.id)
            self._say(host, f"{event.id} ...")
        elif isinstance(event, protocol.Stage):
            self._show(host, event.stage)
            self._say(host, f"{event.stage} ...")
        elif isinstance(event, protocol.RunEnded):
            text = f"{event.id} {event.done}/{event.total} {event.run}"
            self._show(host, text)
            self._say(host, f"{text} (elapsed {describe_s(time.monotonic() - state.started)}; {self._eta(host) or 'no ETA'})")
        elif isinstance(event, (protocol.LaunchEnded, protocol.LaunchSkipped)):
            state.finished.add(event.id)
            if isinstance(event, protocol.LaunchEnded):
                state.ended_launch(event)
            self._bar.advance(task)
            self._say(host, f"{event.id} {self._ended(event, state)}")
        elif isinstance(event, protocol.Warned):
            self._announce(host, f"warning: {event.message}")
        elif isinstance(event, protocol.Fingerprinting):
            self._show(host, "fingerprint")
            self._say(host, "fingerprint")

    @staticmethod
    def _ended(event: "protocol.LaunchEnded | protocol.LaunchSkipped", state: HostState) -> str:
        if isinstance(event, protocol.LaunchSkipped):
            return event.reason
        detail = event.status + (f": {event.error}" if event.error else "")
        if event.status != "skipped":
            estimate = state.estimates_s.get(event.id)
            detail += f" ({describe_s(event.duration_s)}" + (f"; estimated {describe_s(estimate)})" if estimate else ")")
        return detail

    @staticmethod
    def _plan_text(event: protocol.Planned) -> str:
        estimates, points = event.estimates_s, event.configurations
        measured, finished = set(event.measured_before), set(event.finished_before)
        parts = []
        for launch in event.launches:
            if launch in estimates:
                source = ", as measured before" if launch in measured else ""
                parts.append(f"{launch} ({count(points.get(launch, 0), 'configuration')}, ~{describe_s(estimates[launch])}{source})")
            else:
                parts.append(f"{launch} ({'finished before' if launch in finished else 'not run'})")
        return HostProgress._plan_head(event) + ": " + ", ".join(parts)

    @staticmethod
    def _plan_head(event: protocol.Planned) -> str:
        """'9 launches, estimated 1 min 17 s (the P2P gate ~5 s) in all'."""
        estimates, finished = event.estimates_s, event.finished_before
        head = count(len(event.launches), "launch", "launches")
        if finished:
            head += f", {len(finished)} finished before"
        if estimates:
            said = ([f"the P2P gate ~{describe_s(event.gate_s)}"] if event.gate_s else []) + (
                [f"this CPU {event.slowdown:.1f}x slower than idle: other processes"] if event.slowdown >= SAID_SLOWDOWN else [])
            head += (f", estimated {describe_s(sum(estimates.values()) + event.gate_s)}" + (f" ({'; '.join(said)})" if said else "")
                     + (" for the rest" if finished else " in all"))
        return head

    @staticmethod
    def plan_listing(event: protocol.Planned) -> "list[str]":
        """The plan's head, then one launch a line with its configurations and estimate, or why it does
        not run: what `run --dry-run` prints."""
        lines = [HostProgress._plan_head(event)]
        for launch in event.launches:
            if launch in event.estimates_s:
                lines.append(f"  {launch}: {count(event.configurations.get(launch, 0), 'configuration')}, "
                             f"~{describe_s(event.estimates_s[launch])}")
            else:
                lines.append(f"  {launch}: not run: {event.skipped.get(launch, 'finished before')}")
        return lines

    def finish(self, host: str, error: "str | None", complete: bool = True) -> None:
        """The host's last line: failed, done, or (its agent stopped short of its plan's end, as Ctrl-C
        stops it) stopped."""
        self._states[host].ended = True
        said = f"failed: {error}" if error else "done" if complete else "stopped before the end of its plan: what finished is kept"
        self._show(host, said)
        self._say(host, said)
