"""PostgreSQL stopped under a running hub, a running watcher and a CLI sync.

Fault (issue 29): with the database down the hub answered 500 ``internal`` with two
tracebacks per request (its own ``log.exception`` and the server's re-raise), counted as
``internal``; ``quire sync`` exited 1 ("error") instead of 4 ("unreachable, retry"); an idle
watcher kept saying ``ok``. Here the database is a throwaway PostgreSQL server of the
test's own (tests/kit/pgcluster.py), stopped with a fast shutdown (every connection cut,
as when the server goes down) and started again; neither the hub nor the watcher is
restarted.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from shared.errors import Unavailable
from tests.kit.cli import QUIRE, CliMember, quire
from tests.kit.host import REPO, free_ports
from tests.kit.hubproc import hub_cmd, init_hub
from tests.kit.pgcluster import PgCluster
from tests.kit.watcher import HUB_ENV, WatchProc, page, wait_for
from tests.kit.wire import redeem

# the watchers' read timeout is short (tests/kit/watcher.py); access is re-checked every
# 10 s, not every second as in other watcher tests: an idle stream hears of the outage at
# once because the hub's LISTEN connection drops (the re-check is the fallback)
KEEPALIVE = {"QUIRE_HUB_EVENTS_KEEPALIVE_MS": HUB_ENV["QUIRE_HUB_EVENTS_KEEPALIVE_MS"],
             "QUIRE_HUB_EVENTS_RECHECK_MS": "10000"}


@pytest.fixture
def pg() -> Iterator[PgCluster]:
    cluster = PgCluster()
    cluster.start()
    yield cluster
    cluster.remove()


def _metric(metrics_url: str, name: str, labels: str) -> float:
    text = httpx2.get(metrics_url, timeout=10).text
    return sum(float(v) for v in re.findall(
        "^" + name + r"\{" + labels + r"[^}]*\} (\S+)$", text, re.M))


def _up(url: str) -> bool:
    try:
        return httpx2.get(url + "/healthz", timeout=1).status_code == 200
    except httpx2.HTTPError:
        return False


def _join(url: str, codes: dict[str, str], root: Path) -> list[CliMember]:
    """Machines joined with the real CLI, in parallel processes."""
    procs, out = [], []
    for name, code in codes.items():
        home, vault = root / name / "home", root / name / "vault"
        procs.append(subprocess.Popen(
            [*QUIRE, "join", url, "--invite", code, "--vault", str(vault), "--device", name,
             "--json"], cwd=REPO, env=dict(os.environ, QUIRE_HOME=str(home)),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        out.append(CliMember(None, name, home, vault))  # type: ignore[arg-type]
    for p in procs:
        stdout, stderr = p.communicate(timeout=60)
        assert p.returncode == 0, (stdout, stderr)
    return out


def test_database_outage_answers_unavailable_and_everyone_recovers_by_itself(
        pg: PgCluster, tmp_path: Path) -> None:
    db = pg.create_database("quire")
    data = tmp_path / "hub"
    enrollment = init_hub(data, db)
    port = free_ports(2)
    url, metrics = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{port + 1}/metrics"
    log = data / "serve.log"
    with open(log, "wb") as f:
        proc = subprocess.Popen(hub_cmd("serve", "--data", str(data), "--db", db, "--port",
                                        str(port)), stdout=f, stderr=subprocess.STDOUT,
                                cwd=REPO, env={**os.environ, **KEEPALIVE,
                                               "QUIRE_HUB_METRICS_PORT": str(port + 1)})
    watcher = None
    try:
        wait_for(lambda: _up(url), 30, lambda: log.read_text())
        with httpx2.Client(base_url=url, timeout=30) as c:
            owner = redeem(c, enrollment, "owner")
            space = owner.create_space("outage")
            codes = {n: owner.invite(space, "editor") for n in ("ann", "ben")}
        # ann runs a watcher; ben (another machine in the space) uses the CLI alone
        ann, ben = _join(url, codes, tmp_path)
        watcher = WatchProc(ann)
        watcher.wait_ready()

        pg.stop()

        # the hub: 503 unavailable (retryable), counted as such
        with ann.client() as c, pytest.raises(Unavailable):
            c.spaces()
        # the idle watcher finds out by itself (no edit, no command)
        wait_for(lambda: (watcher.status().get("last_error") or {}).get("code")
                 == "unavailable", 60, lambda: f"{watcher.status()}\n"
                 f"{watcher.log.read_text()[-2000:]}")
        assert _metric(metrics, "quire_events_sent_total", 'type="unavailable"') >= 1
        # a CLI sync with an edit: exit 4, and it says the edit is kept
        ben.path("notes/outage").parent.mkdir(parents=True, exist_ok=True)
        ben.path("notes/outage").write_text(page("outage", "written while the db was down\n"))
        p = quire(ben.home, "sync", check=False)
        assert p.returncode == 4, (p.returncode, p.stdout, p.stderr)
        assert "[unavailable]" in p.stderr and "edits are kept" in p.stderr, p.stderr
        assert _metric(metrics, "quire_refusals_total", 'code="unavailable"') >= 2
        assert _metric(metrics, "quire_refusals_total", 'code="internal"') == 0

        pg.start()

        # recovery without a restart: ben's next sync publishes the edit; ann's watcher
        # pulls it by itself and is idle again
        wait_for(lambda: quire(ben.home, "sync", check=False).returncode == 0, 60)
        wait_for(lambda: ann.path("notes/outage").exists()
                 and watcher.status().get("state") == "idle", 60,
                 lambda: f"{watcher.status()}\n{watcher.log.read_text()[-2000:]}")
        assert proc.poll() is None
        text = log.read_text()
        assert "Traceback" not in text, text[-4000:]
        assert '"event":"database_unavailable"' in text
    finally:
        if watcher is not None:
            watcher.stop()
        proc.terminate()
        proc.wait(10)
