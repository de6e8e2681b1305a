"""Local changes not yet published, for ``quire status`` (CLI, MCP ``status``): what the
next sync would send, found without changing anything.

    store: entries whose local state differs from the synced one (already folded in)
      +
    vault: the same size-and-mtime walk a sync starts with (``vaultscan.scan_changes``, or with
           a running watcher's journal only where it saw changes: journal_scan.py); a file
           whose stat moved is read and hashed; a new hash is parsed (a parse error is a
           ``problem``, as sync reports it) and counts when its entry differs from the
           synced one; a recorded file that is gone counts as a delete of a live entry.
           The sync's own rules (replica/engine/scan.py): a file still showing what it
           showed while its journaled write waits is no edit; a held entry's file without
           the marker is a resolution only when the marker was shown in it
      =
    ``Unpublished``: sorted entry ids, the problems, and whether the vault was scanned.

The cost is the sync's own floor (one stat a file, a read only where the stat moved);
``scan=False`` (``quire status --fast``) reads the store alone and says so
(``scanned: false``). Read-only: no transaction writes, no lock; a sync running meanwhile
only makes the answer a moment old.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replica.engine import blobs
from replica.engine.markers import conflict_tag, special
from replica.engine.merge import merge_entry, same
from replica.store import store as st
from replica.store.db import Conn
from replica.vault import markdown as md
from replica.vault.journal_scan import Journal, changes_txn
from shared.entry import Entry, EntryError

LIST_LIMIT = 50  # entry ids listed; the count is always complete


@dataclass
class Unpublished:
    entries: list[str]  # sorted entry ids the next sync would publish
    scanned: bool  # the vault was scanned (False: the store alone, ``--fast``)
    problems: list[md.Problem] = field(default_factory=list)  # only when scanned

    source: str = "scan"  # "scan", "journal" (a running watcher's) or "store" (no scan)
    outbox: int = 0  # of ``entries``, those the store already holds as unpublished (dirty)

    def to_json(self, limit: int = LIST_LIMIT) -> dict[str, Any]:
        return {"count": len(self.entries), "entries": self.entries[:limit],
                "more": len(self.entries) > limit, "scanned": self.scanned,
                "source": self.source}


def unpublished_txn(conn: Conn, vault: Path, *, scan: bool = True,
                    journal: Journal | None = None) -> Unpublished:
    """What the next sync of the replica whose store ``conn`` reads would publish;
    ``journal``: a running watcher's (the paths it saw change since its last scan, and the
    problems that scan found), checked instead of walking the vault
    (replica/vault/journal_scan.py)."""
    ids = set(st.dirty_ids_txn(conn))
    outbox = len(ids)
    if not scan:
        return Unpublished(sorted(ids), scanned=False, source="store", outbox=outbox)
    # the store's own journaled writes not yet carried out are not local edits, as long as
    # their file still shows what it showed
    writing = st.pending_ids_txn(conn)
    changes, source = changes_txn(conn, vault, journal)
    problems = list(changes.problems)
    limit = blobs.limit_txn(conn)
    for fs in changes.changed:
        big = blobs.too_large(vault, fs, limit)
        if big is not None:  # as the sync reports it (replica/engine/scan.py)
            problems.append(big)
            continue
        s = st.get_state_txn(conn, fs.entry_id)
        try:
            data = fs.path.read_bytes()
        except FileNotFoundError:  # removed since the walk: as if it was never there
            if s.file_hash is not None and (st.live_version(s.synced) or s.held):
                ids.add(fs.entry_id)
            continue
        h = md.file_hash(data)
        if fs.entry_id in writing and h == s.shown_hash:
            continue  # its journaled write waits for a quiet file: no edit
        if h == s.file_hash and (h == s.shown_hash or fs.entry_id not in writing):
            continue  # touched, not changed
        try:
            entry, markers = md.read_file(vault, fs.entry_id, fs.os_path, data)
        except EntryError as e:
            problems.append(md.Problem(fs.path.relative_to(vault).as_posix(), e.line, str(e),
                                       fs.entry_id))
            continue
        if s.held:  # held in conflict: published once the person removed the marker that
            # this file showed (else the sync merges it again, and may still hold it)
            if not markers.get("conflict") and _held_publishes_txn(conn, s, entry):
                ids.add(fs.entry_id)
            continue
        if s.file_base is not None and not same(s.file_base, s.local):
            # the store moved on since the file showed: the sync merges three-way, and
            # publishes what merges cleanly (a conflict is held)
            r = merge_entry(s.file_base, entry, s.local)
            if r.clean and st.live_version(r.entry) != st.live_version(s.synced):
                ids.add(fs.entry_id)
        elif st.live_version(entry) != st.live_version(s.synced):
            ids.add(fs.entry_id)
    for entry_id in changes.missing - changes.problem_ids():
        s = st.get_state_txn(conn, entry_id)
        if entry_id in writing and s.shown_hash is None:
            continue  # a file still to be made: nothing was shown, nothing deleted
        if s.held:
            if _held_publishes_txn(conn, s, None):
                ids.add(entry_id)
        elif s.file_base is not None and not same(s.file_base, s.local):
            # a delete of a version the store moved on from: merged, held when it conflicts
            r = merge_entry(s.file_base, None, s.local)
            if r.clean and st.live_version(r.entry) != st.live_version(s.synced):
                ids.add(entry_id)
        elif st.live_version(s.synced) is not None:
            ids.add(entry_id)
    problems.sort(key=lambda p: p.path)
    return Unpublished(sorted(ids), scanned=True, problems=problems, source=source,
                       outbox=outbox)


def _held_publishes_txn(conn: Conn, s: st.EntryState, ours: Entry | None) -> bool:
    """Would the next sync publish the held entry ``s`` whose file now shows ``ours`` with
    no marker (None: no file)? A resolution when the file showed the conflict's marker;
    else merged again with theirs (replica/engine/scan.py), published when that is clean."""
    c = st.get_conflict_txn(conn, s.id)
    if c is None or s.shown_marker == conflict_tag(c):
        return True
    if special(c):
        return False
    r = merge_entry(c.base, ours, c.theirs)
    return r.clean and st.live_version(r.entry) != st.live_version(s.synced)
