"""The replica store's links index (replica/store/links.py): maintained on apply and on
local saves by triggers, answering backlinks as shared/links.py resolves links, and the
links a sync's changes leave dangling (replica/app/backlinks.py ``after_sync``)."""

from __future__ import annotations

from pathlib import Path

from replica.app import backlinks
from replica.store import links as index
from shared.entry import make_entry
from tests.kit.inproc import Space


def _page(eid: str, body: str) -> object:
    return make_entry({"id": eid, "title": eid.rsplit("/", 1)[-1], "body": body})


def test_backlinks_follow_saves_and_pulls_and_report_dangling(space: Space, tmp_path: Path
                                                              ) -> None:
    alice = space.replica(tmp_path, "alice")
    bob = space.replica(tmp_path, "bob")
    alice.write(_page("Projects/Release Plan", "dates\n"))
    alice.write(_page("Meeting Notes/Kickoff",
                      "see [[release plan|the plan]] and [p](../Projects/Release%20Plan.md)\n"))
    alice.write(_page("Home", "[[Kickoff#Agenda]] and [[Nowhere]]\n"))
    report = alice.sync()
    backlinks.after_sync(alice.store, report)
    assert report.dangling == [{"page": "Home", "links": ["Nowhere"]}]
    assert [b["id"] for b in backlinks.backlinks(alice.store, "Projects/Release Plan")] == [
        "Meeting Notes/Kickoff"]

    bob.sync()  # applied from the hub: bob's index has them too
    found = backlinks.backlinks(bob.store, "Meeting Notes/Kickoff")
    assert found == [{"id": "Home", "via": "wikilink", "title": "Home"}]

    # a nearer page of the same name takes the bare wikilink (Obsidian's shortest path)
    bob.write(_page("Release Plan", "root one\n"))
    report = bob.sync()
    backlinks.after_sync(bob.store, report)
    assert [b["id"] for b in backlinks.backlinks(bob.store, "Release Plan")] == [
        "Meeting Notes/Kickoff"]
    assert [b["via"] for b in backlinks.backlinks(bob.store, "Projects/Release Plan")] == [
        "markdown"]

    # a delete leaves the links to it dangling, and the sync says so
    bob.path("Release Plan").unlink()
    bob.path("Projects/Release Plan").unlink()
    report = bob.sync()
    backlinks.after_sync(bob.store, report)
    assert report.dangling == [{"page": "Meeting Notes/Kickoff",
                                "links": ["Projects/Release Plan", "release plan"]}]


def test_an_index_never_built_is_built_whole_at_the_first_read(space: Space, tmp_path: Path
                                                                ) -> None:
    alice = space.replica(tmp_path, "alice")
    alice.write(_page("a", "[[b]]\n"))
    alice.write(_page("b", "x\n"))
    alice.sync()
    with alice.store.tx() as conn:  # a store made before the index, or a first clone
        conn.execute("DELETE FROM links")
        conn.execute("DELETE FROM meta WHERE key = 'links_built'")
        assert index.refresh_txn(conn, at_most=1) is None  # too many for a sync: deferred
    assert [b["id"] for b in backlinks.backlinks(alice.store, "b")] == ["a"]
