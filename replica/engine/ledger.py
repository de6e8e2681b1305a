"""The ledger: the one owner of what a sync records about each entry, shared by the parts of
the engine that move it (the scan, replica/engine/scan.py; the pull, replica/engine/pull.py;
the snapshot, replica/engine/clone.py; the push, replica/engine/push.py) and by the conflict
desk (replica/conflicts/desk.py). They receive a ``Ledger``; none reaches into another.

Each entry's state (``EntryState``, replica/store/records.py) holds what the hub has
(``synced``), what this replica has (``local``), whether it is held as a conflict, and what
its vault file showed when it was last written or read: its hash, its stat (size and mtime;
None when not to be trusted) and the entry it showed (``file_base``). A decision that
changes what a file should show journals the write in the same transaction
(``schedule_write_txn``); ``flush_vault`` carries the journal out, never over a person's
edit, and records what each file then shows.

What a file showed (``shown_hash``, ``shown_marker``, ``file_base``) is recorded only where
its content is known: when a journaled write is carried out (``_flush_chunk``), when the
scan reads a file or finds it gone (replica/engine/scan.py), when a snapshot creates it. A
journaled write is only an intention: a person may save, delete or rename the file before it
is carried out, and their edit is then based on what the file showed, not on what the store
meant to write (docs/decisions.md, "What the file showed"). A write is carried out only when
the file still shows what it showed (or already what is written), and never while it is
being written: modified within the quiet period (``QUIRE_VAULT_QUIET_MS``) or open for
writing, it waits (its journal row kept, nothing recorded) and is retried by the next flush.

    pulled change, snapshot entry ──► merge_remote_txn ──┐
    a vault file read (scan.py) ─────────────────────────┼──► schedule_write_txn ──► journal
    a resolution (conflicts/desk.py) ────────────────────┘                              │
    a receipt ──► apply_receipt_txn (synced moves)      flush_vault: files written ◄────┘
                                                        and recorded (record_stat)
"""

from __future__ import annotations

import os
import stat as statmod
import time
from collections.abc import Callable, Container
from pathlib import Path
from typing import Any

from replica.engine import blobs, changes
from replica.engine.crash import crash_point
from replica.engine.markers import conflict_marker, marker_tag
from replica.engine.merge import merge_entry, same
from replica.engine.report import SyncReport
from replica.engine.resolutions import forget_resolutions_txn, merged_txn
from replica.store import store as st
from replica.store.db import Conn
from replica.store.records import version_of
from replica.store.store import Conflict, EntryState, Head, Store
from replica.vault import created as clonefiles
from replica.vault import faults as vaultfaults
from replica.vault import files as vlt
from replica.vault import markdown as md
from replica.vault import presence as vault_presence
from shared.attachments import is_attachment
from shared.digest import chain_next
from shared.entry import Entry
from shared.wire import Batch

CHUNK = 2000  # journaled vault writes per transaction
BLOB_CHUNK = 16  # attachments among them: their bytes are held until the chunk is written
RACY_NS = 2_000_000_000  # a file modified this recently is hashed even if its stat matches
QUIET_ENV = "QUIRE_VAULT_QUIET_MS"
QUIET_MS = 1000  # a file modified this recently is not written over (docs/settings.md)


def quiet_ms_from_env() -> int:
    """``QUIRE_VAULT_QUIET_MS`` (default 1000; 0: only an open writer defers a write)."""
    raw = os.environ.get(QUIET_ENV, "")
    try:
        return max(0, int(raw)) if raw else QUIET_MS
    except ValueError:
        return QUIET_MS


def settled_mtime_ns(quiet_ms: int = 0) -> int:
    """The mtime given to the files a sync writes: older than the racy window, so their
    stat is trusted at once, older than any later edit, which therefore changes it, and
    older than the quiet period (``quiet_ms``), so a sync never waits for its own write."""
    return time.time_ns() - max(RACY_NS, quiet_ms * 1_000_000) - 1_000_000_000


def _chunks(pending: list[tuple[str, str | None, str | None]]
            ) -> list[list[tuple[str, str | None, str | None]]]:
    """The journal in chunks of at most ``CHUNK`` writes, ``BLOB_CHUNK`` of them
    attachments (a chunk's bytes are in memory until it is written)."""
    out: list[list[tuple[str, str | None, str | None]]] = [[]]
    n_blobs = 0
    for row in pending:
        is_blob = bool(blobs.journaled_blob(row[1]))
        if len(out[-1]) >= CHUNK or (is_blob and n_blobs >= BLOB_CHUNK):
            out.append([])
            n_blobs = 0
        out[-1].append(row)
        n_blobs += is_blob
    return [c for c in out if c]


