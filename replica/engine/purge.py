"""A purge reaching a replica (hub/purge.py made it; docs/security.md, Purge).

    sync ─ pull: the hub is in a new epoch ─▶ snapshot
             _snapshot_head: the hub-signed epoch statements from our epoch to the hub's;
             each purge statement names entries (``purged_by``)
           ─▶ drop_purged_txn, in the snapshot's transaction, before any entry is applied:
                an unpublished local edit (dirty, or already held) ─▶ kept, held as a
                    conflict of kind "purged": base and theirs dropped, ours kept; never
                    pushed until a person removes the marker
                otherwise ─▶ synced, local, file base and conflict dropped; the vault file
                    is removed (journaled write)
                outbox batches with an op on a purged entry ─▶ dropped
                agents' unpublished writes of them and their batches (replica/store/
                    overlay.py) ─▶ dropped
           ─▶ after the run: the store is compacted (VACUUM, wal_checkpoint(TRUNCATE)) so
              the dropped bytes leave its files

The snapshot itself no longer lists the entries, so nothing of them comes back; the
statement is what makes a purge differ from a deletion here (a deletion of an entry with a
local edit is merged as edit-against-delete; a purge never shows the purged version).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable
from pathlib import Path

from replica.engine.merge import same
from replica.engine.report import SyncReport
from replica.store import overlay
from replica.store import store as st
from replica.store.db import Conn
from replica.store.store import Conflict, EntryState
from shared.signed import EpochStatement
from shared.wire import op_entry_id

PURGED = "purged"  # the conflict field of an entry held because the hub purged it
# the help in the vault file's conflict marker of such an entry
PURGED_HELP = ("held: an admin purged this entry from the space; this is your unpublished "
               "edit of it. Removing this 'quire' block publishes it again: delete the file "
               "instead unless the content is meant to come back")


def purged_by(path: Iterable[EpochStatement]) -> dict[str, str]:
    """Pure: entry id → the reason of the purge that removed it, over an epoch path."""
    out: dict[str, str] = {}
    for statement in path:
        for entry_id in statement.purged:
            out[entry_id] = statement.reason
    return out


def drop_purged_txn(conn: Conn, purged: dict[str, str], report: SyncReport,
                    schedule_write: Callable[[Conn, EntryState], None],
                    now: int) -> None:
    """Drop the purged entries' content from the store (see the module doc)."""
    report.purged += drop_entries_txn(conn, purged, report, schedule_write, now, PURGED)
    for row in st.outbox_txn(conn):
        if any(op_entry_id(op) in purged for op in row["body"].get("ops", [])):
            st.drop_outbox_txn(conn, row["batch_id"])
    overlay.drop_purged_txn(conn, set(purged))  # agents' unpublished writes of them


def drop_entries_txn(conn: Conn, reasons: dict[str, str], report: SyncReport,
                     schedule_write: Callable[[Conn, EntryState], None], now: int,
                     why: str) -> list[dict[str, object]]:
    """Drop these entries' synced content (id → reason); an unpublished local edit of one
    is kept, held as a conflict of kind ``why`` (``PURGED``, or replica/trust/scoped.py's
    ``UNREADABLE``); the file goes otherwise. Returns what to report of each: id, reason,
    whether an edit was held."""
    out: list[dict[str, object]] = []
    for entry_id in sorted(reasons):
        s = st.get_state_txn(conn, entry_id)
        ours = s.local if s.local is not None and not s.local.deleted else None
        keep = ours is not None and (s.held or not same(s.local, s.synced))
        st.drop_conflict_txn(conn, entry_id)
        s.synced = None
        if keep:
            st.put_conflict_txn(conn, Conflict(entry_id, [why], None, ours, None, None,
                                               None, None, now))
            s.held, s.local, s.file_base = True, ours, ours
            report.held.append(entry_id)
        else:
            s.held, s.local, s.file_base = False, None, None
        schedule_write(conn, s)  # the file removed, or shown with its conflict marker
        st.put_state_txn(conn, s)  # nothing left (no file either): the row goes
        out.append({"id": entry_id, "reason": reasons[entry_id], "held": keep})
    return out


def compact_store(path: Path) -> None:
    """Rewrite the store without free pages and empty its WAL, so the rows dropped or
    overwritten above leave no bytes behind in either file (a connection of its own, outside
    any transaction: VACUUM cannot run inside one)."""
    conn = sqlite3.connect(path, isolation_level=None, timeout=10)
    try:
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
