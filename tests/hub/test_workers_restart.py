"""``quire hub serve --workers N`` keeps serving when a worker dies (hub/workers.py).

On 0506cf5 one dead worker made the supervisor stop every other worker and exit: about 4 s
of 502s behind a proxy until systemd restarted the set (6 of 20 syncs failed). Now the dead
worker's slot is started again while the others go on accepting on the shared socket."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import httpx2
import pytest

from tests.kit.hubproc import init_hub, serve_hub
from tests.kit.pg import pg_database, require_pg

pytestmark = pytest.mark.e2e


def _children(pid: int) -> set[int]:
    return {int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()}


def test_a_killed_worker_is_started_again_and_the_hub_keeps_answering(tmp_path: Path) -> None:
    require_pg()
    with pg_database() as url:
        data = tmp_path / "hub"
        init_hub(data, url)
        hub = serve_hub(data, db=url, workers=2)
        try:
            before = _children(hub.proc.pid)
            assert len(before) == 2
            victim = sorted(before)[0]
            os.kill(victim, signal.SIGKILL)
            deadline = time.monotonic() + 60
            answered = 0
            with httpx2.Client(base_url=hub.url, timeout=10) as c:
                while True:  # every request answers while the slot is started again
                    assert c.get("/healthz").status_code == 200
                    answered += 1
                    now = _children(hub.proc.pid)
                    if len(now) == 2 and victim not in now:
                        break
                    assert time.monotonic() < deadline, now
                for _ in range(20):
                    assert c.get("/readyz").status_code == 200
            assert hub.proc.poll() is None  # the supervisor did not give up
            assert '"worker.restart"' in hub.log.read_text() or "worker.restart" in \
                hub.log.read_text()
        finally:
            hub.stop()
        assert hub.proc.returncode == 0  # a SIGTERM still stops the whole set cleanly


def test_a_worker_that_keeps_dying_stops_the_set_as_a_crash_loop() -> None:
    """Five exits within the window: the supervisor gives up (exit 1) rather than spin, so
    systemd or the container runtime restarts the whole set (docs/operations.md)."""
    import subprocess
    import sys

    from tests.kit.host import REPO

    code = ("import sys; from hub import workers\n"
            "sys.exit(workers.supervise(2, lambda i: 3))\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 1, (r.stdout, r.stderr)
