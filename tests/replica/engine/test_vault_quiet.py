"""A sync never writes over a file being written (issue 35, replica/engine/ledger.py): a
journaled write waits while its file was modified within the quiet period or is open for
writing, is retried (never dropped) by the next flush, and a file that changes between the
check and the rename is left alone. The clock is the ledger's, moved by the tests; no test
sleeps.

    flush ─ file still what it showed? ── no ──► dropped: the person's edit wins (scan)
                  │ yes
                  ├─ modified within quiet_ms, or open for writing ──► waits (journaled)
                  └─ temp file ─ changed since the check? ── yes ──► waits (journaled)
                                      │ no
                                      └─ rename, recorded as shown
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from replica.app import service
from replica.engine.ledger import Ledger
from replica.engine.report import SyncReport
from replica.machine.home import SpaceConfig
from replica.store import store as st
from replica.store.store import EntryState, Store
from replica.vault import files as vlt
from replica.vault import markdown as md
from replica.watch.core import SyncResult, Watcher, WatchSettings
from shared.entry import Entry
from tests.kit.inproc import Space

EID = "page/q"
QUIET = 1000
NOW = 1_900_000_000_000  # Unix ms: the tests' clock


def page(body: str) -> Entry:
    return Entry(id=EID, title="Q", body=body)


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def ledger(tmp_path: Path, clock: Clock) -> Iterator[Ledger]:
    """A store whose one entry's file shows ``page("one")``, with a write of
    ``page("two")`` journaled; the file last modified at the clock's now."""
    vault = tmp_path / "vault"
    store = Store(tmp_path / "store.sqlite", durable=False)
    led = Ledger(vault, store, clock, quiet_ms=QUIET)
    data = md.render(page("one\n"))
    path = md.entry_path(vault, EID)
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    (vault / ".quire-vault").touch()
    set_mtime(path, clock.now)
    with store.tx() as conn:
        s = EntryState(EID, page("one\n"), page("one\n"), md.file_hash(data), len(data),
                       None, False, page("one\n"), md.file_hash(data))
        s.local = page("two\n")
        led.schedule_write_txn(conn, s)
        st.put_state_txn(conn, s)
    yield led
    store.close()


def set_mtime(path: Path, ms: int) -> None:
    os.utime(path, ns=(ms * 1_000_000, ms * 1_000_000))


def shows(led: Ledger) -> str:
    return md.read_entry(led.vault, EID, md.entry_path(led.vault, EID).read_bytes())[0].body


def test_a_write_over_a_file_modified_within_the_quiet_period_waits_then_goes(
        ledger: Ledger, clock: Clock) -> None:
    waiting = ledger.flush_vault()
    assert waiting == {EID: NOW + QUIET + 1}  # retried when the file has been quiet
    assert shows(ledger) == "one\n" and ledger.store.pending_vault_writes()
    s = ledger.store.states()[EID]
    assert s.shown_hash == md.file_hash(md.render(page("one\n")))  # nothing recorded
    clock.now += QUIET + 1
    assert ledger.flush_vault() == {}
    assert shows(ledger) == "two\n" and not ledger.store.pending_vault_writes()
    s = ledger.store.states()[EID]
    assert s.shown_hash == s.file_hash == md.file_hash(md.render(page("two\n")))
    assert s.file_base == page("two\n")


def test_a_file_modified_just_ahead_of_the_clock_counts_as_being_written(
        ledger: Ledger, clock: Clock) -> None:
    set_mtime(md.entry_path(ledger.vault, EID), clock.now + 200)
    assert ledger.flush_vault() == {EID: NOW + 200 + QUIET + 1}
    # far ahead (a copy from a machine whose clock is ahead) says nothing of a writer now
    set_mtime(md.entry_path(ledger.vault, EID), clock.now + 10 * QUIET)
    assert ledger.flush_vault() == {} and shows(ledger) == "two\n"


def test_a_write_over_a_file_open_for_writing_waits_whatever_its_mtime(
        ledger: Ledger, clock: Clock) -> None:
    path = md.entry_path(ledger.vault, EID)
    clock.now += 10 * QUIET
    fd = os.open(path, os.O_WRONLY)  # an editor that paused between two writes
    try:
        if vlt.open_for_writing(path) is None:
            pytest.skip("this file system or kernel has no leases to ask")
        assert ledger.flush_vault() == {EID: clock.now + QUIET}
        assert shows(ledger) == "one\n"
    finally:
        os.close(fd)
    assert vlt.open_for_writing(path) is False
    assert ledger.flush_vault() == {} and shows(ledger) == "two\n"


def test_a_file_changed_since_it_showed_is_never_written_over(
        ledger: Ledger, clock: Clock) -> None:
    path = md.entry_path(ledger.vault, EID)
    path.write_bytes(md.render(page("the person's\n")))
    clock.now += 10 * QUIET
    assert ledger.flush_vault() == {}  # dropped, not waiting: the scan folds the edit
    assert shows(ledger) == "the person's\n" and not ledger.store.pending_vault_writes()
    s = ledger.store.states()[EID]
    assert s.shown_hash == md.file_hash(md.render(page("one\n")))  # what it showed


