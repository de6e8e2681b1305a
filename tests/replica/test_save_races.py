"""A person saves while a sync runs (issue 35): no acknowledged write is lost, and a remote
version the vault file never showed is never overwritten or deleted without a conflict.

Each race is deterministic. The real hub application runs in-process
(tests/kit/inproc.py); the sync is stopped at one step of its own and the person's save
(or delete, or the rest of a half-written save) runs right there, synchronously:

    sync ─ flush ─ scan ─► after_scan ─ pull, merge, push ─► before_vault_write ─┐
                                                                                   │ person
    ┌──────────────────────────────────────────────────────────────────────────────┘ saves
    └─ each journaled write checked against the file ─► mid_vault_write ─ renames ─►
       vault_written ─ record

The steps are the engine's crash points (replica/engine/crash.py): ``crash_point`` is
replaced, in every module that imported it, by a function that runs the person's action at
the named point once and then does what the real one does. Two paths drive the engine:

- ``cli``: ``Replica.sync()``, what ``quire sync`` runs (a walk of the vault);
- ``watcher``: ``SpaceSyncer`` (replica/watch/syncer.py), what ``quire watch`` runs on a
  vault event (flush and scan by the journal, then the sync on that scan) and on a head
  event (``watcher_fast``: the changes a head event carried, applied without a request).

The entry has five body lines; "B" is the other member, who publishes first; "A" is the
replica whose sync the person races. A vault write over a file modified within the quiet
period (or open for writing) waits in the journal (replica/engine/ledger.py); ``settle``
lets that period pass (it ages the mtime of the files with a journaled write) and syncs
again, as the watcher's retry or the next ``quire sync`` does.

Before the fix (2577507) 22 of these failed: every case of
``test_save_during_a_sync_that_holds_a_conflict…`` (the next scan took the file without its
never-written marker as the resolution, or the missing file as a resolution by delete, and
published it over B's edit), the delete and rename cases of
``test_save_during_a_sync_that_pulls_a_newer_version…`` (a missing file was a plain delete
of B's version, which the file never showed), and every two-step save (the sync renamed its
merge, or its marker, over the file the editor was still writing: the rest of the save went
into the unlinked file). What each test prevents is in its name.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from replica.engine import crash, pending
from replica.engine.ledger import QUIET_MS
from replica.machine.home import SpaceConfig
from replica.vault import files as vlt
from replica.watch.syncer import SpaceSyncer
from shared.digest import genesis_digest
from shared.entry import Entry
from tests.kit.inproc import Local, Space

try:  # the vault's Markdown half (replica/vault/files.py is being split in two)
    from replica.vault import markdown as md
except ImportError:  # pragma: no cover - before the split
    from replica.vault import files as md  # type: ignore[no-redef]

ID = "page/race"
MOVED = "page/race-moved"
TITLE = "Race"
BODY0 = "a0\nb0\nc0\nd0\ne0\n"
B_BODY = "a from B\nb0\nc0\nd0\ne0\n"  # B's edit of line a
A1_BODY = "a from A, first save\nb0\nc0\nd0\ne0\n"  # A's edit of line a, scanned by the sync
A2_BODY = "a from A, second save\nb0\nc0\nd0\ne0\n"  # A's save while the sync runs
A_BODY = "a from A\nb0\nc0\nd0\ne0\n"  # a save of a replica that had no edit of its own

STYLES = ("atomic", "in_place", "two_writes", "delete", "rename")


def page(body: str, title: str = TITLE, eid: str = ID) -> Entry:
    return Entry(id=eid, title=title, body=body)


# ---------------------------------------------------------------- the step hook


class Race:
    """Runs an action once, synchronously, when the sync reaches a crash point
    (replica/engine/crash.py), then carries on as the real crash point does.

    The hook this stands in for (to add to crash.py with the fix): ``crash.hook(point, fn)``
    (tests only) called by ``crash_point`` before its SIGKILL check, so that the in-process
    tier can pause a sync at the same named steps the kill tests use. Needed steps:
    ``after_scan`` (sync.py ``Replica.sync``), ``before_vault_write`` (``flush_vault``: the
    sync's journaled writes are decided, none carried out) and ``mid_vault_write``
    (``write_many``'s ``crash_hook``: each file was checked, temp files written, no rename
    yet)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.armed: list[tuple[str, Callable[[], None]]] = []
        self.fired: list[str] = []
        real = crash.crash_point

        def crash_point(name: str) -> None:
            for i, (point, action) in enumerate(self.armed):
                if point == name:
                    del self.armed[i]
                    action()
                    self.fired.append(name)
                    break
            real(name)

        # every module that did ``from replica.engine.crash import crash_point`` (the engine
        # is being split: whichever module holds flush_vault and write_many's caller now)
        for mod in list(sys.modules.values()):
            if (getattr(mod, "__name__", "").startswith("replica.")
                    and getattr(mod, "crash_point", None) is real):
                monkeypatch.setattr(mod, "crash_point", crash_point)

    def at(self, point: str, action: Callable[[], None]) -> None:
        assert point in crash.POINTS, point
        self.armed.append((point, action))

    def check_fired(self) -> None:
        assert not self.armed, f"the sync never reached {[p for p, _ in self.armed]}"


@pytest.fixture
def race(monkeypatch: pytest.MonkeyPatch) -> Race:
    return Race(monkeypatch)


# ---------------------------------------------------------------- the person


def save(path: Path, data: bytes, how: str, moved: Path | None = None) -> None:
    """Save as an editor does (tests/replica/watch/test_save_bursts_e2e.py): ``atomic`` (a temp file
    renamed over), ``in_place`` (one write), ``two_writes`` (truncate, first half, rest: both
    inside the window here; a save the sync cuts in half is ``HalfSave``), ``delete`` (the
    file removed), ``rename`` (the page moved to ``moved``, as it was)."""
    if how == "atomic":
        tmp = path.with_name(f".{path.name}.swp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    elif how == "in_place":
        with open(path, "wb") as f:
            f.write(data)
    elif how == "two_writes":
        with open(path, "wb") as f:
            f.write(data[: len(data) // 2])
            f.flush()
            f.write(data[len(data) // 2:])
    elif how == "delete":
        path.unlink()
    elif how == "rename":
        assert moved is not None
        os.rename(path, moved)
    else:  # pragma: no cover
        raise AssertionError(how)


@dataclass
class HalfSave:
    """An editor's save in two steps with a pause between: the file truncated and its first
    part written (the descriptor kept open), the rest written later into the same
    descriptor, as an editor writing in place does."""

    path: Path
    data: bytes
    cut: int
    fd: int = -1

    def start(self) -> None:
        self.fd = os.open(self.path, os.O_WRONLY | os.O_TRUNC)
        os.write(self.fd, self.data[: self.cut])

    def finish(self) -> None:
        os.write(self.fd, self.data[self.cut:])
        os.close(self.fd)
        self.fd = -1


# ---------------------------------------------------------------- the two paths


def journal(local: Local) -> dict[str, Any]:
    """A valid watcher journal naming the paths the tests touch (replica/vault/journal_scan.py
    looks at each with everything under it)."""
    return {"valid": True, "problem_paths": [],
            "paths": [os.fspath(local.path(ID)), os.fspath(local.path(MOVED))]}


@dataclass
class Side:
    """Replica A as one of the paths drives it: ``edited()`` is the sync that follows a vault
    event (the person's save), ``remote()`` the sync that follows a head event."""

    local: Local
    space: Space
    kind: str  # cli, watcher, watcher_fast
    syncer: SpaceSyncer | None = None
    results: list[Any] = field(default_factory=list)

    def __post_init__(self) -> None:
        # A waits for a quiet file as a person's replica does (the in-process kit's replicas
        # do not: tests/kit/inproc.py); B's writes are not raced
        self.local.engine.ledger.quiet_ms = QUIET_MS
        if self.kind == "cli":
            return
        # the watcher's syncer on the replica the test opened. The seam this needs (to add
        # with the fix): SpaceSyncer taking an opened (replica, client, store), or an opener,
        # instead of a test setting ``_parts``
        d = self.local.root / self.local.name  # where Local keeps store.sqlite
        cfg = SpaceConfig(space_id=self.space.id, name=self.space.name, hub_id="inproc",
                          replica_id=self.local.engine.replica_id, vault=self.local.vault,
                          role="editor", dir=d)
        self.syncer = SpaceSyncer(None, cfg)
        self.syncer._parts = (self.local.engine, self.local.client, self.local.store)

    def edited(self) -> None:
        if self.syncer is None:
            self.results.append(self.local.sync())
        else:
            self.results.append(self.syncer(True, journal(self.local)))

    def remote(self) -> None:
        if self.syncer is None:
            self.results.append(self.local.sync())
            return
        if self.kind == "watcher_fast":
            applied = self.syncer.apply(delivered(self.space))
            assert applied is not None, "the fast path refused the head event's changes"
            self.results.append(applied)
            return
        self.results.append(self.syncer(False, journal(self.local)))

    def settle(self, rounds: int = 4) -> None:
        """Sync until no vault write is left journaled; between syncs the quiet period a
        deferred write waits for passes (the files' mtimes are moved 60 s back)."""
        for _ in range(rounds):
            self.edited()
            pending = self.local.store.pending_vault_writes()
            if not pending:
                return
            old = time.time_ns() - 60 * 10**9
            for eid, _content, _prev in pending:
                p = self.local.path(eid)
                if p.is_file() and not p.is_symlink():
                    os.utime(p, ns=(old, old))
        raise AssertionError(f"vault writes still pending: {pending}")


def delivered(space: Space) -> list[dict[str, Any]]:
    """Every batch as head events carry them to a watcher (tests/replica/watch/test_fast_path.py)."""
    h = space.head()
    page_ = space.admin.changes(space.id, epoch=h["epoch"], after=0,
                                after_digest=genesis_digest(space.id, h["epoch"]), limit=5000)
    lines = [{"batch": c.batch.to_wire(), "seq": c.seq, "head": c.head,
              "accepted_at": c.accepted_at, "author": c.author, "receipt": c.receipt}
             for c in page_.changes]
    assert page_.signed is not None
    lines[-1]["end_head"] = page_.signed.wire
    return lines


@pytest.fixture
def team(tmp_path: Path, space: Space) -> Iterator[tuple[Local, Local]]:
    """A and B, both holding the page as published (BODY0)."""
    a, b = space.replica(tmp_path, "a"), space.replica(tmp_path, "b")
    try:
        a.write(page(BODY0))
        a.sync()
        b.sync()
        assert b.read(ID) == page(BODY0) and len(space.batches(a)) == 1
        yield a, b
    finally:
        a.close()
        b.close()


def side(team: tuple[Local, Local], space: Space, kind: str) -> Side:
    return Side(team[0], space, kind)


def b_publishes(b: Local, e: Entry) -> None:
    b.write(e)
    assert b.sync().pushed == 1


def unpublished(local: Local) -> list[str]:
    """What ``quire status`` says the next sync would publish (replica/engine/pending.py)."""
    with local.store.engine.connect() as conn:
        return pending.unpublished_txn(conn, local.vault).entries


def waited(s: Side) -> None:
    """The sync left its write of the page journaled, waiting for the file to be quiet, and
    said when to try again (the watcher schedules a sync then: replica/watch/core.py)."""
    assert ID in {e for e, _c, _p in s.local.store.pending_vault_writes()}
    res = s.results[-1]
    retry_at = res.retry_at if s.syncer is not None else min(res.waiting.values())
    assert retry_at is not None and retry_at > 0


def published_by(space: Space, local: Local, eid: str) -> list[dict[str, Any]]:
    """The batches of ``local`` that touch ``eid``, after the one that created it (the
    ``team`` fixture's)."""
    out = []
    for batch in space.batches(local)[1:]:
        for op in batch["ops"]:
            if (op.get("entry") or {}).get("id") == eid or op.get("id") == eid:
                out.append(batch)
    return out


# ---------------------------------------------------------------- (a) a save during a pulling sync


@pytest.mark.parametrize("path", ["cli", "watcher"])
@pytest.mark.parametrize("how", STYLES)
def test_save_during_a_sync_that_holds_a_conflict_is_never_published_over_the_remote_edit(
        team: tuple[Local, Local], space: Space, race: Race, path: str, how: str) -> None:
    # The scenario: A edits line a, B publishes an edit of line a, A's sync scans
    # A's edit, pulls B's, holds the conflict and journals the marker; A saves again (or
    # deletes, or renames the page) before the marker is written
    a, b = team
    s = side(team, space, path)
    b_publishes(b, page(B_BODY))
    a.write(page(A1_BODY))
    race.at("before_vault_write", lambda: save(a.path(ID), md.render(page(A2_BODY)), how,
                                               a.path(MOVED)))
    s.edited()
    race.check_fired()
    # what status says the next sync publishes is what it does: not the save (held again)
    assert ID not in unpublished(a)
    s.settle()
    # never A's text (nor A's delete) over B's: the entry is held on A, the hub keeps B's
    assert ID in a.held(), "the save was taken as the conflict's resolution"
    assert not published_by(space, a, ID)
    live = space.live()
    assert ID in live and live[ID].body == B_BODY
    b.sync()
    assert b.read(ID) is not None and b.read(ID).body == B_BODY
    if how in ("delete", "rename"):
        c = next(c for c in a.store.conflicts() if c.entry_id == ID)
        assert c.ours is None or c.ours.deleted  # edit/delete: ours is the delete
        if how == "rename":
            assert MOVED in live and live[MOVED].body == A1_BODY  # the file as it was
    else:
        # the person's last save is what the vault shows, and is the conflict's ours
        assert a.read(ID).body == A2_BODY
        c = next(c for c in a.store.conflicts() if c.entry_id == ID)
        assert c.ours is not None and c.ours.body == A2_BODY and c.theirs.body == B_BODY


@pytest.mark.parametrize("path", ["cli", "watcher", "watcher_fast"])
@pytest.mark.parametrize("how", STYLES)
def test_save_during_a_sync_that_pulls_a_newer_version_ends_as_a_conflict(
        team: tuple[Local, Local], space: Space, race: Race, path: str, how: str) -> None:
    # A has no edit of its own; its sync (or the watcher's head event) pulls B's edit of
    # line a and journals writing it; A saves an edit of line a (or deletes, or renames the
    # page) before that write is carried out. The file never showed B's version.
    a, b = team
    s = side(team, space, path)
    b_publishes(b, page(B_BODY))
    race.at("before_vault_write", lambda: save(a.path(ID), md.render(page(A_BODY)), how,
                                               a.path(MOVED)))
    s.remote()
    race.check_fired()
    assert ID not in unpublished(a)  # the next sync holds it: nothing of it to publish
    s.settle()
    assert ID in a.held(), "B's version, never shown in A's file, was overwritten or deleted"
    assert not published_by(space, a, ID)
    live = space.live()
    assert ID in live and live[ID].body == B_BODY
    b.sync()
    assert b.read(ID).body == B_BODY
    c = next(c for c in a.store.conflicts() if c.entry_id == ID)
    assert c.theirs is not None and c.theirs.body == B_BODY
    assert c.base is not None and c.base.body == BODY0  # what the file showed
    if how in ("delete", "rename"):
        assert c.ours is None or c.ours.deleted
        if how == "rename":
            assert MOVED in live and live[MOVED].body == BODY0
    else:
        assert c.ours.body == A_BODY and a.read(ID).body == A_BODY


# ---------------------------------------------------------------- (b) a save cut in half


WHOLE_BODY = "a from A\nb0\nc0\nd0\ne0\n"  # A's save; the sync reads it cut after line b


def _half_save(a: Local) -> HalfSave:
    data = md.render(page(WHOLE_BODY))
    cut = data.index(b"c0\n")  # front matter, lines a and b: a file that parses
    return HalfSave(a.path(ID), data, cut)


@pytest.mark.parametrize("path", ["cli", "watcher"])
def test_two_step_save_across_a_sync_with_a_clean_merge_ends_whole_in_every_vault(
        team: tuple[Local, Local], space: Space, path: str) -> None:
    # B renames the page (title only); A's editor truncates the file, writes the first
    # part and pauses; a sync reads the half, pulls B's title, merges cleanly and would
    # write the merge back; then the editor writes the rest
    a, b = team
    s = side(team, space, path)
    b_publishes(b, page(BODY0, title="Race, by B"))
    half = _half_save(a)
    half.start()
    try:
        s.edited()
    finally:
        half.finish()
    waited(s)
    assert a.path(ID).read_bytes() == half.data, "the save was cut"
    s.settle()
    want = page(WHOLE_BODY, title="Race, by B")
    assert a.read(ID) == want, "the rest of the save was lost"
    assert space.live()[ID] == want
    b.sync()
    assert b.read(ID) == want
    assert not a.held()


@pytest.mark.parametrize("path", ["cli", "watcher"])
def test_two_step_save_across_a_sync_with_a_conflict_keeps_the_whole_save_as_ours(
        team: tuple[Local, Local], space: Space, path: str) -> None:
    # B edits line a; A's two-step save edits line a too; the sync reads the half, holds
    # the conflict and would write the marker (with the half as ours) back by rename
    a, b = team
    s = side(team, space, path)
    b_publishes(b, page(B_BODY))
    half = _half_save(a)
    half.start()
    try:
        s.edited()
    finally:
        half.finish()
    waited(s)
    assert a.path(ID).read_bytes() == half.data, "the save was cut"
    s.settle()
    assert ID in a.held()
    c = next(c for c in a.store.conflicts() if c.entry_id == ID)
    assert c.ours is not None and c.ours.body == WHOLE_BODY, "ours is the half-written save"
    assert a.read(ID).body == WHOLE_BODY
    assert space.live()[ID].body == B_BODY and not published_by(space, a, ID)


@pytest.mark.parametrize("path", ["cli", "watcher"])
def test_two_step_save_finished_between_the_check_and_the_rename_is_not_replaced(
        team: tuple[Local, Local], space: Space, race: Race, path: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the flush checked the file (still the half the scan read), wrote its temp file; the
    # editor writes the rest and closes; then the rename would replace the whole save.
    # The checks before the write are made to miss the editor (no quiet period, and a system
    # where the kernel cannot say whether the file is open for writing): the last check,
    # right before the rename, is what this test is about
    a, b = team
    s = side(team, space, path)
    a.engine.ledger.quiet_ms = 0
    monkeypatch.setattr(vlt, "open_for_writing", lambda _path: None)
    b_publishes(b, page(BODY0, title="Race, by B"))
    half = _half_save(a)
    half.start()
    race.at("mid_vault_write", half.finish)
    try:
        s.edited()
    finally:
        if half.fd != -1:
            half.finish()
    race.check_fired()
    waited(s)  # the rename was not made: the write is still journaled
    assert a.path(ID).read_bytes() == half.data, "the rename replaced the finished save"
    s.settle()
    want = page(WHOLE_BODY, title="Race, by B")
    assert a.read(ID) == want
    assert space.live()[ID] == want
    b.sync()
    assert b.read(ID) == want
