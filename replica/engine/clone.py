"""Taking the hub's snapshot, the clone part of the sync engine (``Snapshotter``, one of
the parts ``replica.engine.sync.Replica`` is made of): the state at one signed head, applied
as it streams in chunks of ``CHUNK`` entries in one transaction that commits only when the
store adds up to the head's state root; local changes are replayed on top (merged
three-way, by the ledger: replica/engine/ledger.py). Entries new to this vault are written
by the vault writers (replica/engine/clone_writers.py) while the next chunk is received.

    snapshot ── _snapshot_head (signed head, epoch path, purged)
             └─ tx: purged dropped, _snapshot_txn ── chunk: _snapshot_chunk_txn ─┐
                                                  ◄───────────────────────────────┘
                    then entries not listed merged as absent, outbox of other epochs
                    dropped, history, state root checked against the signed head
"""

from __future__ import annotations

import os
from typing import Any

from replica.engine import clone_writers as vaultwriter
from replica.engine import forked, restored, scoped
from replica.engine.crash import crash_point
from replica.engine.ledger import Ledger, settled_mtime_ns
from replica.engine.purge import drop_purged_txn, purged_by
from replica.engine.report import Progress, SyncReport
from replica.engine.restored import ACCEPTED_RESTORE
from replica.hubclient.client import HubClient
from replica.store import store as st
from replica.store.db import Conn
from replica.store.records import stored_entry
from replica.store.store import Head
from replica.trust import logcheck, verify
from replica.trust import scoped as trust_scoped
from replica.vault import created as clonefiles
from replica.vault import faults as vaultfaults
from replica.vault import markdown as md
from shared import tlog
from shared.errors import HubUnverified
from shared.signed import EpochStatement, SignedHead

CHUNK = 2000  # snapshot entries a chunk (what the vault writers get at a time)


