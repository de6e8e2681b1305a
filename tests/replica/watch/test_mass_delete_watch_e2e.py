"""``rm -rf vault/*`` under a running watcher (docs/replica.md, "Mass deletes"): the watcher
holds the deletes and says so, ``quire status`` shows them held, nothing is deleted for the
team until ``quire sync --confirm-deletes`` (served by the watcher); a delete of 3 pages
publishes at once. A long variant (about 10 s on 12 pages with a threshold of 5; 200 pages
with the default threshold under ``QUIRE_LONG_E2E=200``), run with ``QUIRE_LONG_E2E`` set: the
suite's default covers the hold in-process (tests/replica/engine/test_mass_delete.py, 200
pages, a second sync holding again as the watcher's do). On 0506cf5 the watcher published
every delete within its debounce. Real hub, real CLI, real watcher."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.kit.watcher import DEADLINE, WatchProc, wait_for
from tests.replica.watch.test_watch_e2e import HubHandle, _entry, _team

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(
    not os.environ.get("QUIRE_LONG_E2E"), reason="long variant: QUIRE_LONG_E2E=1")]

LONG = os.environ.get("QUIRE_LONG_E2E") == "200"
PAGES = 200 if LONG else 12
ENV = {} if LONG else {"QUIRE_DELETE_HOLD_PAGES": "5"}
HELD = PAGES - 3


def test_rm_of_every_page_under_a_watcher_waits_for_confirm_deletes(
        shared_hub: tuple[HubHandle, Path], tmp_path: Path) -> None:
    team = _team(*shared_hub, tmp_path)
    ann, bob = team.members("ann", "bob")
    for i in range(PAGES):
        bob.write(_entry(f"page/p{i:03}", f"page {i}\n"))
    bob.sync()
    ann.sync()
    w = WatchProc(bob, env=ENV)
    try:
        w.wait_ready()
        for i in range(3):  # a small delete publishes as usual
            bob.path(f"page/p{i:03}").unlink()
        wait_for(lambda: "pushed: deleted page/p000, deleted page/p001, deleted page/p002"
                         in w.log.read_text(), DEADLINE,
                 lambda: w.log.read_text()[-2000:])
        for p in bob.vault.iterdir():
            if not p.name.startswith("."):
                shutil.rmtree(p)
        wait_for(lambda: f"holding {HELD} deletes" in w.log.read_text(), DEADLINE,
                 lambda: w.log.read_text()[-2000:] + str(w.status()))
        status = json.loads(bob.run("status", "--json", env=ENV).stdout)
        assert status["deletes_held"]["count"] == HELD and status["state"] == "pending"
        ann.sync()
        assert len(ann.files()) == HELD  # nothing deleted for the team
        out = bob.run("sync", "--confirm-deletes", "--json", env=ENV)
        assert json.loads(out.stdout)["sync"]["pushed"] == HELD
        ann.sync()
        assert ann.files() == {}
        assert json.loads(bob.run("status", "--json", env=ENV).stdout)["deletes_held"] is None
    finally:
        assert w.stop() == 0
