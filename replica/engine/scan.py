"""Vault → store: the local edits of a sync (docs/replica.md, "Vault"), read from the vault
files whose size or mtime moved since the store recorded them (``vaultscan.scan_changes``, or
with a running watcher's journal only the paths it saw change, replica/vault/journal_scan.py).

    changed file ──► hash equal: stat recorded, nothing else
                 ──► still what it showed, its journaled write waiting: left to the write
                 ──► parses: the entry's local state (a three-way merge when the store moved
                     on since the file was written or read: replica/engine/merge.py); a held
                     entry's file without its marker is the resolution only when the marker
                     was shown in it, else it is merged again as the new ours
                 ──► does not parse: a problem, left alone
    gone file    ──► a delete of what the file showed (not under a folder that is a link or
                     unreadable; nothing shown: no delete): a plain local delete when the
                     store has not moved on since, else an edit/delete conflict, held

What the file showed is the store's record of it (``shown_hash``, ``shown_marker`` and
``file_base``: replica/engine/ledger.py), never a write only journaled: a save made while a
sync ran is never taken as based on a version it never showed (docs/decisions.md, "What the
file showed").
"""

from __future__ import annotations

import time

from replica.engine import blobs
from replica.engine.ledger import Ledger
from replica.engine.markers import conflict_tag, marker_tag, special
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
from shared.attachments import is_attachment
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
        writing = st.pending_ids_txn(conn)  # journaled writes not carried out (waiting)
        limit = blobs.limit_txn(conn)
        for fs in scan.changed:
            entry_id = fs.entry_id
            big = blobs.too_large(ledger.vault, fs, limit)
            if big is not None:  # a problem naming the file, never read or published
                report.problems.append(big)
                continue
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
            if entry_id in writing:
                if h == s.shown_hash:
                    continue  # unchanged: its journaled write waits for a quiet file
                # the person's edit since: it, not the write it supersedes, is the file
                st.done_vault_write_txn(conn, entry_id)
            if h == s.file_hash and h == s.shown_hash:
                ledger.record_stat(s, fs.size, fs.mtime_ns, now_ns)
                st.put_state_txn(conn, s)
                continue
            try:
                entry, markers = md.read_file(ledger.vault, entry_id, fs.os_path, data)
            except EntryError as e:
                report.problems.append(md.Problem(fs.path.relative_to(ledger.vault)
                                                  .as_posix(), e.line, str(e), entry_id))
                continue
            if ledger.blobs is not None and is_attachment(entry):
                ledger.blobs.cache.put(h, data)  # what the upload and other writes read
            file_base = s.file_base
            shown_marker = s.shown_marker
            s.file_base = entry
            s.file_hash = s.shown_hash = h
            s.shown_marker = marker_tag(markers)
            ledger.record_stat(s, fs.size, fs.mtime_ns, now_ns)
            if s.held:
                c = st.get_conflict_txn(conn, entry_id)
                if markers.get("conflict"):
                    s.local = entry  # edited, still marked: still held
                elif c is None or shown_marker == conflict_tag(c):
                    # the person removed the marker this file showed: the resolution
                    s.local = entry
                    s.held = False
                    st.drop_conflict_txn(conn, entry_id)
                else:
                    # no marker, but none was ever shown here (the sync that held the entry
                    # was still to write it when the person saved), or it named an older
                    # version of theirs: not a resolution of this conflict. The file is
                    # ours now, merged against theirs again
                    ours: Entry | None = entry
                    if file_base is not None and not same(file_base, s.local):
                        r = merge_entry(file_base, entry, s.local)
                        ours = r.entry if r.clean else entry
                    _remerge_held_txn(ledger, conn, s, c, ours, report)
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
            if entry_id in writing:
                if s.shown_hash is None:
                    continue  # nothing shown here yet (a create still to be carried out)
                st.done_vault_write_txn(conn, entry_id)  # deleted before its write
            elif s.shown_hash is None:
                s.shown_hash = s.file_hash  # recorded before the store knew what was shown
            _fold_missing_txn(ledger, conn, s, report)
            st.put_state_txn(conn, s)
            report.local_changes.append(entry_id)
    report.problems.sort(key=lambda p: p.path)


def _fold_missing_txn(ledger: Ledger, conn: Conn, s: EntryState, report: SyncReport
                      ) -> None:
    """The file of ``s`` is gone: a delete of what it showed (``file_base``). A held entry
    whose marker the file showed is resolved by the delete; a store that moved on since
    the file showed (a pulled version, a merge) makes it an edit/delete conflict, held,
    the file shown again with theirs and its marker; else a plain local delete."""
    file_base, shown_marker = s.file_base, s.shown_marker
    s.file_hash = s.file_size = s.file_mtime_ns = None
    s.file_base = None
    s.shown_hash = s.shown_marker = None
    if s.held:
        c = st.get_conflict_txn(conn, s.id)
        if c is None or shown_marker == conflict_tag(c):
            s.local = None  # resolved by delete
            s.held = False
            st.drop_conflict_txn(conn, s.id)
        else:
            _remerge_held_txn(ledger, conn, s, c, None, report)
        return
    if file_base is None or same(file_base, s.local):
        s.local = None  # what the file showed is what the store holds: a plain delete
        return
    result = merge_entry(file_base, None, s.local)
    if result.clean:
        s.local = result.entry if result.entry is not None and not result.entry.deleted \
            else None
        report.merged.append(s.id)
        ledger.schedule_write_txn(conn, s)
        return
    # a version the file never showed: never deleted unseen
    st.put_conflict_txn(conn, Conflict(
        s.id, list(result.conflicts), file_base, None, s.local, None, None,
        result.body_with_markers, ledger.clock()))
    s.local = None
    s.held = True
    report.held.append(s.id)
    ledger.schedule_write_txn(conn, s)


def _remerge_held_txn(ledger: Ledger, conn: Conn, s: EntryState, c: Conflict,
                      ours: Entry | None, report: SyncReport) -> None:
    """A held entry's file changed without resolving it (its marker was never shown there,
    or named an older theirs): ``ours`` (the file's entry; None: deleted) is merged with
    theirs against the conflict's base again. Clean: taken, no longer held, and written
    back; still conflicting: held with ``ours`` as its new ours, the marker shown again. A
    conflict that is no merge (a blocked or purged version) stays held with ``ours``."""
    fixed = special(c)
    result = merge_entry(c.base, ours, c.theirs)
    if result.clean and not fixed:
        s.local = result.entry if result.entry is not None and not result.entry.deleted \
            else None
        s.held = False
        st.drop_conflict_txn(conn, s.id)
        report.merged.append(s.id)
    else:
        if not fixed:
            c.fields = list(result.conflicts)
            c.body_with_markers = result.body_with_markers
        c.ours = ours
        st.put_conflict_txn(conn, c)
        s.local = ours
        report.held.append(s.id)
    ledger.schedule_write_txn(conn, s)


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

