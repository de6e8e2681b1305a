"""What a batch changed, for people (replica/engine/changes.py, replica/app/changelog.py,
replica/app/pages.py): pure tables, no hub."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from replica.app import changelog
from replica.app.pages import entry_diff, pick_version
from replica.engine.changes import line_counts, summarize
from shared.entry import Entry, tombstone
from shared.errors import InvalidRequest, NotFound

A = Entry(id="page/a", title="A", tags=("ops",), body="one\ntwo\nthree\n")


@pytest.mark.parametrize(("before", "after", "want"), [
    (None, A, {"id": "page/a", "action": "created", "added": 3}),
    (tombstone("page/a"), A, {"id": "page/a", "action": "created", "added": 3}),
    (A, None, {"id": "page/a", "action": "deleted", "removed": 3}),
    (A, tombstone("page/a"), {"id": "page/a", "action": "deleted", "removed": 3}),
    (A, Entry(id="page/a", title="A", tags=("ops", "x"), body="one\n2\nthree\nfour\n"),
     {"id": "page/a", "action": "edited", "added": 2, "removed": 1, "fields": ["tags"]}),
])
def test_each_op_is_summarized_by_what_happened_to_the_page(before, after, want) -> None:
    assert summarize([("page/a", before, after)])["ops"] == [want]


def test_a_delete_and_a_create_of_the_same_body_is_a_rename() -> None:
    moved = Entry(id="page/b", title="B", body=A.body)
    ops = summarize([("page/a", A, None), ("page/b", None, moved)])["ops"]
    assert ops == [{"id": "page/b", "action": "renamed", "added": 3, "from": "page/a"}]


def test_a_revert_says_so_and_keeps_no_content() -> None:
    d = summarize([("page/a", A, None)], {"tool": "admin revert", "note": "reverts seq 4"})
    assert d["ops"] == [{"id": "page/a", "action": "reverted", "how": "deleted",
                         "removed": 3}]
    assert "one" not in repr(d) and "A" not in repr(d["ops"])


def test_line_counts_are_a_line_diff() -> None:
    assert line_counts("a\nb\nc\n", "a\nc\nd\n") == (1, 1)
    assert line_counts("", "x\n") == (1, 0)


def test_lines_for_people_name_members_and_agents_never_ids() -> None:
    c = {"direction": "pulled", "at": 1_796_652_120_000, "own": False,
         "author": {"user": "01m8y0xdtgt2brn6qd8v3h7pg3", "agent": "scout"},
         "ops": [{"id": "page/a", "action": "edited", "added": 1, "removed": 0}],
         "provenance": {"tool": "editor", "session": "01m8y0xdtgt2brn6qd8v3h7pg4"}}
    line = changelog.lines([c], {"01m8y0xdtgt2brn6qd8v3h7pg3": "Bob"}, None)[0]
    assert "pulled: " in line and "Bob for agent scout  edited page/a (+1 -0 lines)" in line
    assert "[tool editor]" in line and "01m8" not in line
    assert "a member for agent scout" in changelog.line(c, {}, None)


def test_since_takes_a_seq_a_duration_or_a_local_time() -> None:
    now = datetime(2026, 12, 3, 14, 0, tzinfo=UTC)
    assert changelog.parse_since("12") == (12, None)
    assert changelog.parse_since("2h", now)[1] == int((now - timedelta(hours=2)).timestamp()
                                                     * 1000)
    assert changelog.parse_since("2026-12-03T14:00+00:00")[1] == int(now.timestamp() * 1000)
    with pytest.raises(InvalidRequest):
        changelog.parse_since("yesterday-ish")


VERSIONS = [  # newest first, as the hub's history answers
    {"epoch": "e", "seq": 9, "deleted": True, "accepted_at": 900},
    {"epoch": "e", "seq": 5, "deleted": False, "accepted_at": 500},
    {"epoch": "e", "seq": 2, "deleted": False, "accepted_at": 200},
]


def test_restore_picks_the_version_asked_for() -> None:
    assert pick_version(VERSIONS)["seq"] == 5  # a deleted page: its last content
    assert pick_version(VERSIONS[1:])["seq"] == 2  # a live page: the one before
    assert pick_version(VERSIONS, seq=4, epoch="e")["seq"] == 2
    assert pick_version(VERSIONS, at_ms=600)["seq"] == 5
    with pytest.raises(NotFound):
        pick_version(VERSIONS, seq=1, epoch="e")
    with pytest.raises(NotFound):
        pick_version(VERSIONS[2:])  # nothing earlier


def test_a_local_diff_names_front_matter_fields() -> None:
    d = entry_diff("page/a", A, Entry(id="page/a", title="A2", tags=("ops",), body=A.body),
                   old_label="synced", new_label="local")
    assert d["fields"] == {"title": ["A", "A2"]} and d["body"] == ""
    assert entry_diff("page/a", None, A, old_label="x", new_label="y")["created"]


def test_a_local_diff_shows_a_moved_file_as_its_rename() -> None:
    """``quire diff`` says what the sync will publish: a file moved is one rename (its new
    name ``renamed_from`` the old, no change), not a delete and a new page."""
    from replica.app.pages import _with_renames

    moved = Entry(id="Archive/a", title=A.title, tags=A.tags, body=A.body)
    other = Entry(id="page/new", title="N", body="new\n")
    got = _with_renames([("page/a", A, None), ("Archive/a", None, moved),
                         ("page/new", None, other)])
    assert [(d["id"], d.get("renamed_from"), d["created"], d["body"]) for d in got] == [
        ("Archive/a", "page/a", False, ""), ("page/new", None, True, got[1]["body"])]
