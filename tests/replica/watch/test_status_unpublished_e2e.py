"""``quire status`` tells the truth about unpublished hand edits (issue 20), end to end: a
real hub process, machines joined with the real CLI, ``quire status``/``sync``/``watch``
and ``quire mcp`` as subprocesses.

Before: status was computed from the store alone, so after a sync, a hand edit, a new page
and a deleted page answered ``"state": "ok", "outbox": 0`` until the next sync."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from shared.entry import make_entry
from tests.kit.cli import QUIRE, CliMember, CliTeam, qjson
from tests.kit.host import REPO
from tests.kit.mcp_answer import answer
from tests.kit.watcher import DEADLINE, WatchProc, wait_for
from tests.replica.watch.test_watch_e2e import HubHandle

pytestmark = pytest.mark.e2e

THREE = ["note/gone", "page/edited", "page/new"]


def _entry(eid: str, body: str) -> Any:
    return make_entry({"id": eid, "title": eid, "body": body})


def _member(shared_hub: tuple[HubHandle, Path], tmp_path: Path) -> CliMember:
    h, owner = shared_hub
    team = CliTeam(h, owner, tmp_path, "st-" + uuid.uuid4().hex[:8])  # type: ignore[arg-type]
    m = team.member("sam")
    m.write(_entry("page/edited", "first\n"))
    m.write(_entry("note/gone", "to be deleted\n"))
    m.write(_entry("page/kept", "untouched\n"))
    m.sync()
    return m


def _hand_edits(m: CliMember) -> None:
    m.write(_entry("page/edited", "edited by hand\n"))
    m.write(_entry("page/new", "a new page\n"))
    m.path("note/gone").unlink()


def _mcp_status(m: CliMember) -> dict[str, Any]:
    async def call() -> dict[str, Any]:
        params = StdioServerParameters(
            command=QUIRE[0], args=[*QUIRE[1:], "mcp", "--agent", "checker"],
            env={"QUIRE_HOME": str(m.home), "PATH": os.environ.get("PATH", "")}, cwd=str(REPO))
        async with Client(params) as client:
            r = await client.call_tool("status", {})
            assert not r.is_error, r
            return answer(r)
    return asyncio.run(call())


def _pending(doc: dict[str, Any], ids: list[str]) -> None:
    assert doc["state"] == "pending", doc
    assert doc["unpublished"]["count"] == len(ids), doc["unpublished"]
    assert doc["unpublished"]["entries"] == ids, doc["unpublished"]
    assert doc["scanned"] is True


def test_hand_edits_without_a_watcher_are_pending_until_synced(
        shared_hub: tuple[HubHandle, Path], tmp_path: Path) -> None:
    m = _member(shared_hub, tmp_path)
    assert m.status()["state"] == "ok"
    _hand_edits(m)
    kept = m.path("page/kept")  # touched, not changed: read and hashed, not counted
    os.utime(kept, ns=(kept.stat().st_atime_ns, kept.stat().st_mtime_ns + 10**9))

    doc = m.status()
    _pending(doc, THREE)
    assert doc["outbox"] == 0  # none of it is in the store yet: only the scan sees it
    assert _mcp_status(m)["unpublished"] == doc["unpublished"]
    assert _mcp_status(m)["state"] == "pending"
    human = m.run("status").stdout
    assert "3 change(s) not yet published" in human and all(i in human for i in THREE)
    assert m.run("status", "--strict", check=False).returncode == 3  # attention

    fast = qjson(m.home, "status", "--fast")  # the store alone: says it did not look
    assert fast["scanned"] is False and fast["unpublished"]["scanned"] is False
    assert fast["unpublished"]["count"] == 0

    # a file that cannot be published is a problem, as sync reports it, and worse than
    # pending; its id is not counted as a change
    m.path("page/broken").write_text("---\ntitle: [unclosed\n---\nbody\n")
    doc = m.status()
    assert doc["state"] == "problems", doc
    assert [p["path"] for p in doc["problems"]] == ["page/broken.md"]
    assert doc["unpublished"]["entries"] == THREE
    sync_problems = m.sync()["sync"]["problems"]
    assert [p["path"] for p in sync_problems] == ["page/broken.md"]
    m.path("page/broken").unlink()

    doc = m.status()
    assert doc["state"] == "ok", doc
    assert doc["unpublished"] == {"count": 0, "entries": [], "more": False, "scanned": True,
                                  "source": "scan"}
    assert m.run("status", "--strict", check=False).returncode == 0
    assert _mcp_status(m)["state"] == "ok"


def test_edits_a_watcher_was_stopped_on_mid_debounce_stay_pending_until_published(
        shared_hub: tuple[HubHandle, Path], tmp_path: Path) -> None:
    m = _member(shared_hub, tmp_path)
    # a debounce that never ends on its own, and no poll (a full sync would publish): the
    # watcher holds the edits until it is stopped
    w = WatchProc(m, env={"QUIRE_WATCH_DEBOUNCE_MS": "600000",
                          "QUIRE_WATCH_DEBOUNCE_MAX_MS": "600000",
                          "QUIRE_WATCH_POLL_MS": "600000",
                          "QUIRE_WATCH_STREAM_READ_TIMEOUT_S": "600"})
    try:
        w.wait_ready()
        _hand_edits(m)
        # the watcher has seen all three (its status file lists them) and waits
        wait_for(lambda: w.status().get("unpublished", {}).get("entries") == THREE,
                 DEADLINE, lambda: f"watcher did not see the edits: {w.status()}")
        doc = m.status()
        _pending(doc, THREE)
        # from the running watcher's journal (a cookie round trip), not a vault walk
        assert doc["unpublished"]["source"] == "journal", doc["unpublished"]
        assert doc["watcher"]["running"] and doc["watcher"]["unpublished"]["count"] == 3
        assert _mcp_status(m)["unpublished"]["entries"] == THREE
    finally:
        assert w.stop() == 0  # stopped mid-debounce: nothing was published
    doc = m.status()
    _pending(doc, THREE)
    assert doc["watcher"]["running"] is False
    assert doc["unpublished"]["source"] == "scan"  # no watcher: no journal to trust

    w2 = WatchProc(m)  # a watcher starts with a full sync: it publishes them
    try:
        wait_for(lambda: m.status()["state"] == "ok", DEADLINE,
                 lambda: f"never published: {m.status()} {w2.status()}")
        wait_for(lambda: w2.status().get("unpublished", {}).get("count") == 0, DEADLINE,
                 lambda: f"watcher status still lists edits: {w2.status()}")
        assert _mcp_status(m)["state"] == "ok"
    finally:
        w2.stop()
