"""A scoped or partial replica's store: what it keeps of the entries it does not hold
(docs/replica.md, "Scoped and partial replicas"; decisions.md D142, D149). What is checked is
replica/trust/scoped.py; this module applies it.

    pulled change with ``withheld``  ─▶ apply_withheld_txn
        ``was`` marks a version this store holds ─▶ the entry left the scope: dropped as a
            purge drops (replica/engine/purge.py ``drop_entries_txn``): its file goes, an
            unpublished local edit is kept, held (``UNREADABLE``) and reported; its
            element moves to the withheld sums
        the lattice deltas ─▶ added to the withheld sums
    pulled op on an entry this store does not hold, replacing a live version ─▶ entering_txn:
        the entry came into the scope; the replaced version leaves the withheld sums
    scoped snapshot ─▶ the withheld sums replaced by its end line's; the entries it does not
        list that this store held are dropped the same way (a rule or ``only`` narrowed)

The withheld sums are ``withheld_buckets`` (replica/store/schema.py): per bucket, the lattice
sum of the live entries the hub holds and this store does not; the state root is computed
over the store's entries plus them (replica/trust/verify.py ``state_root_txn``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from replica.engine.purge import drop_entries_txn
from replica.engine.report import SyncReport
from replica.store import store as st
from replica.store.db import Conn
from replica.store.store import EntryState, Store
from replica.trust.scoped import ONLY, SCOPE, Withheld
from shared import state
from shared.entry import tombstone
from shared.readscope import in_only, withheld_mark
from shared.wire import Op

UNREADABLE = "unreadable"  # the conflict field of an entry held because it left the scope
UNREADABLE_HELP = ("held: this entry is no longer in what this replica holds (a read rule "
                   "or its chosen scope left it out, or it was deleted); this is your "
                   "unpublished edit of it. Widen the scope (quire scope add) to publish it, "
                   "or copy what you need and delete the file")
LEFT = "outside your read scope or this replica's chosen scope"

ScheduleWrite = Callable[[Conn, EntryState], None]


def only_of(store: Store) -> tuple[str, ...]:
    """The globs a partial replica holds (empty: everything it may read)."""
    got = store.get_meta(ONLY)
    return tuple(got) if isinstance(got, list) else ()


def held_scope(store: Store) -> str:
    """The fingerprint of the scope the store's copy was built under ("" whole)."""
    got = store.get_meta(SCOPE)
    return got if isinstance(got, str) else ""


def held_scope_txn(conn: Conn) -> str:
    """``held_scope`` inside a transaction."""
    got = st.get_meta_txn(conn, SCOPE, "")
    return got if isinstance(got, str) else ""


def outside(only: Iterable[str], entry_id: str) -> bool:
    """Is ``entry_id`` outside a partial replica's globs (none: nothing is)?"""
    globs = tuple(only)
    return bool(globs) and not in_only(globs, entry_id)


def outside_scope(space: str, only: Iterable[str], entry_id: str, op: Op) -> dict[str, Any]:
    """The refusal of a local change outside a partial replica's globs (``outside_scope``):
    kept locally, not published, reported with the command that widens the scope."""
    folder = entry_id.rsplit("/", 1)[0] + "/*" if "/" in entry_id else entry_id
    return {"id": entry_id, "action": "delete" if op.entry.deleted else "put",
            "rule": "outside_scope", "reason": "outside this replica's chosen scope "
            f"({', '.join(only)})",
            "message": f"{entry_id}.md is outside this replica's chosen scope "
                       f"({', '.join(only)}); kept locally, not published. To publish it, "
                       f"widen the scope: quire scope add '{folder}' --space {space}",
            "next": f"quire scope add '{folder}' --space {space}"}


def _add_txn(conn: Conn, moves: list[state.Change]) -> None:
    """Fold (id, out, in) element moves into the withheld sums."""
    moves = [m for m in moves if m[1] != m[2]]
    if not moves:
        return
    held = st.withheld_txn(conn)
    st.set_withheld_txn(conn, state.apply_changes(held, moves))


def add_lattices_txn(conn: Conn, deltas: dict[int, bytes]) -> None:
    """Add per-bucket lattice deltas (a changes line's ``withheld.lattices``)."""
    if deltas:
        held = st.withheld_txn(conn)
        st.set_withheld_txn(conn, state.sum_lattices([{b: held[b] for b in deltas
                                                        if b in held}, deltas]))


def drop_txn(conn: Conn, ids: Iterable[str], report: SyncReport, schedule_write: ScheduleWrite,
             now: int, *, into_withheld: bool) -> None:
    """Drop entries that left the scope (their synced live versions move into the withheld
    sums when ``into_withheld``: a pull; a snapshot replaces the sums instead)."""
    ids = sorted(set(ids))
    if not ids:
        return
    moves: list[tuple[str, str | None, str | None]] = []
    for eid in ids:
        s = st.get_state_txn(conn, eid)
        if s.synced is not None and not s.synced.deleted:
            moves.append((eid, None, s.synced.version))
    report.left_scope += drop_entries_txn(conn, {eid: LEFT for eid in ids}, report,
                                          schedule_write, now, UNREADABLE)
    if into_withheld:
        _add_txn(conn, moves)


class Marks:
    """``was`` mark → id of the entries this store holds, built at the first mark a page
    brings (one hash per held entry) and kept for that page."""

    def __init__(self) -> None:
        self._by_mark: dict[str, str] | None = None

    def find_txn(self, conn: Conn, was: frozenset[str]) -> list[str]:
        if self._by_mark is None:
            self._by_mark = {withheld_mark(i, sv): i for i, sv, _lv, _h
                             in st.live_versions_txn(conn) if sv is not None}
        return [self._by_mark.pop(m) for m in sorted(was) if m in self._by_mark]


def apply_withheld_txn(conn: Conn, w: Withheld, marks: Marks, report: SyncReport,
                       schedule_write: ScheduleWrite, now: int) -> None:
    """A pulled change's left-out ops: entries whose held version a ``was`` mark names are
    dropped (their element moves to the sums), then the deltas are added."""
    drop_txn(conn, marks.find_txn(conn, w.was), report, schedule_write, now,
             into_withheld=True)
    add_lattices_txn(conn, w.lattices)


def entering_txn(conn: Conn, op: Op) -> None:
    """A pulled op on an entry this store holds no live version of, replacing a live one:
    the entry came into the scope; the replaced version was in the withheld sums."""
    base = op.base
    if base is None or base == tombstone(op.entry_id).version:
        return
    s = st.get_state_txn(conn, op.entry_id)
    if s.synced is None or s.synced.deleted:
        _add_txn(conn, [(op.entry_id, base, None)])


def snapshot_end_txn(conn: Conn, first: dict[str, Any], withheld: dict[int, bytes] | None,
                     unlisted: Iterable[str], report: SyncReport,
                     schedule_write: ScheduleWrite, now: int) -> None:
    """After a snapshot's last entry: the withheld sums are the snapshot's (none for a
    whole one); the entries it did not list that this store held live are dropped when the
    snapshot is scoped (held edits kept). Records the scope it was built under."""
    st.set_withheld_txn(conn, withheld or {}, replace=True)
    if withheld is not None:
        gone = [eid for eid in unlisted
                if (s := st.get_state_txn(conn, eid)).synced is not None
                and not s.synced.deleted]
        drop_txn(conn, gone, report, schedule_write, now, into_withheld=False)
    st.set_meta_txn(conn, SCOPE, str(first.get(SCOPE) or ""))