class Snapshotter:
    """Takes the hub's snapshot of one space into its store, through the ``ledger``."""

    def __init__(self, ledger: Ledger, client: HubClient, space_id: str,
                 progress: Progress | None = None):
        self.ledger = ledger
        self.client = client
        self.space_id = space_id
        self.progress = progress
        # crossing a restore from backup: entries whose held state is republished
        # (replica/engine/restored.py); set for one snapshot, empty otherwise
        self._republish: set[str] = set()
        self._restore: tuple[list[Any], Any] | None = None
        self._forked: set[str] = set()  # crossing a fork recovery (forked.py)

    def _snapshot_head(self, first: Any, fresh: SignedHead | None
                       ) -> tuple[SignedHead, dict[str, str]]:
        """The snapshot's head, signed, with the path of epoch statements to it from ours
        (verify.snapshot_path); and the entries that path purged (id → reason)."""
        if not isinstance(first, dict):
            raise HubUnverified("snapshot does not start with its head")
        signed = self.client.verified_head(first.get("head"), self.space_id)
        # epoch statements: signed when made, by the key then
        accepted = self.ledger.store.get_meta(ACCEPTED_RESTORE)  # quire accept-restore
        parsed, path = verify.snapshot_path(self.client.hub_keys, self.space_id,
                                            self.ledger.store.head(), signed,
                                            first.get("epochs"), fresh,
                                            accepted if isinstance(accepted, str) else None)
        if path:
            self._restore = (parsed, restored.restore_point(path))
            recovery = logcheck.fork_recovery(path, tuple(self.client.hub_keys), self.space_id)
            if recovery is not None:  # what we hold from the history that did not survive
                self._forked = self._lost_in_fork(recovery)
        return signed, purged_by(path)

    def _lost_in_fork(self, recovery: EpochStatement) -> set[str]:
        """Entry ids of our batches the surviving history lacks (replica/engine/forked.py),
        each head checked against the log of the checkpoint this sync just accepted."""
        store = self.ledger.store
        kept = store.get_meta(logcheck.KEPT)
        with store.tx() as conn:
            rows = forked.history_rows_txn(conn, recovery.previous)

        def on_line(seq: int, head: str) -> bool:
            if not isinstance(kept, dict):
                raise HubUnverified("a fork recovery without a checkpoint accepted for it",
                                    {"reason": "log_missing"})
            doc = self.client.admin_get(f"/v1/spaces/{self.space_id}/log/inclusion", {
                "epoch": recovery.previous, "seq": seq,
                "size": tlog.parse_checkpoint(tlog.parse_note(kept["note"]).body).size})
            return logcheck.leaf_of(doc, kept, epoch=recovery.previous,
                                    seq=seq).get("head") == head

        return forked.lost_ids(store.head(), rows, recovery, on_line)

    def snapshot(self, report: SyncReport, fresh: SignedHead | None = None) -> None:
        """Take the hub's state at one signed head and replay every local change on top of
        it, in one transaction that commits only when the store then adds up to the head's
        state root. Files created for entries new to this vault are removed if it does not
        (nothing else is written before the commit: vault writes are journaled)."""
        report.snapshot = True
        self._restore = None
        self._forked = set()
        lines = self.client.snapshot_lines(self.space_id, scoped.only_of(self.ledger.store))
        first = next(lines)
        signed, purged = self._snapshot_head(first, fresh)
        expected = vaultwriter.count_hint(first)  # (progress, writer processes)
        new_head = Head(signed.epoch, signed.seq, signed.digest)
        mtime_ns = settled_mtime_ns(self.ledger.quiet_ms)
        clonefiles.mark(self.ledger.vault, self.ledger.store, mtime_ns)  # committed first
        try:
            with self.ledger.store.tx() as conn:
                if self._restore is not None and self._restore[1] is not None:
                    self._republish = restored.republish_ids_txn(conn, *self._restore)
                self._republish = self._republish | self._forked  # D146
                if purged:  # before any entry: nothing of them is merged or kept
                    drop_purged_txn(conn, purged, report, self.ledger.schedule_write_txn,
                                    self.ledger.clock())
                    self._republish = self._republish - set(purged)  # not republished
                self._snapshot_txn(conn, lines, first, signed, new_head, report, expected,
                                   mtime_ns)
                clonefiles.done_txn(conn)
        except Exception:  # refused: this clone's files go (a kill leaves them to the next
            # sync's flush_vault, which repairs)
            clonefiles.repair(self.ledger.vault, self.ledger.store)
            raise
        finally:
            self._republish = set()

    def _snapshot_txn(self, conn: Conn, lines: Any, first: dict[str, Any], signed: SignedHead,
                      new_head: Head, report: SyncReport, expected: int | None, mtime_ns: int
                      ) -> None:
        count = 0
        index = st.snapshot_index_txn(conn)
        bulk = not index  # an empty store: loaded without triggers, its state rebuilt
        if bulk:
            st.triggers_off_txn(conn)
        seen: set[str] = set()
        end: Any = None
        chunk: list[bytes] = []
        writer = vaultwriter.start(self.ledger.vault, mtime_ns, expected, index,
                                   lambda: crash_point("mid_vault_write"))
        try:
            for line in lines:
                if isinstance(line, dict):
                    end = line.get("end")  # (the stream refuses anything after it)
                    continue
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
            # a scoped snapshot: the sums of what it left out, and the entries this store
            # held that it no longer lists dropped (held edits kept: replica/engine/scoped.py)
            scoped.snapshot_end_txn(conn, first, trust_scoped.snapshot_withheld(first, end),
                                    [eid for eid in index if eid not in seen], report,
                                    self.ledger.schedule_write_txn, self.ledger.clock())
            self._snapshot_end_txn(conn, index, seen, new_head, report)
            if bulk:
                st.triggers_on_txn(conn)
                verify.rebuild_state_txn(conn, writer.lattices_of)
            trust_scoped.check_answer_txn(conn, signed, "snapshot", end)
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
                self.ledger.merge_remote_txn(conn, None, report, entry_id=eid,
                                             republish=self._republish)
        for row in st.outbox_txn(conn):
            if row["body"]["epoch"] != new_head.epoch:
                # made in another epoch: it can never be accepted; its changes are still
                # dirty in the store and go out in a new batch
                st.drop_outbox_txn(conn, row["batch_id"])
        detail = None
        if report.purged:  # an admin's purge brought us here: the log says what went
            from replica.engine import changes

            reasons = sorted({str(p["reason"]) for p in report.purged})
            detail = {"ops": [{"id": p["id"], "action": "purged"} for p in report.purged],
                      "provenance": {"note": "; ".join(reasons)[:500]} if reasons else None}
            report.changes.append(changes.change(
                "pulled", epoch=new_head.epoch, seq=new_head.seq, at=self.ledger.clock(),
                author=None, own=False, detail=detail))
        st.add_history_txn(conn, epoch=new_head.epoch, seq=new_head.seq,
                           head=new_head.digest, kind="snapshot", entries=sorted(seen),
                           accepted_at=self.ledger.clock() if detail else None,
                           detail=detail)

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
        vault = os.fspath(self.ledger.vault)
        for status, eid, seq, version, text, file_hash, size in done:
            if eid in seen:
                raise HubUnverified("snapshot lists an entry twice", {"id": eid})
            seen.add(eid)
            if status == vaultwriter.NEW:
                rows.append((eid, text, version, file_hash, size, writer.mtime_ns))
            elif status != vaultwriter.HAVE:  # same here and there, file written: skipped
                entry = stored_entry(text, version)  # checked by the writer
                if status == vaultwriter.FOUND:  # a file was there: merged, not overwritten
                    vaultfaults.adopt_file_txn(conn, self.ledger.vault, eid,
                                               md.entry_os_path(vault, eid))
                self.ledger.merge_remote_txn(conn, entry, report, seq=seq,
                                             republish=self._republish)
        st.insert_cloned_txn(conn, rows)
