"""Helpers for the watcher's end-to-end tests: hub processes (kit), machines joined with the
real CLI (tests/kit/cli.py's CliTeam), and ``quire watch`` subprocesses."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from replica.machine.home import Home
from tests.kit.cli import QUIRE, CliMember
from tests.kit.host import REPO

# fast pacing so the tests stay short; bounds are asserted against these
WATCH_ENV = {
    "QUIRE_WATCH_DEBOUNCE_MS": "200",
    "QUIRE_WATCH_BACKOFF_INITIAL_MS": "200",
    "QUIRE_WATCH_BACKOFF_MAX_MS": "1600",
    "QUIRE_WATCH_BACKOFF_JITTER": "0.5",
    "QUIRE_WATCH_POLL_MS": "1000",
    "QUIRE_WATCH_SUSPENDED_RETRY_MS": "1000",
    "QUIRE_WATCH_STREAM_READ_TIMEOUT_S": "5",
}
HUB_ENV = {"QUIRE_HUB_EVENTS_KEEPALIVE_MS": "1000", "QUIRE_HUB_EVENTS_RECHECK_MS": "1000"}
# how long a condition may take on a loaded machine before the test fails; conditions are
# polled, so a quiet machine returns at once (latency is measured by bench/, not here)
DEADLINE = 90.0


class WatchProc:
    """``quire watch`` for ``m``; ``prelude``: Python run in the watcher's process before the
    CLI starts (to change what the machine's SQLite does, say)."""

    def __init__(self, m: CliMember, env: dict[str, str] | None = None, prelude: str = "",
                 args: tuple[str, ...] = ()):
        self.member = m
        # a crash point only when the test names one (``env``), never inherited
        e = {k: v for k, v in os.environ.items() if k != "QUIRE_TEST_CRASH_AT"}
        e.update({"QUIRE_HOME": str(m.home), **WATCH_ENV, **(env or {})})
        self.log = m.home.parent / "watch.log"
        self._f = open(self.log, "ab")  # noqa: SIM115 - closed in stop()
        python, flag, main = QUIRE
        self.proc = subprocess.Popen([python, flag, prelude + main, "watch", *args], cwd=REPO,
                                     env=e,
                                     stdout=self._f, stderr=subprocess.STDOUT)

    @property
    def status_path(self) -> Path:
        return Path(Home(self.member.home).spaces()[0].dir) / "watch.json"

    def status(self) -> dict[str, Any]:
        try:
            return json.loads(self.status_path.read_text())
        except (OSError, ValueError):
            return {}

    def wait_ready(self, timeout: float = DEADLINE) -> None:
        # ready: caught up, the event stream open, and the vault's file events armed (the
        # journal is valid). An edit made before the files are armed is found by the scan
        # that arming starts, and that scan publishes it at once, debounce or not: a test
        # that edits after a ready that did not wait for arming raced that scan
        wait_for(lambda: (s := self.status()).get("stream") == "up"
                 and s.get("state") in ("idle", "conflicts")
                 and s.get("journal", {}).get("valid") is True, timeout,
                 lambda: f"watcher of {self.member.name} not ready: {self.status()}\n"
                         f"{self.log.read_text()[-2000:]}")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._f.close()
        return self.proc.returncode


def wait_for(cond: Callable[[], Any], timeout: float = DEADLINE,
             why: Callable[[], str] | str = "", step: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(why() if callable(why) else why or "timed out")
        time.sleep(step)


def page(slug: str, body: str) -> str:
    return f"---\ntitle: {slug}\n---\n{body}"
