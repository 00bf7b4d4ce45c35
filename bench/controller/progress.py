"""Progress per host: a bar on a terminal, one plain line per event elsewhere (CI logs)."""

from __future__ import annotations

import sys
import threading

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


class HostProgress:
    def __init__(self, hosts: list[str], console: "Console | None" = None) -> None:
        self.console = console or Console(stderr=True)
        self.live = self.console.is_terminal
        self._lock = threading.Lock()
        self._bar = Progress(
            TextColumn("[bold]{task.fields[host]}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.description}"), TimeElapsedColumn(), console=self.console, disable=not self.live,
        )
        self._tasks = {h: self._bar.add_task("connect", total=None, host=h) for h in hosts}

    def __enter__(self) -> "HostProgress":
        self._bar.start()
        return self

    def __exit__(self, *exc) -> None:
        self._bar.stop()

    def _say(self, host: str, text: str) -> None:
        if not self.live:
            with self._lock:
                print(f"[{host}] {text}", file=sys.stderr, flush=True)

    def update(self, host: str, event: dict) -> None:
        task, kind = self._tasks[host], event.get("event")
        if kind == "plan":
            self._bar.update(task, total=len(event["launches"]), description="planned")
            self._say(host, f"{len(event['launches'])} launches planned")
        elif kind in ("launch_start", "stage"):
            what = event.get("id") or event.get("stage")
            self._bar.update(task, description=what)
            self._say(host, f"{what} ...")
        elif kind in ("launch_end", "launch_skipped"):
            self._bar.advance(task)
            detail = event.get("status", "skipped")
            if event.get("error"):
                detail += f": {event['error']}"
            self._say(host, f"{event['id']} {detail}")
        elif kind == "warning":
            with self._lock:
                self.console.print(f"[{host}] warning: {event['message']}", markup=False, highlight=False)
        elif kind == "fingerprint":
            self._bar.update(task, description="fingerprint")
            self._say(host, "fingerprint")

    def finish(self, host: str, error: "str | None") -> None:
        self._bar.update(self._tasks[host], description=f"[red]failed: {error}" if error else "[green]done")
        self._say(host, f"failed: {error}" if error else "done")
