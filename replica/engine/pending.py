"""Local changes not yet published, for ``quire status`` (CLI, MCP ``status``): what the
next sync would send, found without changing anything.

    store: entries whose local state differs from the synced one (already folded in)
      +
    vault: the same size-and-mtime walk a sync starts with (``vaultscan.scan_changes``, or with
           a running watcher's journal only where it saw changes: journal_scan.py); a file
           whose stat moved is read and hashed; a new hash is parsed (a parse error is a
           ``problem``, as sync reports it) and counts when its entry differs from the
           synced one; a recorded file that is gone counts as a delete of a live entry
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

from replica.engine.merge import same
from replica.store import store as st
from replica.store.db import Conn
from replica.vault import markdown as md
from replica.vault.journal_scan import Journal, changes_txn
from shared.entry import EntryError

LIST_LIMIT = 50  # entry ids listed; the count is always complete


@dataclass
class Unpublished:
    entries: list[str]  # sorted entry ids the next sync would publish
    scanned: bool  # the vault was scanned (False: the store alone, ``--fast``)
    problems: list[md.Problem] = field(default_factory=list)  # only when scanned

    source: str = "scan"  # "scan", "journal" (a running watcher's) or "store" (no scan)

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
    if not scan:
        return Unpublished(sorted(ids), scanned=False, source="store")
    # the store's own journaled writes not yet carried out are not local edits
    writing = {r[0] for r in conn.exec_driver_sql("SELECT entry_id FROM vault_pending")}
    changes, source = changes_txn(conn, vault, journal)
    problems = list(changes.problems)
    for fs in changes.changed:
        if fs.entry_id in writing:
            continue
        s = st.get_state_txn(conn, fs.entry_id)
        try:
            data = fs.path.read_bytes()
        except FileNotFoundError:  # removed since the walk: as if it was never there
            if s.file_hash is not None and (st.live_version(s.synced) or s.held):
                ids.add(fs.entry_id)
            continue
        if md.file_hash(data) == s.file_hash:
            continue  # touched, not changed
        try:
            entry, markers = md.read_entry(vault, fs.entry_id, data)
        except EntryError as e:
            problems.append(md.Problem(f"{fs.entry_id}.md", e.line, str(e), fs.entry_id))
            continue
        if s.held:  # held in conflict: published once the person removed the marker
            if not markers.get("conflict"):
                ids.add(fs.entry_id)
            continue
        moved_on = s.file_base is not None and not same(s.file_base, s.local)  # sync merges
        if moved_on or st.live_version(entry) != st.live_version(s.synced):
            ids.add(fs.entry_id)
    for entry_id in changes.missing - changes.problem_ids() - writing:
        s = st.get_state_txn(conn, entry_id)
        if st.live_version(s.synced) is not None or s.held:
            ids.add(entry_id)
    problems.sort(key=lambda p: p.path)
    return Unpublished(sorted(ids), scanned=True, problems=problems, source=source)
