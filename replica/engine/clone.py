"""Taking the hub's snapshot, the clone half of the sync engine (``Snapshots``, mixed into
``replica.engine.sync.Replica``): the state at one signed head, applied as it streams in chunks of
``CHUNK`` entries in one transaction that commits only when the store adds up to the head's
state root; local changes are replayed on top (merged three-way). Entries new to this vault
are written by the vault writers (replica/engine/clone_writers.py) while the next chunk is received.

    snapshot ── _snapshot_head (signed head, epoch path, purged)
             └─ tx: purged dropped, _snapshot_txn ── chunk: _snapshot_chunk_txn ─┐
                                                  ◄───────────────────────────────┘
                    then entries not listed merged as absent, outbox of other epochs
                    dropped, history, state root checked against the signed head
"""

from __future__ import annotations

import os
import time
from typing import Any

from replica.engine import clone_writers as vaultwriter
from replica.engine import restored
from replica.engine.crash import crash_point
from replica.engine.purge import drop_purged_txn, purged_by
from replica.engine.report import SyncReport
from replica.hubclient.client import HubClient, HubUnverified
from replica.store import store as st
from replica.store.db import Conn
from replica.store.records import stored_entry
from replica.store.store import EntryState, Head, Store
from replica.trust import verify
from replica.vault import created as clonefiles
from replica.vault import faults as vaultfaults
from replica.vault import markdown as md
from shared.entry import Entry
from shared.signed import SignedHead

RACY_NS = 2_000_000_000  # a file modified this recently is hashed even if its stat matches
CHUNK = 2000  # snapshot entries a chunk (what the vault writers get at a time)


def settled_mtime_ns() -> int:
    """The mtime given to the files a sync writes: older than the racy window, so their
    stat is trusted at once, and older than any later edit, which therefore changes it."""
    return time.time_ns() - RACY_NS - 1_000_000_000


