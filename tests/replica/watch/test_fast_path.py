"""The watcher's fast path: head events that carry their changes are applied without a
request, and must leave exactly the state a full ``quire sync`` leaves; anything that does
not verify or does not fit is left to the full sync. Real hub, real CLI, real watcher."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from replica.hubclient.client import HubUnverified
from replica.machine.home import Home
from replica.store.store import Store
from replica.watch.syncer import SpaceSyncer
from shared.digest import genesis_digest
from tests.kit.cli import CliMember, CliTeam
from tests.kit.watcher import DEADLINE, WatchProc, wait_for
from tests.replica.watch.test_watch_e2e import HubHandle, _entry, _has, _team

pytestmark = pytest.mark.e2e


def _store(m: CliMember) -> Store:
    return Store(Home(m.home).spaces()[0].store_path)


def _state(m: CliMember) -> dict[str, Any]:
    st = _store(m)
    try:
        head = st.head()
        return {"digest": st.digest(), "head": head.to_json() if head else None,
                "entries": {i: (s.local.version if s.local else None,
                                s.synced.version if s.synced else None, s.held)
                            for i, s in st.states().items()},
                "conflicts": len(st.conflicts()), "outbox": len(st.outbox()),
                "pending": st.pending_vault_writes(), "files": m.files()}
    finally:
        st.close()


def _seq(m: CliMember) -> int:
    st = _store(m)
    try:
        h = st.head()
        return h.seq if h else -1
    finally:
        st.close()


def test_changes_applied_from_head_events_leave_the_same_store_and_vault_as_a_full_sync(
        shared_hub: tuple[HubHandle, Path], tmp_path: Path) -> None:
    team = _team(*shared_hub, tmp_path)
    ann, bob, cyd = team.members("ann", "bob", "cyd")
    w = WatchProc(bob)
    try:
        w.wait_ready()
        seq = 0

        def publish(*writes: Any, delete: str | None = None) -> None:
            nonlocal seq
            for e in writes:
                ann.write(e)
            if delete:
                ann.path(delete).unlink()
            ann.sync()
            seq += 1
            wait_for(lambda: _seq(bob) == seq, DEADLINE, lambda: f"bob at {_seq(bob)}: {w.status()}")

        publish(_entry("page/a", "first\n"))
        publish(_entry("page/b", "b\n"),
                _entry("page/c", "c\n"))
        publish(_entry("page/a", "first, edited\n"))
        publish(delete="page/c")
        wait_for(lambda: _has(bob, "page/a", "first, edited\n")
                 and not bob.path("page/c").exists(), DEADLINE, "vault not written")
        s = w.status()
        assert s["applied"] >= 1, s  # the fast path ran (a dropped stream may force a pull)
        assert s["scans"] == 0, s  # its own vault writes cost no scan
        # a local edit on the watcher's side goes the usual way and still converges
        bob.write(_entry("page/d", "from bob\n"))
        wait_for(lambda: _seq(bob) == seq + 1 and w.status().get("outbox") == 0, DEADLINE,
                 lambda: str(w.status()))
        seq += 1
        publish(_entry("page/a", "after bob\n"))
        wait_for(lambda: w.status().get("state") == "idle"
                 and (w.status().get("head") or {}).get("seq") == seq, DEADLINE,
                 lambda: str(w.status()))
    finally:
        assert w.stop() == 0
    cyd.sync()  # the reference: one full sync from nothing
    got, want = _state(bob), _state(cyd)
    assert got == want
    assert got["conflicts"] == 0 and got["outbox"] == 0 and got["pending"] == []


def _lines(m: CliMember, team: CliTeam) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The hub's head and every batch as a head event would carry it."""
    with m.client() as c:
        head = c.head(team.space["id"])
        page = c.changes(head["space"], epoch=head["epoch"], after=0,
                         after_digest=genesis_digest(head["space"], head["epoch"]))
    lines = [{"batch": ch.batch.to_wire(), "seq": ch.seq, "head": ch.head,
              "accepted_at": ch.accepted_at, "author": ch.author, "receipt": ch.receipt}
             for ch in page.changes]
    # as the watcher keeps them: the last line carries the signed head its event carried
    assert page.signed is not None
    lines[-1]["end_head"] = page.signed.wire
    return head, lines


def test_delivered_changes_that_do_not_verify_or_do_not_fit_change_nothing(
        shared_hub: tuple[HubHandle, Path], tmp_path: Path) -> None:
    team = _team(*shared_hub, tmp_path)
    ann, bob, cyd = team.members("ann", "bob", "cyd")
    ann.write(_entry("page/a", "one\n"))
    ann.sync()
    bob.sync()
    ann.write(_entry("page/a", "two\n"))
    ann.sync()
    ann.write(_entry("page/b", "three\n"))
    ann.sync()
    _, lines = _lines(ann, team)
    assert [x["seq"] for x in lines] == [1, 2, 3]
    home = Home(bob.home)
    syncer = SpaceSyncer(home, home.spaces()[0])
    try:
        before = _state(bob)
        # a forged batch: its content no longer matches its digest
        forged = copy.deepcopy(lines[1:])
        forged[0]["batch"]["ops"][0]["entry"]["body"] = "forged\n"
        with pytest.raises(HubUnverified):
            syncer.apply(forged)
        # a head that does not chain from ours
        broken = copy.deepcopy(lines[1:])
        broken[0]["head"] = lines[2]["head"]
        with pytest.raises(HubUnverified):
            syncer.apply(broken)
        # another epoch's batch
        other = copy.deepcopy(lines[1:])
        other[0]["batch"]["epoch"] = "0" * 26
        with pytest.raises(HubUnverified):
            syncer.apply(other)
        assert syncer.apply(lines[2:]) is None  # a gap: only a pull can fill it
        assert _state(bob) == before
        # a local edit waiting in the store: the full sync must scan and merge it
        bob.write(_entry("page/z", "local\n"))
        bob.run("status")  # no scan: the edit is only in the vault
        assert syncer.apply(lines[1:]) is not None  # an unscanned edit is kept by the vault
        assert bob.read("page/z") is not None and _has(bob, "page/a", "two\n")
        assert _has(bob, "page/b", "three\n")
    finally:
        syncer.close()
    bob.sync()
    cyd.sync()
    ann.sync()
    assert _state(ann)["digest"] == _state(bob)["digest"] == _state(cyd)["digest"]
    assert _has(cyd, "page/z", "local\n")
