"""Versions an admin reverted and blocked (``quire admin revert --block``; the hub's half is
hub/blocks.py), on the replica: such an edit is held as a conflict, never republished,
never lost.

    push ── refused ``version_blocked`` ──> refused(): the batch's own edits the refusal
            names (entry id and exact version) are held; the batch is dropped, the rest
            goes in the next one (replica/engine/push.py)
    pull ── a dirty edit equal to a pulled batch's version is absorbed by the merge (it
            was "the same change"), then a later batch (the revert) moved the entry on:
            absorbed(): only then the space's blocks are read (GET …/blocks); an absorbed
            edit at a blocked version is put back as ours and held (replica/engine/sync.py)

A held entry keeps the edit in the store and the vault file (with a ``quire`` marker whose
help says why) until the person edits it and removes the marker. Holding only keeps
content: it never publishes or deletes, so an answer the hub key did not sign (a refusal,
the blocks list) can at worst hold an edit the person then releases.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import quote

from replica.engine.report import SyncReport
from replica.store import store as st
from replica.store.db import Conn
from replica.store.records import Conflict
from replica.store.store import EntryState
from shared.entry import Entry
from shared.errors import QuireError, VersionBlocked
from shared.wire import Op

# the help of a held blocked version's vault marker (replica/engine/markers.py conflict_marker)
HELP = ("held: an admin reverted this version and blocked it from being published again "
        "(quire admin revert --block); edit it, then remove this 'quire' block to publish")
Write = Callable[[Conn, EntryState], None]


def hold_txn(conn: Conn, s: EntryState, ours: Entry, seq: Any, now: int,
             write: Write, report: SyncReport) -> None:
    """Hold ``ours`` (a blocked version of ``s``) as a conflict against the synced state."""
    st.put_conflict_txn(conn, Conflict(s.id, ["version_blocked"], s.synced, ours, s.synced,
                                       None, None, None, now))
    s.local = ours
    s.held = True
    write(conn, s)
    st.put_state_txn(conn, s)
    report.held.append(s.id)
    report.version_blocked.append({
        "id": s.id, "version": ours.version, "seq": seq,
        "message": f"{s.id}: this version was reverted and blocked by an admin (seq {seq}); "
                   "held as a conflict, kept in the vault, not published: edit it, then "
                   "remove its 'quire' block"})


def refused(conn: Conn, ops: Sequence[Op], e: VersionBlocked, now: int, write: Write,
            report: SyncReport) -> bool:
    """Hold the edits among ``ops`` that the refusal names; False when it names none (then
    nothing is held: a refusal cannot make us hold what we did not send)."""
    ours = {(op.entry_id, op.entry.version) for op in ops if not op.entry.deleted}
    hits = [b for b in (e.details.get("blocked") or []) if isinstance(b, dict)
            and (b.get("id"), b.get("version")) in ours]
    for b in hits:
        s = st.get_state_txn(conn, b["id"])
        if not s.held and s.local is not None and s.local.version == b["version"]:
            hold_txn(conn, s, s.local, b.get("seq"), now, write, report)
    return bool(hits)


def absorbed(conn: Conn, client: Any, space_id: str, edits: dict[str, Entry],
             now: int, write: Write, report: SyncReport) -> None:
    """``edits``: dirty edits a pull's merge took as equal to a pulled version. Those the
    pull then moved off that version, when the version is blocked, are held."""
    moved = {}
    for eid, ours in edits.items():
        s = st.get_state_txn(conn, eid)
        if not s.held and st.version_of(s.local) != ours.version:
            moved[eid] = ours
    if not moved:
        return
    try:
        rows = client.admin_get(f"/v1/spaces/{quote(space_id, safe='')}/blocks")["blocks"]
    except QuireError:  # unreachable or an older hub: the merge's outcome stands
        return
    blocked = {(r.get("id"), r.get("version")): r.get("seq") for r in rows
               if isinstance(r, dict)}
    for eid, ours in sorted(moved.items()):
        if (eid, ours.version) in blocked:
            hold_txn(conn, st.get_state_txn(conn, eid), ours, blocked[(eid, ours.version)],
                     now, write, report)
