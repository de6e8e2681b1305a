"""A served ``quire sync``/``quire status`` scans by the running watcher's journal instead
of walking the vault (issue 16 item 2; replica/vault/journal_scan.py), and must still see what a
walk sees, end to end: a real hub process, machines joined with the real CLI, a real
``quire watch`` process, commands through the console script served over its socket
(``QUIRE_WATCHER_SOCKET=require``). The attacks: a folder moved out of the vault (one
event, for the folder alone, and every entry under it gone), a folder moved in, and a file
that cannot be published made while the watcher runs, after which the watcher's own scan
has emptied its journal."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from shared.entry import make_entry
from tests.kit.cli import CliMember
from tests.kit.watcher import WatchProc, page, wait_for
from tests.replica.watch.test_socket_e2e import _member, q
from tests.replica.watch.test_watch_e2e import HubHandle

pytestmark = pytest.mark.e2e

# the watcher itself never publishes (its debounce and polls are out of reach): only the
# served sync can, so what it publishes is what its journal scan found
HOLD = {"QUIRE_WATCH_DEBOUNCE_MS": "600000", "QUIRE_WATCH_DEBOUNCE_MAX_MS": "600000",
        "QUIRE_WATCH_POLL_MS": "600000"}


def _served(m: CliMember, *args: str) -> dict[str, Any]:
    p = q(m, *args, "--json", mode="require")
    assert p.returncode in (0, 3), p
    return json.loads(p.stdout)


def test_a_folder_moved_out_and_one_moved_in_are_published_by_a_served_sync(
        shared_hub: tuple[HubHandle, Path], tmp_path: Path) -> None:
    m = _member(shared_hub, tmp_path)
    old = time.time_ns() - 3600 * 10**9
    for eid in ("page/sub/a", "page/sub/deep/b", "page/kept"):
        m.write(make_entry({"id": eid, "title": eid, "body": "first\n"}))
        # settled (older than the racy window): the store records their stat, and no scan
        # looks at them again unless an event says so
        os.utime(m.path(eid), ns=(old, old))
    m.sync()
    w = WatchProc(m, env=HOLD)
    try:
        w.wait_ready()
        shutil.move(m.path("page/sub/a").parent, tmp_path / "away")  # one event: page/sub
        incoming = tmp_path / "incoming"
        (incoming / "deep").mkdir(parents=True)
        (incoming / "deep" / "new.md").write_text(page("new", "moved in\n"))
        shutil.move(incoming, m.path("page/kept").parent / "in")  # one event: page/in
        status = _served(m, "status")
        assert status["unpublished"]["source"] == "journal", status["unpublished"]
        assert status["unpublished"]["entries"] == [
            "page/in/deep/new", "page/sub/a", "page/sub/deep/b"], status["unpublished"]
        doc = _served(m, "sync")
        assert doc["sync"]["scanned_by"] == "journal", doc["sync"]
        assert sorted(doc["sync"]["local_changes"]) == [
            "page/in/deep/new", "page/sub/a", "page/sub/deep/b"], doc["sync"]
        assert doc["state"] == "ok" and doc["outbox"] == 0, doc
    finally:
        assert w.stop() == 0
    other = m.team.member("kim")  # the hub has it: a fresh member's snapshot
    assert other.read("page/sub/a") is None and other.read("page/sub/deep/b") is None
    assert other.read("page/in/deep/new") is not None and other.read("page/kept") is not None


def test_a_problem_file_made_while_the_watcher_runs_is_reported_served(
        shared_hub: tuple[HubHandle, Path], tmp_path: Path) -> None:
    """The problem outlives the journal: the watcher's own scan looks at the new files
    (nothing to publish, so it writes no sync status) and empties its journal; a served
    status and sync must still report them, as a walk would."""
    m = _member(shared_hub, tmp_path)
    w = WatchProc(m)  # the test pacing: a 200 ms debounce
    try:
        w.wait_ready()
        folder = m.path("page/one").parent
        (folder / "notes.tmp").write_text("not an entry\n")  # (notes.txt: an attachment)
        (folder / "broken.md").write_text("---\ntitle: [unclosed\n---\nbody\n")
        scans = w.status().get("scans", 0)
        wait_for(lambda: w.status().get("scans", 0) > scans
                 and w.status().get("journal", {}).get("paths") == [], why=lambda: str(
                     w.status()))  # the watcher's scan took them: the journal is empty
        assert sorted(w.status()["journal"]["problem_paths"]) == [
            "page/broken.md", "page/notes.tmp"]
        want = ["page/broken.md", "page/notes.tmp"]
        status = _served(m, "status")
        assert status["unpublished"]["source"] == "journal", status["unpublished"]
        assert [p["path"] for p in status["problems"]] == want and status["state"] == "problems"
        doc = _served(m, "sync")
        assert doc["sync"]["scanned_by"] == "journal"
        assert [p["path"] for p in doc["sync"]["problems"]] == want, doc["sync"]
        assert [p["path"] for p in doc["problems"]] == want
        # fixed while the watcher runs: gone from both
        (folder / "notes.tmp").unlink()
        (folder / "broken.md").write_text(page("broken", "fixed\n"))
        doc = _served(m, "sync")  # (the watcher may publish page/broken first: either way)
        assert doc["sync"]["problems"] == [] and doc["problems"] == [], doc
        assert doc["state"] == "ok", doc
    finally:
        assert w.stop() == 0


def test_the_watchers_own_sync_publishes_a_folder_moved_out(
        shared_hub: tuple[HubHandle, Path], tmp_path: Path) -> None:
    """The watcher's edit-triggered sync scans by its journal too: the one event of a folder
    moved out must become the deletion of every entry under it, published by the watcher."""
    m = _member(shared_hub, tmp_path)
    old = time.time_ns() - 3600 * 10**9
    for eid in ("page/sub/a", "page/sub/deep/b"):
        m.write(make_entry({"id": eid, "title": eid, "body": "first\n"}))
        os.utime(m.path(eid), ns=(old, old))  # settled: only an event makes a scan look
    m.sync()
    kim = m.team.member("kim")
    assert kim.read("page/sub/a") is not None
    w = WatchProc(m)
    try:
        w.wait_ready()
        scans = w.status().get("scans", 0)
        shutil.move(m.path("page/sub/a").parent, tmp_path / "away")
        wait_for(lambda: w.status().get("scans", 0) > scans and w.status().get("outbox") == 0
                 and kim.sync() and kim.read("page/sub/a") is None
                 and kim.read("page/sub/deep/b") is None,
                 why=lambda: f"not published: {w.status()}")
    finally:
        assert w.stop() == 0
