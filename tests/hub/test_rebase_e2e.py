"""Rebase on publish, end to end: a real hub process, the real ``quire`` CLI.

A batch a replica made on an earlier head is accepted on the current head when none of its
entries changed since (``?rebase=1``, docs/decisions.md); the replica then pulls the gap.
The crash point ``before_push`` leaves a signed batch in the outbox, so another member can
publish in between: the same batch (same id) is what the hub accepts, no retry.
"""

from __future__ import annotations

from typing import Any

import pytest

from replica.machine.home import Home
from replica.store.store import Store
from shared.entry import Entry
from shared.wire import parse_batch
from tests.kit import cli as cli_tier
from tests.kit.cli import CliMember, CliTeam, quire

# the end-to-end tier's fixtures: a hub process, its owner, a team of CLI members
hub = cli_tier.hub
owner = cli_tier.owner
team = cli_tier.team

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

BODY = "one\ntwo\nthree\nfour\nfive\nsix\n"


def _store(m: Any) -> Store:
    return Store(Home(m.home).spaces()[0].store_path)


def _outbox_batch_after_crash(m: Any) -> Any:
    """Run ``quire sync`` until it has signed its batch and saved it, then SIGKILL it."""
    p = quire(m.home, "sync", "--json", env={"QUIRE_TEST_CRASH_AT": "before_push"},
              check=False)
    assert p.returncode == -9, (p.stdout, p.stderr)
    rows = _store(m).outbox()
    assert len(rows) == 1
    return parse_batch(rows[0]["body"])


def _assert_identical(a: Any, b: Any) -> None:
    assert a.files() == b.files()
    sa, sb = a.local_status(), b.local_status()
    assert sa["store_digest"] == sb["store_digest"] and sa["head"] == sb["head"]
    assert not sa["conflicts"] and not sb["conflicts"]


def _hub_batch(team: CliTeam, via: Any, batch_id: str) -> list[tuple[int, dict[str, Any]]]:
    return [(i + 1, b) for i, b in enumerate(team.batches(via)) if b["batch_id"] == batch_id]


def test_different_entries_publish_without_head_changed_and_converge(team: CliTeam) -> None:
    a, b = team.members("a", "b")
    a.write(Entry(id="page/a", title="A", body=BODY))
    a.sync()
    b.sync()
    b.write(Entry(id="page/b", title="B", body="from b\n"))
    made = _outbox_batch_after_crash(b)  # signed on seq 1
    a.write(Entry(id="page/a", title="A", body=BODY + "seven\n"))
    a.sync()  # seq 2: the head b's batch was made on is gone
    rep = b.sync()
    # the very batch b signed before a published was accepted (a head_changed would have
    # dropped it and published a new one), chained after a's
    landed = _hub_batch(team, a, made.batch_id)
    assert [seq for seq, _ in landed] == [3]
    assert landed[0][1]["parent"]["seq"] == 1 and landed[0][1]["digest"] == made.digest
    assert len(team.batches_by(a, b)) == 1
    assert rep["sync"]["pulled"] >= 2  # the gap: a's batch, then its own (a no-op)
    assert b.read("page/a").body == BODY + "seven\n"
    assert _store(b).outbox() == []
    a.sync()
    _assert_identical(a, b)


def _both_edit(team: CliTeam, eid: str, b_edit: tuple[str, str], a_edit: tuple[str, str]
               ) -> tuple[CliMember, CliMember, dict[str, Any]]:
    """a and b share ``eid``; b's edit is made into a batch (then a crash), a publishes its
    own edit of the same entry, then b syncs. b's batch must have been refused."""
    a, b = team.members("a", "b")
    title = eid.split("/")[1].upper()
    a.write(Entry(id=eid, title=title, body=BODY))
    a.sync()
    b.sync()
    b.write(Entry(id=eid, title=title, body=BODY.replace(*b_edit)))
    made = _outbox_batch_after_crash(b)
    a.write(Entry(id=eid, title=title, body=BODY.replace(*a_edit)))
    a.sync()
    rep = b.sync()
    assert _hub_batch(team, a, made.batch_id) == []  # refused: its base was not current
    return a, b, rep


def test_same_entry_still_gets_base_mismatch_and_merges(team: CliTeam) -> None:
    a, b, rep = _both_edit(team, "page/p", ("six", "SIX"), ("one", "ONE"))
    assert rep["sync"]["merged"] == ["page/p"]
    a.sync()
    assert a.read("page/p").body == "ONE\ntwo\nthree\nfour\nfive\nSIX\n"
    _assert_identical(a, b)


def test_same_entry_overlapping_edits_are_held_as_a_conflict(team: CliTeam) -> None:
    a, b, rep = _both_edit(team, "page/o", ("three", "three-b"), ("three", "three-a"))
    assert rep["sync"]["held"] == ["page/o"]
    assert "three-b" in b.path("page/o").read_text()  # the local edit is kept
    assert "three-a" in a.read("page/o").body


def test_lost_receipt_after_a_rebased_accept_is_recovered_and_nothing_is_skipped(
        team: CliTeam) -> None:
    a, b = team.members("a", "b")
    a.write(Entry(id="page/a", title="A", body="a1\n"))
    a.sync()
    b.sync()
    b.write(Entry(id="page/b", title="B", body="b1\n"))
    made = _outbox_batch_after_crash(b)
    a.write(Entry(id="page/a", title="A", body="a2\n"))
    a.write(Entry(id="note/x", title="X", body="x\n"))
    a.sync()
    # the hub accepts b's batch but b never hears of it (the response is lost)
    space = team.space["id"]
    with b.client() as c:
        first = c.push(space, made)
    assert first["seq"] == 3
    # meanwhile a publishes again, and b edits its entry again before syncing
    a.write(Entry(id="note/y", title="Y", body="y\n"))
    a.sync()
    b.write(Entry(id="page/b", title="B", body="b2\n"))
    rep = b.sync()
    # the replay got the same receipt; accepted once; every batch of a pulled; the edit made
    # meanwhile was not lost: it went out as a new batch
    assert [seq for seq, _ in _hub_batch(team, a, made.batch_id)] == [3]
    import json

    with _store(b).tx() as conn:
        saved = conn.scalar("SELECT receipt FROM receipts WHERE batch_id = ?",
                            (made.batch_id,))
    assert json.loads(saved) == first
    assert rep["sync"]["pulled"] >= 3
    for eid, body in (("page/a", "a2\n"), ("note/x", "x\n"), ("note/y", "y\n"),
                      ("page/b", "b2\n")):
        assert b.read(eid).body == body, eid
    a.sync()
    assert a.read("page/b").body == "b2\n"
    assert len(team.batches_by(a, b)) == 2
    _assert_identical(a, b)
