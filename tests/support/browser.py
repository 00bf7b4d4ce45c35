"""A real headless browser for the report tests: Debian's chromium (tests/apt-packages.txt; installed
by tests/system-deps.sh, which `make test` runs), with a fresh profile and nothing that reaches the
network, driven over the DevTools protocol on a pipe (--remote-debugging-pipe: JSON messages ended
by a NUL byte on file descriptors 3 and 4, so no port, no websocket, standard library only). The
page is laid out on a screen of exactly 1400x900 CSS pixels, as a reader's laptop shows it."""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

SCREEN = (1400, 900)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars", "--mute-audio",
         "--remote-debugging-pipe"]
TIMEOUT_S = 120  # a cold start on a busy 2-core CI machine takes seconds, not minutes

# Every block's box, in CSS pixels from the top left of the first screen.
MEASURE = """JSON.stringify({width: window.innerWidth, height: window.innerHeight,
  boxes: Array.from(document.body.querySelectorAll("h1, h2, h3, p, li, table, tr, figure, img"), el => {
    const r = el.getBoundingClientRect();
    return {tag: el.tagName.toLowerCase(), text: el.innerText.slice(0, 300), top: r.top, bottom: r.bottom,
            left: r.left, right: r.right};
  })})"""


@dataclass
class Page:
    """What the browser showed: the layout of the first screen and a screenshot of it."""

    width: int
    height: int
    boxes: list  # [{tag, text, top, bottom, left, right}] in document order
    png: bytes = field(repr=False)


def chromium() -> str:
    found = shutil.which("chromium")
    if found is None:
        raise AssertionError("chromium is not installed: run `bash tests/system-deps.sh` (as `make test` does), "
                             "which installs the Debian packages of tests/apt-packages.txt")
    return found


class _DevTools:
    """One chromium and its DevTools pipe: send() a command and wait for its answer; wait_for() an event."""

    def __init__(self, profile: str):
        to_browser, self._to_browser = os.pipe()
        self._from_browser, from_browser = os.pipe()

        def onto_3_and_4() -> None:  # the descriptors --remote-debugging-pipe reads and writes
            reads, writes = os.dup(to_browser), os.dup(from_browser)  # above 4: neither is overwritten by the other
            os.dup2(reads, 3)
            os.dup2(writes, 4)

        # In a session of its own: a Ctrl-C reaches the tests, and close() ends it.
        self.process = subprocess.Popen([chromium(), *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                        pass_fds=(3, 4), preexec_fn=onto_3_and_4, start_new_session=True)
        os.close(to_browser)
        os.close(from_browser)
        self.deadline = time.monotonic() + TIMEOUT_S
        self._buffer, self._events, self._next_id = b"", [], 0

    def _message(self) -> dict:
        while b"\0" not in self._buffer:
            left = self.deadline - time.monotonic()
            ready, _, _ = select.select([self._from_browser], [], [], max(0.0, left))
            chunk = os.read(self._from_browser, 1 << 20) if ready else b""
            if not chunk:
                raise AssertionError("chromium did not answer within its time" if not ready and left <= 0
                                     else f"chromium closed its DevTools pipe: {self._stderr()}")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method: str, params: "dict | None" = None, session: "str | None" = None) -> dict:
        self._next_id += 1
        command = {"id": self._next_id, "method": method, "params": params or {}, **({"sessionId": session} if session else {})}
        os.write(self._to_browser, json.dumps(command).encode() + b"\0")
        while True:
            message = self._message()
            if message.get("id") == self._next_id:
                assert "error" not in message, f"{method}: {message['error']}"
                return message["result"]
            self._events.append(message)

    def wait_for(self, event: str) -> dict:
        while True:
            for message in self._events:
                if message.get("method") == event:
                    self._events.remove(message)
                    return message
            self._events.append(self._message())

    def _stderr(self) -> str:
        self.process.kill()
        return self.process.communicate(timeout=10)[1].decode(errors="replace")[-2000:]

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except (AssertionError, BrokenPipeError):
            pass  # it went already: the kill below finds nothing to end
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for fd in (self._to_browser, self._from_browser):
            os.close(fd)
        self.process.stderr.close()


def show(page: Path) -> Page:
    """Open the page on a 1400x900 screen, wait until it has loaded, and measure and photograph its first screen."""
    with tempfile.TemporaryDirectory(prefix="ddpbench-chromium-") as profile:
        browser = _DevTools(profile)
        try:
            target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
            session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            browser.send("Emulation.setDeviceMetricsOverride",
                         {"width": SCREEN[0], "height": SCREEN[1], "deviceScaleFactor": 1, "mobile": False}, session)
            browser.send("Page.enable", session=session)
            browser.send("Page.navigate", {"url": page.resolve().as_uri()}, session)
            browser.wait_for("Page.loadEventFired")
            measured = browser.send("Runtime.evaluate", {"expression": MEASURE, "returnByValue": True}, session)
            png = browser.send("Page.captureScreenshot", {"format": "png"}, session)["data"]
        finally:
            browser.close()
    layout = json.loads(measured["result"]["value"])
    return Page(layout["width"], layout["height"], layout["boxes"], base64.b64decode(png))