class Ledger:
    """The entry states of one space's store and the journal of its vault's writes; the
    caller holds the space lock."""

    def __init__(self, vault: Path, store: Store, clock: Callable[[], int],
                 quiet_ms: int | None = None):
        self.vault = vault
        self.store = store
        # attachments' bytes: the blob cache beside the store, fetched through the hub
        # client the sync engine sets (replica/engine/blobs.py)
        self.blobs: blobs.Blobs | None = None
        self.clock = clock  # Unix ms: also when a file counts as being written (quiet_ms)
        self.quiet_ms = quiet_ms_from_env() if quiet_ms is None else quiet_ms
        # dirty edits a merge found equal to a pulled version (replica/engine/blocked.py);
        # emptied by the sync before its pull
        self.absorbed: dict[str, Entry] = {}

    # ------------------------------------------------------------ a file's record

    @staticmethod
    def record_stat(s: EntryState, size: int, mtime_ns: int, now_ns: int) -> None:
        """Record the stat of the file of ``s`` as seen at ``now_ns``."""
        s.file_size = size
        # racily clean: an edit within the same clock tick would keep size and mtime, so a
        # file this fresh is hashed again next time (git does the same)
        s.file_mtime_ns = mtime_ns if now_ns - mtime_ns > RACY_NS else None

    @staticmethod
    def shown(conn: Conn, s: EntryState) -> tuple[Entry | None, dict[str, Any] | None]:
        """The entry the vault file of ``s`` shows, with its local marker (None: no file)."""
        if s.held:
            c = st.get_conflict_txn(conn, s.id)
            shown = s.local if s.local is not None and not s.local.deleted else (
                c.theirs if c is not None else None)
            if shown is None or shown.deleted or c is None:
                return None, None
            return shown, conflict_marker(c)
        if s.local is None or s.local.deleted:
            return None, None
        return s.local, None

    def schedule_write_txn(self, conn: Conn, s: EntryState) -> None:
        """Journal the write that makes the file of ``s`` show it (none when it already
        does); the caller puts ``s``, whose file record now names that write."""
        shown, marker = self.shown(conn, s)
        if shown is not None and is_attachment(shown):  # its bytes, from the blob cache
            content: str | None = blobs.journal_content(shown)
            new_hash: str | None = md.shown_hash(shown)
        elif shown is None and is_attachment(s.file_base or s.synced):
            content, new_hash = blobs.BLOB_PREFIX, None  # the attachment's file goes
        else:
            content = None if shown is None else md.render(shown, marker).decode("utf-8")
            new_hash = None if content is None else md.file_hash(content.encode("utf-8"))
        if new_hash == s.file_hash:
            return
        st.add_vault_write_txn(conn, s.id, content, s.file_hash)
        s.file_hash = new_hash
        s.file_size = s.file_mtime_ns = None

    # ------------------------------------------------------------ store → vault

    def flush_vault(self) -> dict[str, int]:
        """Carry out journaled vault writes (also after a crash), never over a person's edit
        and never over a file being written; first remove what a cut clone left unrecorded
        (replica/vault/created.py). Never into a vault that is gone
        (replica/vault/presence.py). Returns the writes that wait for their file to be
        quiet: entry id → when to retry (Unix ms, by ``clock``); they stay journaled."""
        vault_presence.check(self.vault, self.store)
        clonefiles.repair(self.vault, self.store)
        pending = self.store.pending_vault_writes()
        waiting: dict[str, int] = {}
        if not pending:
            return waiting
        crash_point("before_vault_write")
        self._move_renamed(pending)
        for chunk in _chunks(pending):
            self._flush_chunk(chunk, waiting)
        return waiting

    def _move_renamed(self, pending: list[tuple[str, str | None, str | None]]) -> None:
        """A pulled rename journals the delete of X (its file showing bytes h) and the
        write of Y (no file shown) with those same bytes h: the file is moved instead, so
        it stays one file (an editor holding it sees a rename); the writes then find both
        done. Anything else at either path (an edit, a file being written, a file at Y) is
        left to the writes as journaled."""
        gone = {shown: eid for eid, content, shown in pending
                if content is None and shown is not None}
        if not gone:
            return
        now_ms = self.clock()
        for eid, content, shown in pending:
            if content is None or shown is not None:
                continue
            data = content.encode("utf-8")
            src_id = gone.pop(md.file_hash(data), None)
            if src_id is None:
                continue
            src, dst = md.entry_path(self.vault, src_id), md.entry_path(self.vault, eid)
            if vaultfaults.behind_link(self.vault, src) or \
                    vaultfaults.behind_link(self.vault, dst) or os.path.lexists(dst):
                continue
            try:
                info = os.lstat(src)
                if not statmod.S_ISREG(info.st_mode) or md.file_hash(src.read_bytes()) != \
                        md.file_hash(data) or self._busy_until(src, info, now_ms) is not None:
                    continue
                vlt.move(self.vault, src, dst, vlt.file_key(info))
            except OSError:
                continue  # the journaled writes settle it

    def _busy_until(self, path: Path, info: os.stat_result, now_ms: int) -> int | None:
        """None when the file at ``path`` may be written over now; else when to try again
        (Unix ms): it was modified within the quiet period (an editor that writes a save in
        steps pauses between them), or someone holds it open for writing."""
        quiet_ns = self.quiet_ms * 1_000_000
        age_ns = now_ms * 1_000_000 - info.st_mtime_ns
        # an mtime far in the future (a copy from a machine whose clock is ahead) says
        # nothing about a writer now; one just ahead (clocks a tick apart) counts
        if -quiet_ns < age_ns < quiet_ns:
            return (info.st_mtime_ns + quiet_ns) // 1_000_000 + 1
        if vlt.open_for_writing(path):
            return now_ms + max(self.quiet_ms, 100)
        return None

    def _flush_chunk(self, pending: list[tuple[str, str | None, str | None]],
                     waiting: dict[str, int]) -> None:
        """Journaled writes, files first (two file-system flushes for the chunk), then one
        transaction recording them and clearing the journal. A crash in between leaves the
        journal: the next run finds the files already written and only records them.

        Each write is checked against the file: it goes only when the file still shows what
        it last showed (``shown_hash``) or already what is written; anything else is the
        person's edit, which wins: the write is dropped and nothing recorded, so the scan
        folds their file three-way against what it showed. A file being written (modified
        within the quiet period, or open for writing) is not written over: the write waits
        in the journal (``waiting``), nothing recorded; and a file that changes between
        this check and its rename is left alone the same way (``write_many``)."""
        now_ms = self.clock()
        decided = []
        writes: list[tuple[Path, bytes]] = []
        expected: dict[str, vlt.FileKey | None] = {}
        for entry_id, content, shown_hash in pending:
            blob = blobs.journaled_blob(content)
            path = md.entry_path(self.vault, entry_id) if blob is None else \
                md.attachment_path(self.vault, entry_id)
            if content is None and not os.path.lexists(path):
                # a delete of whatever file the entry had: an attachment's has no .md (a
                # purge clears what the entry was before it journals the removal)
                other = md.attachment_path(self.vault, entry_id)
                path = other if os.path.lexists(other) else path
            if vaultfaults.behind_link(self.vault, path):
                continue  # kept journaled: done once the folder is a folder again
            if blob is None:
                data = None if content is None else content.encode("utf-8")
            elif not blob:
                data = None  # an attachment deleted
            else:
                data = self.blobs.cache.read(blob) if self.blobs is not None else None
                if data is None:
                    continue  # not fetched (lazy): kept journaled until it is
            new_hash = None if data is None else md.file_hash(data)
            current = None
            try:
                info: os.stat_result | None = os.lstat(path)
            except FileNotFoundError:
                info = None
            except OSError:
                continue  # unreadable: kept journaled, reported by the scan
            try:
                if info is None:
                    current = None
                elif statmod.S_ISLNK(info.st_mode):
                    current = "symlink"
                elif statmod.S_ISREG(info.st_mode):
                    current = md.file_hash(path.read_bytes())
                else:
                    current = "not a file"
            except FileNotFoundError:
                info = current = None
            except OSError:
                continue  # unreadable: kept journaled, reported by the scan
            if current not in (shown_hash, new_hash):
                # the file changed since it last showed what the store knows: the person's
                # edit wins; the write goes and the scan folds their file (three-way)
                decided.append((entry_id, path, data, new_hash, False))
                continue
            touches = current is not None if data is None else current != new_hash
            if touches and info is not None:
                wait = self._busy_until(path, info, now_ms)
                if wait is not None:
                    waiting[entry_id] = wait  # kept journaled, nothing recorded
                    continue
            if touches and data is None:
                assert info is not None
                if not vlt.remove(self.vault, path, vlt.file_key(info)):
                    waiting[entry_id] = now_ms + self.quiet_ms  # it changed meanwhile
                    continue
            elif touches:
                assert data is not None
                writes.append((path, data))
                expected[os.fspath(path)] = None if info is None else vlt.file_key(info)
            decided.append((entry_id, path, data, new_hash, True))
        if writes:
            done = {os.fspath(p) for p in vlt.write_many(
                self.vault, writes, crash_hook=lambda: crash_point("mid_vault_write"),
                mtime_ns=settled_mtime_ns(self.quiet_ms), expected=expected)}
            left = {os.fspath(p) for p, _data in writes} - done
            if left:  # changed between the check and the rename: kept journaled
                for d in [d for d in decided if os.fspath(d[1]) in left]:
                    decided.remove(d)
                    waiting[d[0]] = now_ms + self.quiet_ms
        crash_point("vault_written")
        with self.store.tx(durable=False) as conn:  # files flushed: if lost, redone (Store.tx)
            now_ns = time.time_ns()
            for entry_id, path, data, new_hash, ok in decided:
                s = st.get_state_txn(conn, entry_id)
                if ok and data is not None:
                    try:
                        stat = path.lstat()
                    except FileNotFoundError:  # removed since: the scan finds it gone
                        s.file_size = s.file_mtime_ns = None
                    else:
                        self.record_stat(s, stat.st_size, stat.st_mtime_ns, now_ns)
                    # the file now shows this entry: a later edit of it is based on it
                    shown, marker = self.shown(conn, s)
                    if shown is None or md.shown_hash(shown, marker) != new_hash:
                        shown, marker = md.read_file(self.vault, entry_id,
                                                     os.fspath(path), data)
                    s.file_base = shown
                    s.shown_hash, s.shown_marker = new_hash, marker_tag(marker)
                elif ok:
                    s.file_hash = s.file_size = s.file_mtime_ns = None
                    s.file_base = None
                    s.shown_hash = s.shown_marker = None
                st.put_state_txn(conn, s)
                st.done_vault_write_txn(conn, entry_id)

    # ------------------------------------------------------------ hub → store

    def merge_remote_txn(self, conn: Conn, theirs: Entry | None, report: SyncReport, *,
                         entry_id: str | None = None, author: dict[str, Any] | None = None,
                         seq: int | None = None, republish: Container[str] = ()) -> None:
        """Fold the hub's state of one entry into the store (theirs None: absent), three-way
        against its synced version. ``republish``: entries whose held state a snapshot
        crossing a restore republishes (replica/engine/restored.py)."""
        eid = entry_id or (theirs.id if theirs is not None else "")
        if self.blobs is not None and is_attachment(theirs):
            # its bytes, checked against the hash the signed entry names, before the store
            # takes it: a hub serving other bytes rolls this transaction back
            self.blobs.ensure(theirs)
        s = st.get_state_txn(conn, eid)
        if eid in republish and not s.held:
            s.synced = theirs  # the restored state is the base; ours stays and goes out
            if not same(s.local, theirs):
                report.republished.append(eid)
            self.schedule_write_txn(conn, s)
            st.put_state_txn(conn, s)
            return
        base = s.synced
        was_dirty = s.dirty
        s.synced = theirs
        if s.held:
            c = st.get_conflict_txn(conn, eid)
            if same(s.local, theirs) or c is None:
                s.held = False
                st.drop_conflict_txn(conn, eid)
            else:
                c.theirs, c.theirs_author, c.theirs_seq = theirs, author, seq
                st.put_conflict_txn(conn, c)
                # still held, now against a newer remote version: this sync held it too
                # (a report that left it out told an agent "nothing held" in state conflicts)
                report.held.append(eid)
        elif not was_dirty:
            s.local = theirs if theirs is not None and not theirs.deleted else None
        else:
            result = merge_entry(base, s.local, theirs)
            if result.clean and s.local is not None and same(s.local, theirs):
                self.absorbed[eid] = s.local
            if result.clean:
                # a pending resolution merged with the pulled version stays the resolver's
                merged_txn(conn, eid, version_of(s.local), version_of(result.entry))
                s.local = result.entry
                report.merged.append(eid)
            elif is_attachment(s.local) or is_attachment(theirs):
                # bytes have no lines to merge and no marker to show: never held. Ours stays
                # at its name and goes out on top; theirs, a file too, is kept beside it as
                # a new attachment; our delete gives way to their edit. Nothing is lost
                if s.local is None or s.local.deleted:
                    s.local = theirs if theirs is not None and not theirs.deleted else None
                elif is_attachment(theirs):
                    assert theirs is not None
                    self._keep_beside_txn(conn, theirs, report)
                report.merged.append(eid)
            else:
                s.held = True
                st.put_conflict_txn(conn, Conflict(
                    eid, list(result.conflicts), base, s.local, theirs, author, seq,
                    result.body_with_markers, self.clock()))
                report.held.append(eid)
        self.schedule_write_txn(conn, s)
        st.put_state_txn(conn, s)

    def _keep_beside_txn(self, conn: Conn, theirs: Entry, report: SyncReport) -> None:
        """Theirs of an attachment changed on both sides, as a new local attachment next to
        ours (``diagram (theirs).png``), published by the next push."""
        def taken(eid: str) -> bool:
            other = st.get_state_txn(conn, eid)
            return other.local is not None or other.synced is not None or other.held

        copy = blobs.copy_beside(theirs, taken)
        if copy is None:
            return  # no free name within the id limits: theirs stays in the history
        ns = st.get_state_txn(conn, copy.id)
        ns.local = copy
        self.schedule_write_txn(conn, ns)
        st.put_state_txn(conn, ns)
        report.local_changes.append(copy.id)

    # ------------------------------------------------------------ push → store

    @staticmethod
    def apply_receipt_txn(conn: Conn, batch: Batch, receipt: dict[str, Any],
                          report: SyncReport | None = None) -> bool:
        """Record an accepted batch; True when the local head moved onto it.

        The head moves only when the receipt's link from the local head verifies (the batch
        landed right after it). A batch the hub rebased onto a later head (receipt seq
        beyond local seq + 1) leaves the head where it is: its ops are marked synced and
        the pull that follows brings every batch before it, then this one as a no-op (an
        edit made meanwhile stays dirty). Never skip a remote batch, never lose an edit."""
        head = st.head_txn(conn)
        seq = receipt["seq"]
        if head is not None and head.epoch == batch.epoch and seq <= head.seq:
            # already pulled (the pull applied it and everything after it): nothing to mark
            st.save_receipt_txn(conn, batch.batch_id, receipt)
            st.drop_outbox_txn(conn, batch.batch_id)
            return True
        # what it changed, page by page, before its versions become the synced ones
        detail = changes.record_txn(conn, [op.entry_id for op in batch.ops],
                                    [op.entry for op in batch.ops], batch.provenance)
        for op in batch.ops:
            s = st.get_state_txn(conn, op.entry_id)
            s.synced = op.entry
            st.put_state_txn(conn, s)
        moved = (head is not None and head.epoch == batch.epoch and seq == head.seq + 1
                 and chain_next(head.digest, batch.digest) == receipt["head"])
        if moved:
            st.set_head_txn(conn, Head(batch.epoch, seq, receipt["head"]))
            st.add_history_txn(conn, epoch=batch.epoch, seq=seq, head=receipt["head"],
                               kind="push", entries=[op.entry_id for op in batch.ops],
                               batch_id=batch.batch_id, replica_id=batch.replica_id,
                               batch_digest=batch.digest,
                               accepted_at=receipt.get("accepted_at"), detail=detail)
            if report is not None:
                report.changes.append(changes.change(
                    "pushed", epoch=batch.epoch, seq=seq, at=receipt.get("accepted_at"),
                    author=None, own=True, detail=detail))
        else:  # the pull that brings it applies it as a no-op: the detail waits for it
            st.set_meta_txn(conn, changes.pushed_key(batch.batch_id), detail)
        st.save_receipt_txn(conn, batch.batch_id, receipt)
        st.drop_outbox_txn(conn, batch.batch_id)
        forget_resolutions_txn(conn, [op.entry_id for op in batch.ops])
        return moved
