"""The sync engine of one joined space (docs/replica.md, "Sync"; docs/architecture.md, "A sync").

A sync run: finish vault writes a crash left half done; scan the vault for local edits;
pull the hub's changes (or a snapshot when the epoch changed or history is gone) and merge
each entry three-way against its synced version; push the outbox, looping on
``head_changed`` with a bound; apply; write status.

Invariants that make a SIGKILL at any point harmless:

- the outbox batch (id, digest, signature) is committed before it is sent; the next run
  either finds it in the pulled history (accepted: nothing to resend), resends it unchanged
  (its parent is still the head: replay returns the same receipt), or drops it because the
  hub has moved on without it (it can never be accepted: its parent is gone);
- a local change stays "dirty" (local != synced) until a receipt or a pulled batch makes the
  synced version equal to it, so nothing is lost and nothing is published twice;
- vault writes are journaled in the same transaction that decides them and replayed by the
  next run, unless a person edited the file in between (then their edit wins and is scanned).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from replica.engine import blocked, deleted
from replica.engine.clone import RACY_NS, Snapshots, settled_mtime_ns
from replica.engine.crash import crash_point
from replica.engine.markers import conflict_marker
from replica.engine.merge import merge_entry, same
from replica.engine.purge import compact_store
from replica.engine.push import Publisher
from replica.engine.report import SyncReport
from replica.engine.scan import fold_vault
from replica.hubclient.client import Change, ChangesPage, HubClient, HubUnverified
from replica.store import store as st
from replica.store.db import Conn
from replica.store.store import Conflict, EntryState, Head, Store
from replica.trust import audit_tips as auditcheck
from replica.trust import verify
from replica.vault import created as clonefiles
from replica.vault import faults as vaultfaults
from replica.vault import files as vlt
from replica.vault import markdown as md
from replica.vault import presence as vault_presence
from replica.vault.walk import Prefetch
from shared.entry import Entry
from shared.errors import SnapshotRequired, SpaceDeleted
from shared.signed import SignedHead

CHUNK = 2000  # journaled vault writes per transaction

Progress = Callable[..., None]  # (done, total[, unit]): replica/cli/progressbar.py


def now_ms() -> int:
    return int(time.time() * 1000)


class Replica(Snapshots, Publisher):
    """Sync engine for one space; the caller holds the space lock. Publishing (outbox,
    batches, receipts) is in ``replica/engine/push.py``, taking a snapshot in ``replica/engine/clone.py``."""

    # a running watcher's journal for the next scan (replica/vault/journal_scan.py); None: walk
    journal: Any = None

    def __init__(self, *, space_id: str, replica_id: str, vault: Path, store: Store,
                 client: HubClient, key: Ed25519PrivateKey,
                 clock: Callable[[], int] = now_ms, progress: Progress | None = None,
                 provenance: dict[str, str] | None = None):
        self.space_id = space_id
        self.replica_id = replica_id
        self.vault = vault
        self.store = store
        self.client = client
        self.key = key
        self.clock = clock
        self.progress = progress
        self.provenance = provenance
        self.role: str | None = None
        # dirty edits a pull's merge found equal to a pulled version (replica/engine/blocked.py)
        self.absorbed: dict[str, Entry] = {}

    # ------------------------------------------------------------ the run

    def sync(self, scanned: SyncReport | None = None, walk: Prefetch | None = None
             ) -> SyncReport:
        """``scanned``: the report of a ``flush_vault`` and ``scan`` the caller has just run
        under the same lock (the watcher's look for local edits): not scanned again (an edit
        made since starts the next sync). ``walk``: the walk started under the same lock."""
        report = scanned if scanned is not None else SyncReport()
        if scanned is None:
            self.flush_vault()
            self.scan(report, walk)
        crash_point("after_scan")
        try:
            self._exchange(report)
        except SpaceDeleted as e:  # stop only on the hub's signed word (replica/engine/deleted.py)
            raise deleted.verify(self.client.hub_keys, self.space_id, e) from e
        self.flush_vault()
        if report.purged:  # the dropped bytes leave the store's files (replica/engine/purge.py)
            compact_store(self.store.path)
        return report

    def _exchange(self, report: SyncReport) -> None:
        """The hub half of a sync: resend, pull, publish."""
        self.replay_outbox(report)
        self.absorbed = {}
        self.pull(report)
        if self.absorbed:  # a blocked version the pull took back off a local edit
            with self.store.tx() as conn:
                blocked.absorbed(conn, self.client, self.space_id, self.absorbed,
                                 self.clock(), self._schedule_write_txn, report)
        crash_point("after_pull")
        self.push(report)
        if report.batches:
            self.confirm()

    def confirm(self) -> None:
        """After a push: a head signed over our nonce, at the head the receipts moved us to,
        must carry the state root the store now adds up to (recorded for ``quire verify``).
        A hub already further on is left to the next pull, which verifies it."""
        head = self.store.head()
        fresh = self.client.head(self.space_id, nonce=verify.new_nonce())["signed"]
        if head is not None and (fresh.epoch, fresh.seq, fresh.digest) == (
                head.epoch, head.seq, head.digest):
            with self.store.tx() as conn:
                verify.check_root_txn(conn, fresh, "push")

    # ------------------------------------------------------------ vault → store

    def scan(self, report: SyncReport, walk: Prefetch | None = None) -> None:
        """Fold the vault's local edits into the store (replica/engine/scan.py); with ``journal``
        set (a running watcher's), only where it saw something change; else by the walk
        ``walk`` ran ahead (replica/vault/walk.py), or one made now. A vault that is gone is
        refused, never read as every page deleted (replica/vault/presence.py)."""
        vault_presence.check(self.vault, self.store)
        fold_vault(self, report, walk)

    @staticmethod
    def _record_stat(s: EntryState, size: int, mtime_ns: int, now_ns: int) -> None:
        s.file_size = size
        # racily clean: an edit within the same clock tick would keep size and mtime, so a
        # file this fresh is hashed again next time (git does the same)
        s.file_mtime_ns = mtime_ns if now_ns - mtime_ns > RACY_NS else None

    # ------------------------------------------------------------ store → vault

    def _render(self, conn: Conn, s: EntryState) -> tuple[str | None, bool]:
        """What the vault file of ``s`` should hold (None: no file)."""
        shown, marker = self._shown(conn, s)
        if shown is None:
            return None, True
        return md.render(shown, marker).decode("utf-8"), True

    @staticmethod
    def _shown(conn: Conn, s: EntryState) -> tuple[Entry | None, dict[str, Any] | None]:
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

    def _schedule_write_txn(self, conn: Conn, s: EntryState) -> None:
        content, _ = self._render(conn, s)
        new_hash = None if content is None else md.file_hash(content.encode("utf-8"))
        if new_hash == s.file_hash:
            return
        st.add_vault_write_txn(conn, s.id, content, s.file_hash)
        s.file_hash = new_hash
        s.file_size = s.file_mtime_ns = None

    def flush_vault(self) -> None:
        """Carry out journaled vault writes (also after a crash), never over a person's edit;
        first remove what a cut clone left unrecorded (replica/vault/created.py). Never into a
        vault that is gone (replica/vault/presence.py)."""
        vault_presence.check(self.vault, self.store)
        clonefiles.repair(self.vault, self.store)
        pending = self.store.pending_vault_writes()
        if not pending:
            return
        crash_point("before_vault_write")
        for i in range(0, len(pending), CHUNK):
            self._flush_chunk(pending[i:i + CHUNK])

    def _flush_chunk(self, pending: list[tuple[str, str | None, str | None]]) -> None:
        """Journaled writes, files first (two file-system flushes for the chunk), then one
        transaction recording them and clearing the journal. A crash in between leaves the
        journal: the next run finds the files already written and only records them."""
        decided = []
        writes = []
        for entry_id, content, prev_hash in pending:
            path = md.entry_path(self.vault, entry_id)
            if vaultfaults.behind_link(self.vault, path):
                continue  # kept journaled: done once the folder is a folder again
            data = None if content is None else content.encode("utf-8")
            new_hash = None if data is None else md.file_hash(data)
            current = None
            try:
                if path.is_symlink():
                    current = "symlink"
                elif path.is_file():
                    current = md.file_hash(path.read_bytes())
            except OSError:
                continue  # unreadable: kept journaled, reported by the scan
            ok = current in (prev_hash, new_hash)
            if ok:
                if data is None:
                    vlt.remove(self.vault, path)
                elif current != new_hash:
                    writes.append((path, data))
            # else: the file changed since we decided; the person's edit wins (next scan)
            decided.append((entry_id, path, data, new_hash, ok))
        if writes:
            vlt.write_many(self.vault, writes, crash_hook=lambda: crash_point("mid_vault_write"),
                           mtime_ns=settled_mtime_ns())
        crash_point("vault_written")
        with self.store.tx(durable=False) as conn:  # files flushed: if lost, redone (Store.tx)
            now_ns = time.time_ns()
            for entry_id, path, data, new_hash, ok in decided:
                s = st.get_state_txn(conn, entry_id)
                if data is not None and path.is_file() and not path.is_symlink():
                    stat = path.stat()
                    if ok:
                        self._record_stat(s, stat.st_size, stat.st_mtime_ns, now_ns)
                        # the file now shows this entry: a later edit of it is based on it
                        shown, marker = self._shown(conn, s)
                        if shown is None or md.file_hash(md.render(shown, marker)) != new_hash:
                            shown = md.read_entry(self.vault, entry_id, data)[0]
                        s.file_base = shown
                elif data is None and ok:
                    s.file_hash = s.file_size = s.file_mtime_ns = None
                    s.file_base = None
                st.put_state_txn(conn, s)
                st.done_vault_write_txn(conn, entry_id)

    # ------------------------------------------------------------ pull

    def pull(self, report: SyncReport) -> None:
        head = self.store.head()
        kept = self.store.get_meta(auditcheck.AUDIT_TIPS)  # read before the head is asked
        # signed over a nonce of ours: a replayed old head cannot pass for the current one
        hub = self.client.head(self.space_id, nonce=verify.new_nonce())
        fresh: SignedHead = hub["signed"]
        auditcheck.check_fresh(kept, fresh)  # the hub's audit log was not cut or rewritten
        self.role = hub.get("role")
        # role and rules as the hub applies them to us: the local guardrail check of a
        # conflict resolution reads them (replica/conflicts/desk.py); the hub checks again
        access = {"role": self.role, "rules": hub.get("rules") or []}
        if self.store.get_meta("access") != access:
            self.store.set_meta("access", access)
        if hub.get("usage") and self.store.get_meta("usage") != hub["usage"]:
            self.store.set_meta("usage", hub["usage"])  # quotas, for quire status
        if head is None or fresh.epoch != head.epoch:
            self.snapshot(report, fresh)
            return
        if fresh.seq < head.seq:
            raise HubUnverified("the hub's head is behind this replica's (rolled back?)",
                                {"reason": "rollback", "hub_seq": fresh.seq,
                                 "local_seq": head.seq})
        if fresh.seq == head.seq:
            if fresh.digest != head.digest:
                raise HubUnverified("the hub's head digest differs at the same seq",
                                    {"reason": "fork", "seq": head.seq})
            with self.store.tx() as conn:  # and the store holds exactly the signed state
                verify.check_root_txn(conn, fresh, "head")
            return
        self._pull_changes(report, head, fresh.seq)

    def authors(self) -> verify.Authors:
        """Device attestations (cached in the store; fetched when a batch needs one)."""
        return verify.Authors(lambda: self.client.hub_keys, lambda: self.client.devices(
            self.space_id), self.store.get_meta(verify.DEVICES))

    def apply_page_txn(self, conn: Conn, page: ChangesPage, authors: verify.Authors,
                       report: SyncReport) -> None:
        """Apply a verified page of changes, then check that the store adds up to the state
        the hub signed at its end; raises (and the transaction rolls back) otherwise."""
        assert page.signed is not None
        # receipts are served as signed when accepted: any key of the pinned chain
        verify.check_authors(self.client.hub_keys, page.changes, authors)
        for change in page.changes:
            self._apply_change_txn(conn, change, report)
        verify.check_root_txn(conn, page.signed, "changes")
        if authors.refreshed:
            st.set_meta_txn(conn, verify.DEVICES, authors.wire)

    def _pull_changes(self, report: SyncReport, head: Head, until: int) -> None:
        authors = self.authors()
        start = head.seq  # progress: batches pulled of those the signed head says there are
        while True:
            try:
                page = self.client.changes(self.space_id, epoch=head.epoch, after=head.seq,
                                           after_digest=head.digest)
            except SnapshotRequired:
                self.snapshot(report)
                return
            # the whole page in one transaction: applied only if it adds up to the signed head
            with self.store.tx() as conn:
                self.apply_page_txn(conn, page, authors, report)
            if page.changes:
                head = Head(head.epoch, page.changes[-1].seq, page.changes[-1].head)
                report.pulled += len(page.changes)
                if self.progress:
                    self.progress(head.seq - start, max(until, head.seq) - start, "batches")
            if not page.more or not page.changes:
                return

    def _apply_change_txn(self, conn: Conn, change: Change, report: SyncReport) -> None:
        batch = change.batch
        for op in batch.ops:
            # the batch provenance rides along: conflict packets show which agent wrote theirs
            self._merge_remote_txn(conn, op.entry, report,
                                   author=dict(change.author or {}, provenance=batch.provenance),
                                   seq=change.seq)
        head = st.head_txn(conn)
        assert head is not None
        st.set_head_txn(conn, Head(head.epoch, change.seq, change.head))
        st.add_history_txn(conn, epoch=batch.epoch, seq=change.seq, head=change.head,
                           kind="batch", entries=[op.entry_id for op in batch.ops],
                           batch_id=batch.batch_id, replica_id=batch.replica_id,
                           batch_digest=batch.digest, author=change.author,
                           accepted_at=change.accepted_at)
        if batch.replica_id == self.replica_id:
            # our own batch, accepted while we were not listening: it is published (a
            # batch of ours no longer in the outbox deletes nothing; another replica's
            # batch cannot be in our outbox, so its change reads no outbox row)
            st.drop_outbox_txn(conn, batch.batch_id)

    def _merge_remote_txn(self, conn: Conn, theirs: Entry | None, report: SyncReport, *,
                          entry_id: str | None = None, author: dict[str, Any] | None = None,
                          seq: int | None = None) -> None:
        """Fold the hub's state of one entry into the store (theirs None: absent)."""
        eid = entry_id or (theirs.id if theirs is not None else "")
        s = st.get_state_txn(conn, eid)
        if eid in self._republish and not s.held:
            s.synced = theirs  # the restored state is the base; ours stays and goes out
            if not same(s.local, theirs):
                report.republished.append(eid)
            self._schedule_write_txn(conn, s)
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
                s.local = result.entry
                report.merged.append(eid)
            else:
                s.held = True
                st.put_conflict_txn(conn, Conflict(
                    eid, list(result.conflicts), base, s.local, theirs, author, seq,
                    result.body_with_markers, self.clock()))
                report.held.append(eid)
        self._schedule_write_txn(conn, s)
        st.put_state_txn(conn, s)
