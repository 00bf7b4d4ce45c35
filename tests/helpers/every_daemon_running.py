"""One test that holds every daemon the tests start running (the loopback sshd hosts, the Slurm
cluster and munge, dockerd and the registry, a chromium laying out a page that never loads) until
a signal stops it: tests/e2e/test_interrupted_tests.py runs it with `make test TESTS=...` and
interrupts it. Not collected by itself (no test_ prefix): it runs only where named."""

from __future__ import annotations

from tests.support import browser


def test_holds_every_daemon_until_stopped(loopback_hosts, slurm_cluster, docker_registry, tmp_path):
    page = tmp_path / "never-loads.html"
    page.write_text("<!doctype html><p>laid out forever</p><script>for (;;) {}</script>")
    browser.show(page)  # waits for a load that never comes, up to browser.TIMEOUT_S
    raise AssertionError("the page loaded; the test that runs this file stops it before it could")
