"""Honest replica health: ``quire status`` reports the worst of the replica's own state and
its running watcher's, and ``--strict`` exits non-zero for anything but ``ok``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from replica.app.service import open_client
from replica.cli import exitcodes
from replica.ipc.status_file import overall
from replica.machine.home import Home
from tests.kit.cli import quire
from tests.kit.watcher import DEADLINE, WatchProc, wait_for
from tests.replica.watch.test_watch_e2e import HubHandle, _team


def test_status_strict_fails_for_a_member_whose_watcher_is_suspended(
        shared_hub: tuple[HubHandle, Path], tmp_path: Path) -> None:
    """Before: `status --strict` exited 0 for a suspended space (only `error` failed it),
    and `status` read only the last sync's record, not the running watcher's state."""
    team = _team(*shared_hub, tmp_path)
    (bob,) = team.members("bob")
    w = WatchProc(bob)
    try:
        w.wait_ready()
        ok = quire(bob.home, "status", "--strict", "--json", check=False)
        assert ok.returncode == 0, ok.stdout + ok.stderr
        bob_user = Home(bob.home).hubs()[0].user_id
        with open_client(Home(team.owner).hubs()[0]) as c:
            c._request("POST", f"/v1/spaces/{team.space['id']}/members/{bob_user}/remove", {})
        wait_for(lambda: w.status().get("state") == "suspended", DEADLINE,
                 lambda: f"not suspended: {w.status()}")
        r = quire(bob.home, "status", "--strict", "--json", check=False)
        doc = json.loads(r.stdout)
        # from the watcher's state or from the refusal its sync recorded, whichever holds
        assert doc["state"] == "suspended", doc
        assert doc["suspended"]["reason"] == "not_a_member"
        assert r.returncode == exitcodes.REFUSED == 5
        human = quire(bob.home, "status", check=False)
        assert "suspended" in human.stdout and human.returncode == 0  # not strict: exit 0
    finally:
        assert w.stop() == 0
    # the watcher stopped: the refusal its sync recorded still makes the space suspended
    after = quire(bob.home, "status", "--strict", "--json", check=False)
    assert after.returncode == exitcodes.REFUSED, after.stdout


RUNNING = {"running": True}


@pytest.mark.parametrize("own,watcher,state", [
    ("ok", None, "ok"),
    ("ok", {"state": "idle", **RUNNING}, "ok"),
    ("ok", {"state": "suspended", **RUNNING}, "suspended"),
    ("ok", {"state": "suspended", "running": False}, "ok"),  # stopped: history
    ("ok", {"state": "backoff", **RUNNING}, "error"),
    ("pending", {"state": "backoff", **RUNNING}, "error"),
    ("conflicts", {"state": "backoff", **RUNNING}, "error"),
    ("suspended", {"state": "backoff", **RUNNING}, "suspended"),
    ("error", {"state": "suspended", **RUNNING}, "suspended"),
    ("ok", {"state": "conflicts", **RUNNING}, "conflicts"),
    ("problems", {"state": "conflicts", **RUNNING}, "conflicts"),
    ("never_synced", {"state": "syncing", **RUNNING}, "never_synced"),
])
def test_space_state_is_the_worst_of_replica_and_watcher(own: str, watcher: Any,
                                                        state: str) -> None:
    err = {"code": "not_found", "message": "you are not a member", "at": 1}
    if watcher:
        watcher = dict(watcher, last_error=err)
    out = overall({"state": own, "last_error": None}, watcher)
    assert out["state"] == state
    if state == "suspended" and own != "suspended":
        assert out["suspended"] == {"reason": "not_a_member", "message": err["message"],
                                    "since": 1, "by": "watcher"}
    assert (exitcodes.for_status(out) == 0) == (state == "ok")
