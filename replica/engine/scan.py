"""Vault → store: the local edits of a sync (docs/replica.md, "Vault"), read from the vault
files whose size or mtime moved since the store recorded them (``vaultscan.scan_changes``, or
with a running watcher's journal only the paths it saw change, replica/vault/journal_scan.py).

    changed file ──► hash equal: stat recorded, nothing else
                 ──► parses: the entry's local state (a three-way merge when the store moved
                     on since the file was written or read: replica/engine/merge.py)
                 ──► does not parse: a problem, left alone
    gone file    ──► a local delete (not under a folder that is a link or unreadable)
"""

from __future__ import annotations

import time

from replica.engine.ledger import Ledger
from replica.engine.merge import merge_entry, same
from replica.engine.report import SyncReport
from replica.store import store as st
from replica.store.db import Conn
from replica.store.store import Conflict, EntryState
from replica.vault import faults as vaultfaults
from replica.vault import journal_scan
from replica.vault import markdown as md
from replica.vault import presence as vault_presence
from replica.vault.journal_scan import Journal
from replica.vault.walk import Prefetch
from shared.entry import Entry, EntryError


def fold_vault(ledger: Ledger, report: SyncReport, walk: Prefetch | None = None,
               journal: Journal | None = None) -> None:
    """Read the vault's changed files into the store, in one transaction: a changed file is
    hashed, parsed and taken as the entry's local state (merged three-way when the store
    moved on since the file was written); a recorded file that is gone is a local delete.
    The problems found (files that cannot be entries, or do not parse) go to ``report``.
    ``journal``: a running watcher's, naming where the vault changed (only there is looked
    at); ``walk``: the vault's walk run ahead (replica/vault/walk.py), used when there is no
    journal; neither: a walk made now. A vault that is gone is refused, never read as every
    page deleted (replica/vault/presence.py)."""
    vault_presence.check(ledger.vault, ledger.store)
    walked = walk.take() if walk is not None and journal is None else None
    with ledger.store.tx() as conn:
        # (id, size, mtime) of each recorded file: an unchanged file costs its stat,
        # nothing is read or parsed (docs/replica.md, "Vault"). Read before the walk (SQLite
        # takes the write lock at the first write, not here); a changed row is re-read below. With a
        # watcher's journal, only where it saw changes (replica/vault/journal_scan.py)
        scan, report.scanned_by = journal_scan.changes_txn(conn, ledger.vault, journal,
                                                           walked)
        report.problems = list(scan.problems)
        bad = scan.problem_ids()
        now_ns = time.time_ns()
        for fs in scan.changed:
            entry_id = fs.entry_id
            s = st.get_state_txn(conn, entry_id)
            try:
                data = fs.path.read_bytes()
            except FileNotFoundError:  # gone since the walk (run ahead: flush_vault removed
                continue  # it): no problem; the next walk finds it missing
            except OSError as e:  # unreadable: this entry is a problem, no other
                report.problems.append(md.Problem(
                    fs.path.relative_to(ledger.vault).as_posix(), None,
                    f"file cannot be read: {e.strerror or e}", entry_id))
                continue
            h = md.file_hash(data)
            if h == s.file_hash:
                ledger.record_stat(s, fs.size, fs.mtime_ns, now_ns)
                st.put_state_txn(conn, s)
                continue
            try:
                entry, markers = md.read_entry(ledger.vault, entry_id, data)
            except EntryError as e:
                report.problems.append(md.Problem(fs.path.relative_to(ledger.vault)
                                                  .as_posix(), e.line, str(e), entry_id))
                continue
            file_base = s.file_base
            s.file_base = entry
            s.file_hash = h
            ledger.record_stat(s, fs.size, fs.mtime_ns, now_ns)
            if s.held:
                s.local = entry
                if not markers.get("conflict"):
                    # the person removed the marker: the file is the resolution
                    s.held = False
                    st.drop_conflict_txn(conn, entry_id)
            elif file_base is not None and not same(file_base, s.local):
                # the store moved on since this file was written or read (a remote
                # change while the file did not parse, or a vault write skipped over
                # the person's edit): their edit is based on file_base, not on local
                _merge_file_txn(ledger, conn, s, file_base, entry, report)
            elif file_base is None and s.local is not None and not s.local.deleted \
                    and not same(entry, s.local):
                # the file never showed the local state (it did not parse, or it
                # appeared during a clone, when the hub's version arrived): a create
                # against a create, merged, never one taken over the other
                _merge_file_txn(ledger, conn, s, None, entry, report)
            else:
                s.local = entry
            st.put_state_txn(conn, s)
            report.local_changes.append(entry_id)
        for entry_id in sorted(scan.missing - bad):
            if vaultfaults.blocked(scan, entry_id):
                continue  # under a linked or unreadable folder: not a deletion
            s = st.get_state_txn(conn, entry_id)
            # the file is gone: a local delete (a held entry deleted = resolved by delete)
            s.local = None
            s.file_hash = s.file_size = s.file_mtime_ns = None
            s.file_base = None
            if s.held:
                s.held = False
                st.drop_conflict_txn(conn, entry_id)
            st.put_state_txn(conn, s)
            report.local_changes.append(entry_id)
    report.problems.sort(key=lambda p: p.path)


def _merge_file_txn(ledger: Ledger, conn: Conn, s: EntryState, file_base: Entry | None,
                    entry: Entry, report: SyncReport) -> None:
    """Fold a vault file read as ``entry`` into ``s`` three-way (base: ``file_base``,
    ours: the file, theirs: the local state the file never showed): a clean merge is
    taken (and written back to the file), a conflict is held with all three kept."""
    result = merge_entry(file_base, entry, s.local)
    if result.clean:
        s.local = result.entry
        report.merged.append(s.id)
    else:
        st.put_conflict_txn(conn, Conflict(
            s.id, list(result.conflicts), file_base, entry, s.local, None, None,
            result.body_with_markers, ledger.clock()))
        s.local = entry
        s.held = True
        report.held.append(s.id)
    ledger.schedule_write_txn(conn, s)