class Snapshots:
    """The snapshot half of ``Replica``: what it reads of the replica, and the merge of one
    entry it calls (replica/engine/sync.py)."""

    space_id: str
    vault: Any
    store: Store
    client: HubClient
    progress: Any
    clock: Any
    # crossing a restore from backup: entries whose held state is republished
    # (replica/engine/restored.py); set for one snapshot, empty otherwise
    _republish: set[str] = set()
    _restore: tuple[list[Any], Any] | None = None

    def _merge_remote_txn(self, conn: Conn, theirs: Entry | None, report: SyncReport, *,
                          entry_id: str | None = None, author: dict[str, Any] | None = None,
                          seq: int | None = None) -> None:
        raise NotImplementedError  # the engine's merge (replica/engine/sync.py)

    def _schedule_write_txn(self, conn: Conn, s: EntryState) -> None:
        raise NotImplementedError  # the engine's journaled vault write (replica/engine/sync.py)

    def _snapshot_head(self, first: Any, fresh: SignedHead | None
                       ) -> tuple[SignedHead, dict[str, str]]:
        """The snapshot's head, signed, with the path of epoch statements to it from ours
        (verify.snapshot_path); and the entries that path purged (id → reason)."""
        if not isinstance(first, dict):
            raise HubUnverified("snapshot does not start with its head")
        signed = self.client.verified_head(first.get("head"), self.space_id)
        # epoch statements: signed when made, by the key then
        parsed, path = verify.snapshot_path(self.client.hub_keys, self.space_id,
                                            self.store.head(), signed, first.get("epochs"),
                                            fresh)
        if path:
            self._restore = (parsed, restored.restore_point(path))
        return signed, purged_by(path)

    def snapshot(self, report: SyncReport, fresh: SignedHead | None = None) -> None:
        """Take the hub's state at one signed head and replay every local change on top of
        it, in one transaction that commits only when the store then adds up to the head's
        state root. Files created for entries new to this vault are removed if it does not
        (nothing else is written before the commit: vault writes are journaled)."""
        report.snapshot = True
        self._restore = None
        lines = self.client.snapshot_lines(self.space_id)
        first = next(lines)
        signed, purged = self._snapshot_head(first, fresh)
        expected = vaultwriter.count_hint(first)  # (progress, writer processes)
        new_head = Head(signed.epoch, signed.seq, signed.digest)
        mtime_ns = settled_mtime_ns()
        clonefiles.mark(self.vault, self.store, mtime_ns)  # committed before any file
        try:
            with self.store.tx() as conn:
                if self._restore is not None and self._restore[1] is not None:
                    self._republish = restored.republish_ids_txn(conn, *self._restore)
                if purged:  # before any entry: nothing of them is merged or kept
                    drop_purged_txn(conn, purged, report, self._schedule_write_txn,
                                    self.clock())
                    self._republish = self._republish - set(purged)  # not republished
                self._snapshot_txn(conn, lines, signed, new_head, report, expected, mtime_ns)
                clonefiles.done_txn(conn)
        except Exception:  # refused: this clone's files go (a kill leaves them to the next
            clonefiles.repair(self.vault, self.store)  # sync's flush_vault, which repairs)
            raise
        finally:
            self._republish = set()

    def _snapshot_txn(self, conn: Conn, lines: Any, signed: SignedHead, new_head: Head,
                      report: SyncReport, expected: int | None, mtime_ns: int) -> None:
        count = 0
        index = st.snapshot_index_txn(conn)
        bulk = not index  # an empty store: loaded without triggers, its state rebuilt
        if bulk:
            st.triggers_off_txn(conn)
        seen: set[str] = set()
        chunk: list[bytes] = []
        writer = vaultwriter.start(self.vault, mtime_ns, expected, index,
                                   lambda: crash_point("mid_vault_write"))
        try:
            for line in lines:
                if isinstance(line, dict):
                    continue  # the end line (the stream refuses anything after it)
                chunk.append(line)
                count += 1
                if len(chunk) >= CHUNK:
                    self._snapshot_chunk_txn(conn, chunk, writer, seen, report)
                    chunk = []
                    crash_point("mid_clone")  # a chunk is in the writers' hands
                    if self.progress:
                        self.progress(count, expected)
            for last in (chunk, []):  # then the writers' last chunk is recorded
                self._snapshot_chunk_txn(conn, last, writer, seen, report)
            writer.durable()  # every file flushed, while the rest is checked
            self._snapshot_end_txn(conn, index, seen, new_head, report)
            if bulk:
                st.triggers_on_txn(conn)
                verify.rebuild_state_txn(conn, writer.lattices_of)
            verify.check_root_txn(conn, signed, "snapshot")
            st.cached_digest_txn(conn)  # what status shows next, made while files flush
            writer.flushed()  # only the commit records the files, once they are durable
        finally:
            writer.close()

    def _snapshot_end_txn(self, conn: Conn, index: vaultwriter.Index, seen: set[str],
                          new_head: Head, report: SyncReport) -> None:
        """After the last entry: the new head; entries not listed are gone there; the
        outbox of other epochs dropped; the snapshot in the history."""
        st.set_head_txn(conn, new_head)
        for eid in index:
            if eid not in seen:
                self._merge_remote_txn(conn, None, report, entry_id=eid)
        for row in st.outbox_txn(conn):
            if row["body"]["epoch"] != new_head.epoch:
                # made in another epoch: it can never be accepted; its changes are still
                # dirty in the store and go out in a new batch
                st.drop_outbox_txn(conn, row["batch_id"])
        st.add_history_txn(conn, epoch=new_head.epoch, seq=new_head.seq,
                           head=new_head.digest, kind="snapshot", entries=sorted(seen))

    def _snapshot_chunk_txn(self, conn: Conn, lines: list[bytes], writer: Any,
                            seen: set[str], report: SyncReport) -> None:
        """Take back what the writers made of the chunk before (vaultwriter.py), hand them
        ``lines``, and record that chunk while they work: a new entry with the file they
        created (one row), a known or found one merged; a listed-twice one refuses it."""
        if lines:
            crash_point("before_vault_write")
        done, refusal = writer.result()
        if refusal is not None:
            raise vaultwriter.refused(refusal)
        if lines:
            writer.submit(lines)
        rows = []
        vault = os.fspath(self.vault)
        for status, eid, seq, version, text, file_hash, size in done:
            if eid in seen:
                raise HubUnverified("snapshot lists an entry twice", {"id": eid})
            seen.add(eid)
            if status == vaultwriter.NEW:
                rows.append((eid, text, version, file_hash, size, writer.mtime_ns))
            elif status != vaultwriter.HAVE:  # same here and there, file written: skipped
                entry = stored_entry(text, version)  # checked by the writer
                if status == vaultwriter.FOUND:  # a file was there: merged, not overwritten
                    vaultfaults.adopt_file_txn(conn, self.vault, eid,
                                               md.entry_os_path(vault, eid))
                self._merge_remote_txn(conn, entry, report, seq=seq)
        st.insert_cloned_txn(conn, rows)
