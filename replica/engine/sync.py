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
  next run, unless a person edited the file in between (then their edit wins and is scanned,
  three-way against what the file showed); a write over a file being written waits in the
  journal (``SyncReport.waiting``) and is retried by the next flush.

The engine is made of parts, each in its own module, given to one another when built (no
mixins): every part records what it decides through one ``Ledger``, the owner of the entry
states and of the vault's write journal; no part reaches into another's state.

    Replica (this module: the run)
      ├─ fold_vault    vault → store: the local edits              replica/engine/scan.py
      ├─ Publisher     store → hub: batches and their receipts     replica/engine/push.py
      │    └─ when the head moved: the Puller, then again
      ├─ Puller        hub → store: the changes after our head     replica/engine/pull.py
      │    └─ when the epoch changed or history is gone: the Snapshotter
      ├─ Snapshotter   hub → store: the state at one signed head   replica/engine/clone.py
      └─ Ledger        each entry's versions and what its file shows; the vault's
                       journaled writes and their flush            replica/engine/ledger.py
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from replica.engine import blocked, deleted, mass_delete
from replica.engine.blobs import LAZY_KEY, Blobs, collect_unnamed
from replica.engine.clone import Snapshotter
from replica.engine.crash import crash_point
from replica.engine.ledger import Ledger
from replica.engine.pull import Puller
from replica.engine.purge import compact_store
from replica.engine.push import Publisher
from replica.engine.report import Progress, SyncReport
from replica.engine.scan import fold_vault
from replica.hubclient.client import HubClient
from replica.store.blobs import BlobCache
from replica.store.store import Store
from replica.trust import verify
from replica.vault.journal_scan import Journal
from replica.vault.walk import Prefetch
from shared.errors import SpaceDeleted


def now_ms() -> int:
    return int(time.time() * 1000)


class Replica:
    """Sync engine for one space; the caller holds the space lock."""

    def __init__(self, *, space_id: str, replica_id: str, vault: Path, store: Store,
                 client: HubClient, key: Ed25519PrivateKey,
                 clock: Callable[[], int] = now_ms, progress: Progress | None = None,
                 provenance: dict[str, str] | None = None, vault_quiet_ms: int | None = None):
        self.space_id = space_id
        self.vault = vault
        self.store = store
        self.client = client
        self.key = key
        self.clock = clock
        self.provenance = provenance
        # publish local deletes above the mass-delete threshold (``quire sync
        # --confirm-deletes``); else they are held (replica/engine/mass_delete.py)
        self.confirm_deletes = False
        self.delete_threshold = mass_delete.Threshold.from_env()
        # a running watcher's journal for the next scan (replica/vault/journal_scan.py);
        # None: walk
        self.journal: Journal | None = None
        # vault_quiet_ms: how long a file must go unmodified before a sync writes over it
        # (None: QUIRE_VAULT_QUIET_MS, replica/engine/ledger.py)
        self.ledger = Ledger(vault, store, clock, vault_quiet_ms)
        self.ledger.blobs = Blobs(BlobCache(store.path.parent / "blobs"), client, space_id,
                                  lazy=bool(store.get_meta(LAZY_KEY)))
        self.snapshots = Snapshotter(self.ledger, client, space_id, progress)
        self.puller = Puller(self.ledger, client, self.snapshots, space_id=space_id,
                             replica_id=replica_id, progress=progress)
        self.publisher = Publisher(self.ledger, client, self.puller, self.snapshots,
                                   space_id=space_id, replica_id=replica_id, key=key,
                                   provenance=provenance)

    @property
    def replica_id(self) -> str:
        return self.publisher.replica_id

    @replica_id.setter
    def replica_id(self, value: str) -> None:
        """A new replica registered for this device (replica/app/rejoin.py): its batches
        carry the new id, and the pull knows them by it."""
        self.publisher.replica_id = self.puller.replica_id = value

    @property
    def progress(self) -> Progress | None:
        return self.puller.progress

    @progress.setter
    def progress(self, value: Progress | None) -> None:
        self.puller.progress = self.snapshots.progress = value

    @property
    def role(self) -> str | None:
        """This member's role, as the hub's head said at this sync's pull (None before)."""
        return self.puller.role

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
            raise deleted.confirm(self.client, self.space_id, e) from e
        report.waiting = self.flush_vault()
        if report.purged or report.left_scope:  # the dropped bytes leave the store's files
            # (replica/engine/purge.py)
            compact_store(self.store.path)
            if self.ledger.blobs is not None:  # and the blob cache (replica/engine/blobs.py)
                collect_unnamed(self.store, self.ledger.blobs.cache)
        return report

    def _exchange(self, report: SyncReport) -> None:
        """The hub half of a sync: resend, pull, publish."""
        self.publisher.replay_outbox(report)
        self.ledger.absorbed = {}
        self.puller.pull(report)
        if self.ledger.absorbed:  # a blocked version the pull took back off a local edit
            with self.store.tx() as conn:
                blocked.absorbed(conn, self.client, self.space_id, self.ledger.absorbed,
                                 self.clock(), self.ledger.schedule_write_txn, report)
        crash_point("after_pull")
        with self.store.snapshot() as conn:  # too many deletes at once: held, not published
            self.publisher.held_deletes, report.deletes_held = mass_delete.held_txn(
                conn, self.delete_threshold, self.confirm_deletes)
        self.publisher.push(report)
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

    def scan(self, report: SyncReport, walk: Prefetch | None = None) -> None:
        """Fold the vault's local edits into the store (replica/engine/scan.py); with ``journal``
        set (a running watcher's), only where it saw something change; else by the walk
        ``walk`` ran ahead (replica/vault/walk.py), or one made now. A vault that is gone is
        refused, never read as every page deleted (replica/vault/presence.py)."""
        fold_vault(self.ledger, report, walk, self.journal)

    def flush_vault(self) -> dict[str, int]:
        """Carry out journaled vault writes (``Ledger.flush_vault``); returns those that wait
        for their file to be quiet (entry id → when to try again, Unix ms)."""
        return self.ledger.flush_vault()