def test_write_many_leaves_a_target_that_changed_after_its_check(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    a, b = vault / "page" / "a.md", vault / "page" / "b.md"
    a.parent.mkdir(parents=True)
    a.write_bytes(b"a, as checked\n")
    expected = {os.fspath(a): vlt.key_at(os.fspath(a)), os.fspath(b): None}

    def editor_finishes() -> None:  # between the temp files and the renames
        with open(a, "ab") as f:
            f.write(b"and the rest of the save\n")

    done = vlt.write_many(vault, [(a, b"the sync's\n"), (b, b"new\n")],
                          crash_hook=editor_finishes, expected=expected)
    assert done == [b] and b.read_bytes() == b"new\n"
    assert a.read_bytes() == b"a, as checked\nand the rest of the save\n"
    assert not list(vault.rglob("*.quire-tmp"))
    assert vlt.remove(vault, a, expected[os.fspath(a)]) is False and a.exists()


def test_quire_sync_waits_once_for_a_file_being_saved(tmp_path: Path, space: Space) -> None:
    """``run_sync``'s wait: up to the quiet period, then the write is tried again; still
    waiting, it is reported (and the next sync writes it)."""
    a, b = space.replica(tmp_path, "a"), space.replica(tmp_path, "b")
    try:
        a.write(page("one\n"))
        a.sync()
        b.sync()
        b.write(page("two\n"))
        b.sync()
        a.engine.ledger.quiet_ms = QUIET
        os.utime(a.path(EID))  # the person saved it a moment ago (the same bytes)
        report = a.sync()
        assert EID in report.waiting and a.read(EID) == page("one\n")
        slept: list[float] = []
        service.wait_vault_writes(a.engine, report, slept.append)  # nobody ages the file
        assert 0 < slept[0] <= QUIET / 1000 and EID in report.waiting
        assert report.to_json()["vault_waiting"] == [EID]

        def quiet_now(seconds: float) -> None:  # the time passes, the file is quiet
            slept.append(seconds)
            old = (a.engine.clock() - 2 * QUIET) * 1_000_000
            os.utime(a.path(EID), ns=(old, old))

        service.wait_vault_writes(a.engine, report, quiet_now)
        assert report.waiting == {} and a.read(EID) == page("two\n")
    finally:
        a.close()
        b.close()


def test_status_lists_the_writes_that_wait(tmp_path: Path, space: Space) -> None:
    a, b = space.replica(tmp_path, "a"), space.replica(tmp_path, "b")
    try:
        a.write(page("one\n"))
        a.sync()
        b.sync()
        b.write(page("two\n"))
        b.sync()
        a.engine.ledger.quiet_ms = QUIET
        os.utime(a.path(EID))
        assert EID in a.sync().waiting
        cfg = SpaceConfig(space_id=space.id, name=space.name, hub_id="inproc",
                          replica_id=a.engine.replica_id, vault=a.vault, role="editor",
                          dir=a.root / a.name)
        doc = service.status_doc(cfg, store=a.store)
        assert doc["vault_waiting"] == [EID]
        assert doc["unpublished"]["entries"] == []  # the file is no edit: nothing to publish
    finally:
        a.close()
        b.close()


def test_the_watcher_syncs_again_when_a_waiting_write_may_go() -> None:
    now = [NOW]
    calls: list[bool] = []
    results = [SyncResult({"epoch": "e", "seq": 1}, 0, 0, retry_at=NOW + 700),
               SyncResult(None, 0, 0, skipped=True)]

    def sync(local_only: bool, _journal: object) -> SyncResult:
        calls.append(local_only)
        return results.pop(0)

    w = Watcher(sync=sync, write_status=lambda _doc: None, settings=WatchSettings(),
                clock=lambda: now[0])
    w.tick()  # the first sync (catching up): it leaves a write waiting
    assert calls == [False] and w.next_wake() == NOW + 700
    assert w.status()["vault_retry"] == NOW + 700
    now[0] += 699
    w.tick()
    assert calls == [False]
    now[0] += 1
    w.tick()  # a local-only sync: its flush writes it (no hub request)
    assert calls == [False, True] and w.vault_retry_at is None
    assert w.next_wake() > now[0]


def test_an_older_store_learns_what_its_files_showed(tmp_path: Path) -> None:
    """The upgrade: with no journaled write, the file showed what the store recorded (a
    held entry's, its marker); with one, what that write was to replace, marker unknown
    (its removal is then never taken for a resolution)."""
    path = tmp_path / "store.sqlite"
    store = Store(path)
    with store.tx() as conn:
        for eid, held in (("page/plain", False), ("page/held", True), ("page/moving", False)):
            st.put_state_txn(conn, EntryState(eid, page("s"), page("s"), f"h-{eid}", 1, 1,
                                              held))
        st.put_conflict_txn(conn, st.Conflict("page/held", ["body"], None, None, page("t"),
                                              None, None, None, 1))
        st.add_vault_write_txn(conn, "page/moving", "new", "h-before")
    store.close()
    raw = sqlite3.connect(path)
    for col in ("shown_hash", "shown_marker"):
        raw.execute(f"ALTER TABLE entries DROP COLUMN {col}")  # as an older quire made it
    raw.commit()
    raw.close()
    states = Store(path).states()
    assert (states["page/plain"].shown_hash, states["page/plain"].shown_marker) == (
        "h-page/plain", None)
    assert (states["page/held"].shown_hash, states["page/held"].shown_marker) == (
        "h-page/held", page("t").version)
    assert (states["page/moving"].shown_hash, states["page/moving"].shown_marker) == (
        "h-before", None)


def test_a_flush_reports_nothing_when_nothing_waits(ledger: Ledger, clock: Clock) -> None:
    clock.now += 10 * QUIET
    assert ledger.flush_vault() == {}
    assert ledger.flush_vault() == {}  # and again: nothing journaled
    assert isinstance(SyncReport().to_json()["vault_waiting"], list)
