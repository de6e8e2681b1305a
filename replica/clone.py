"""Taking the hub's snapshot, the clone half of the sync engine (``Snapshots``, mixed into
``replica.sync.Replica``): the state at one signed head, applied as it streams in chunks of
``CHUNK`` entries in one transaction that commits only when the store adds up to the head's
state root; local changes are replayed on top (merged three-way). Entries new to this vault
are written by the vault writers (replica/vaultwriter.py) while the next chunk is received.

    snapshot ── _snapshot_head (signed head, epoch path, purged)
             └─ tx: purged dropped, _snapshot_txn ── chunk: _snapshot_chunk_txn ─┐
                                                  ◄───────────────────────────────┘
                    then entries not listed merged as absent, outbox of other epochs
                    dropped, history, state root checked against the signed head
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any

from replica import restored, vaultfaults, vaultwriter, verify
from replica import store as st
from replica import vault as vlt
from replica.client import HubClient, HubUnverified
from replica.crash import crash_point
from replica.purge import drop_purged_txn, purged_by
from replica.sqlite_db import Conn
from replica.store import EntryState, Head, Store
from replica.syncreport import SyncReport
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
    entry it calls (replica/sync.py)."""

    space_id: str
    vault: Any
    store: Store
    client: HubClient
    progress: Any
    clock: Any
    # crossing a restore from backup: entries whose held state is republished
    # (replica/restored.py); set for one snapshot, empty otherwise
    _republish: set[str] = set()
    _restore: tuple[list[Any], Any] | None = None

    def _merge_remote_txn(self, conn: Conn, theirs: Entry | None, report: SyncReport, *,
                          entry_id: str | None = None, author: dict[str, Any] | None = None,
                          seq: int | None = None) -> None:
        raise NotImplementedError  # the engine's merge (replica/sync.py)

    def _schedule_write_txn(self, conn: Conn, s: EntryState) -> None:
        raise NotImplementedError  # the engine's journaled vault write (replica/sync.py)

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
        lines = self.client.snapshot(self.space_id)
        first = next(lines)
        signed, purged = self._snapshot_head(first, fresh)
        expected = vaultwriter.count_hint(first)  # (progress, writer processes)
        new_head = Head(signed.epoch, signed.seq, signed.digest)
        created: list[tuple[str, bytes]] = []
        try:
            with self.store.tx() as conn:
                if self._restore is not None and self._restore[1] is not None:
                    self._republish = restored.republish_ids_txn(conn, *self._restore)
                if purged:  # before any entry: nothing of them is merged or kept
                    drop_purged_txn(conn, purged, report, self._schedule_write_txn,
                                    self.clock())
                    self._republish = self._republish - set(purged)  # not republished
                self._snapshot_txn(conn, lines, signed, new_head, report, created, expected)
        except BaseException:
            vaultfaults.remove_created(created)
            raise
        finally:
            self._republish = set()

    def _snapshot_txn(self, conn: Conn, lines: Any, signed: SignedHead, new_head: Head,
                      report: SyncReport, created: list[tuple[str, bytes]],
                      expected: int | None) -> None:
        count = 0
        index = st.snapshot_index_txn(conn)
        seen: set[str] = set()
        chunk: list[tuple[Entry, int]] = []
        writer = vaultwriter.start(self.vault, settled_mtime_ns(), expected,
                                   lambda: crash_point("mid_vault_write"))
        flight: list[tuple[Entry, str, bytes]] = []  # handed to the writer, not yet recorded
        try:
            for item in lines:
                if not isinstance(item, tuple):
                    raise HubUnverified("snapshot has a line that is not an entry")
                if item[0].id in seen:
                    raise HubUnverified("snapshot lists an entry twice", {"id": item[0].id})
                seen.add(item[0].id)
                chunk.append(item)
                count += 1
                if len(chunk) >= CHUNK:
                    flight, chunk = self._snapshot_chunk_txn(
                        conn, chunk, index, report, created, writer, flight), []
                    crash_point("mid_clone")  # a chunk may be in the writer's hands
                    if self.progress:
                        self.progress(count, expected)
            for last in (chunk, []):  # then the writer's last chunk is recorded
                flight = self._snapshot_chunk_txn(conn, last, index, report, created, writer,
                                                  flight)
            writer.durable()  # every rename flushed: only the commit records them
        except BaseException:  # what the writers renamed is removed with the rest
            with contextlib.suppress(OSError):
                done = set(writer.result())
                created.extend((p, d) for _e, p, d in flight if p in done)
            raise
        finally:
            writer.close()
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
        verify.check_root_txn(conn, signed, "snapshot")

    def _snapshot_chunk_txn(self, conn: Conn, items: list[tuple[Entry, int]],
                            index: dict[str, tuple[str | None, str | None, bool, bool]],
                            report: SyncReport, created: list[tuple[str, bytes]],
                            writer: Any, flight: list[tuple[Entry, str, bytes]]
                            ) -> list[tuple[Entry, str, bytes]]:
        """Apply snapshot entries: unchanged ones are skipped; one never seen here (no row, no
        journaled write, no file at its path) goes to the vault writers (vaultwriter.py) and is
        added once written, while they do the next chunk (returned); others are merged."""
        fresh: list[tuple[Entry, str, bytes]] = []
        vault = os.fspath(self.vault)
        for entry, seq in items:
            known = index.get(entry.id)
            if known is None:
                path = vlt.entry_os_path(vault, entry.id)  # the id is valid (make_entry)
                if not os.path.lexists(path):
                    fresh.append((entry, path, vlt.render(entry)))
                    continue
            elif known == (entry.version, entry.version, False, True):
                continue  # same here and there, file written: nothing to do
            self._merge_remote_txn(conn, entry, report, seq=seq)
        if fresh:
            crash_point("before_vault_write")
        written = set(writer.result())  # the previous chunk: its data flushed, renamed
        if fresh:
            writer.submit([(p, d) for _e, p, d in fresh])
        states = []
        for entry, path, data in flight:
            if path not in written:  # a file appeared meanwhile: merged, never overwritten
                vaultfaults.adopt_file_txn(conn, self.vault, entry.id, path)
                self._merge_remote_txn(conn, entry, report)
                continue
            created.append((path, data))
            states.append(EntryState(entry.id, entry, entry, vlt.file_hash(data), len(data),
                                     writer.mtime_ns, False, entry))
        st.insert_new_states_txn(conn, states)
        return fresh
