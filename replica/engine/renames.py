"""Renames (docs/replica.md, "Renames"; docs/decisions.md D144): a file that went missing and a
new file with the same content are one page that moved (git's exact-rename rule), published
as one rename: the delete of the old id and a put of the new one ``from`` it, in one batch.
Pure but for the ``_txn`` functions.

    push   dirty deletes (synced S) + dirty creates (local C), C == S but for the id
             ──► pair(): the put names ``from`` (one create per delete, by sorted id)
    pull   a rename X ──► Y pulled while X has a local edit here
             ──► rebase_txn(): the edit moves onto Y (base: X as synced, ours: the edit,
                 theirs: Y), merged three-way by the ledger; X leaves the vault
           an edit of X pulled while X is renamed here (to Y, not yet published)
             ──► rebase_txn(): the edit lands on Y (X's delete now bases on it), so the
                 rename publishes with the edit, never an edit/delete conflict

Pairing needs the same content: a file renamed and edited in one sync is a delete and a
create (similarity pairing is left for later, as D132 said).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from replica.engine.merge import merge_entry
from replica.engine.report import SyncReport
from replica.store import store as st
from replica.store.db import Conn
from replica.store.store import EntryState
from shared.digest import digest_of
from shared.entry import Entry, tombstone
from shared.wire import Op


def content_key(e: Entry) -> str:
    """The digest of an entry's content without its id: equal for a file and its rename."""
    d = e.to_dict()
    d["id"] = ""
    return digest_of(d)


def _live(e: Entry | None) -> Entry | None:
    return None if e is None or e.deleted else e


def _creates_entry(op: Op) -> bool:
    """A put of an entry absent at the hub: no base, or a tombstone (a name used before,
    such as the old name of a rename made back)."""
    return not op.entry.deleted and op.base in (None, tombstone(op.entry_id).version)


def pair(ops: list[Op], gone: dict[str, Entry]) -> list[Op]:
    """``ops`` with each create whose content equals a deleted entry's (``gone``: the
    synced content of the deletes among ``ops``) named a rename ``from`` it; one create
    per delete, the lowest ids first."""
    sources: dict[str, list[str]] = {}
    for eid in sorted(gone):
        sources.setdefault(content_key(gone[eid]), []).append(eid)
    if not sources:
        return ops
    out = []
    for op in sorted(ops, key=lambda o: o.entry_id):
        if _creates_entry(op) and op.moved_from is None:
            left = sources.get(content_key(op.entry))
            if left:
                op = replace(op, moved_from=left.pop(0))
        out.append(op)
    order = {op.entry_id: i for i, op in enumerate(ops)}
    return sorted(out, key=lambda o: order[o.entry_id])


def partners(ops: list[Op], gone: dict[str, Entry]) -> dict[str, str]:
    """The creates of ``ops`` that would rename one of ``gone`` (id → synced content of a
    delete not among ``ops``): new id → old id."""
    if not gone:
        return {}
    return {op.entry_id: op.moved_from for op in pair(ops, gone)
            if op.moved_from is not None and op.moved_from in gone}


def pair_txn(conn: Conn, ops: list[Op]) -> list[Op]:
    """``pair`` over the deletes of ``ops`` as this store has them synced."""
    deletes = [op.entry_id for op in ops if op.entry.deleted]
    if not deletes or not any(_creates_entry(op) for op in ops):
        return ops
    gone = {}
    for eid in deletes:
        synced = _live(st.get_state_txn(conn, eid).synced)
        if synced is not None:
            gone[eid] = synced
    return pair(ops, gone)


def _creates(dirty: dict[str, EntryState]) -> dict[str, list[str]]:
    """Dirty local creates by content key, sorted ids."""
    out: dict[str, list[str]] = {}
    for eid in sorted(dirty):
        s = dirty[eid]
        if not s.held and _live(s.synced) is None and (local := _live(s.local)) is not None:
            out.setdefault(content_key(local), []).append(eid)
    return out


def renamed_sources_txn(conn: Conn, deletes: Iterable[str]) -> set[str]:
    """Which of the pending local ``deletes`` are the old names of a rename (a dirty create
    has their content): not deletes of pages, so never held as a mass delete."""
    dirty = st.dirty_states_txn(conn)
    creates = _creates(dirty)
    out = set()
    for eid in sorted(deletes):
        synced = _live(dirty[eid].synced) if eid in dirty else None
        left = creates.get(content_key(synced)) if synced is not None else None
        if left:
            left.pop(0)
            out.add(eid)
    return out


Schedule = Callable[[Conn, EntryState], None]  # the ledger's schedule_write_txn


def rebase_txn(conn: Conn, ops: Iterable[Op], report: SyncReport, schedule: Schedule
               ) -> set[str]:
    """Before a pulled batch is merged (replica/engine/pull.py): carry local work across the
    renames on either side. Returns the ids the ledger must not merge again (already
    settled here)."""
    settled: set[str] = set()
    dirty: set[str] | None = None  # read once, from the dirty index, when a put asks
    for op in ops:
        if op.moved_from is not None:
            _edit_onto_rename_txn(conn, op.moved_from, op.entry)
        elif not op.entry.deleted:
            if dirty is None:
                dirty = set(st.dirty_ids_txn(conn))
            if op.entry_id in dirty and _edit_onto_local_rename_txn(conn, op.entry, report,
                                                                    schedule):
                settled.add(op.entry_id)
    return settled


def _edit_onto_rename_txn(conn: Conn, old: str, theirs: Entry) -> None:
    """A rename ``old`` → ``theirs.id`` pulled while ``old`` has a local edit and the new
    name is free here: the edit becomes the new name's local state over the old synced
    version, so the ledger merges it three-way with the renamed version (a conflict only
    where both changed the same lines), and ``old`` becomes clean, so the ledger deletes
    its file."""
    sx = st.get_state_txn(conn, old)
    base, ours = _live(sx.synced), _live(sx.local)
    if sx.held or base is None or ours is None or not sx.dirty:
        return
    sy = st.get_state_txn(conn, theirs.id)
    if sy.held or _live(sy.local) is not None:
        return  # the new name is taken here: the ledger holds both, as for any create
    sy.synced = replace(base, id=theirs.id)
    sy.local = replace(ours, id=theirs.id)
    st.put_state_txn(conn, sy)
    sx.local = sx.synced
    st.put_state_txn(conn, sx)


def _edit_onto_local_rename_txn(conn: Conn, theirs: Entry, report: SyncReport,
                                schedule: Schedule) -> bool:
    """An edit of X pulled while X is renamed here (deleted, with a create of its content
    not yet published): the edit is merged into the create, and X's delete now bases on
    the pulled version (so the next push renames the edited page). True when done."""
    sx = st.get_state_txn(conn, theirs.id)
    base = _live(sx.synced)
    if sx.held or base is None or _live(sx.local) is not None:
        return False
    dirty = st.dirty_states_txn(conn)
    left = _creates(dirty).get(content_key(base))
    if not left:
        return False
    sy = dirty[left[0]]
    assert sy.local is not None
    result = merge_entry(replace(base, id=sy.id), sy.local, replace(theirs, id=sy.id))
    if not result.clean or result.entry is None:
        return False
    sy.local = result.entry
    schedule(conn, sy)  # the file shows the edit
    st.put_state_txn(conn, sy)
    sx.synced = theirs
    sx.local = None
    st.put_state_txn(conn, sx)
    report.merged.append(sy.id)
    return True
