"""Pulling, the part of the sync engine that brings the hub's changes in (``Puller``, one of
the parts ``replica.engine.sync.Replica`` is made of): ask the hub for its head, signed over
a nonce of ours; check it against ours (rolled back, forked, or the same and the store adds
up to it); then apply the changes after our head a page at a time, each page in one
transaction that commits only when the store adds up to the state root the hub signed at its
end. Each pulled version is merged into the entry's state by the ledger
(replica/engine/ledger.py). When the epoch changed or the hub no longer serves the history
after our head, a snapshot is taken instead (replica/engine/clone.py).
"""

from __future__ import annotations

from replica.engine import changes, renames, scoped
from replica.engine.clone import Snapshotter
from replica.engine.headaccess import access_of
from replica.engine.ledger import Ledger
from replica.engine.report import Progress, SyncReport
from replica.engine.restored import ACCEPTED_RESTORE
from replica.hubclient import witness
from replica.hubclient.client import Change, ChangesPage, HubClient
from replica.store import store as st
from replica.store.db import Conn
from replica.store.store import Head
from replica.trust import audit_tips as auditcheck
from replica.trust import logcheck, verify
from replica.trust import scoped as trust_scoped
from shared.errors import HubUnverified, SnapshotRequired
from shared.readscope import scope_of_head
from shared.signed import SignedHead, epoch_path, parse_epoch_statement

WITNESSED_PAGE = 500  # batches per page up to a witnessed head (the hub's default page)


class Puller:
    """Brings one space's store up to the hub's head; the caller holds the space lock."""

    def __init__(self, ledger: Ledger, client: HubClient, snapshots: Snapshotter, *,
                 space_id: str, replica_id: str, progress: Progress | None = None):
        self.ledger = ledger
        self.store = ledger.store
        self.client = client
        self.snapshots = snapshots
        self.space_id = space_id
        self.replica_id = replica_id  # our own batches, recognised in the history
        self.progress = progress
        self.role: str | None = None  # as the hub's head said at the last pull
        # the meta key the head's role and rules are kept under: "access" for this device,
        # "access:agent:NAME" for an agent's session (replica/engine/agent_push.py), so one
        # principal's sync never leaves its rules where another's checks read them
        self.access_key = "access"

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
        access = access_of(hub)
        if self.store.get_meta(self.access_key) != access:
            self.store.set_meta(self.access_key, access)
        if hub.get("usage") and self.store.get_meta("usage") != hub["usage"]:
            self.store.set_meta("usage", hub["usage"])  # quotas, for quire status
        # the scope the hub's rules and our own globs give us now (replica/trust/scoped.py):
        # another than the store's copy was built under → a snapshot of it (a rule or
        # ``quire scope`` narrowed or widened what we hold)
        held = scoped.held_scope(self.store)
        want = scope_of_head(hub.get("rules") or [], scoped.only_of(self.store),
                             access.get("kinds")).fingerprint
        if head is None or fresh.epoch != head.epoch or want != held:
            try:
                self.check_log(fresh)
            except HubUnverified as e:
                if head is not None and e.details.get("reason") == "log_rollback":
                    self.restore_behind(head, fresh)  # what the hub says happened, if so
                if head is None or not self.fork_recovered(head):
                    raise
                # the owner recovered the space from two histories (D146): the line we
                # kept may be the one that did not survive; this one must still be
                # co-signed by the space's witnesses
                self.check_log(fresh, recovered=True)
            self.snapshots.snapshot(report, fresh)
            return
        if fresh.seq < head.seq:
            raise HubUnverified("the hub's head is behind this replica's (rolled back?)",
                                {"reason": "rollback", "hub_seq": fresh.seq,
                                 "local_seq": head.seq})
        if fresh.seq == head.seq:
            if fresh.digest != head.digest:
                raise HubUnverified("the hub's head digest differs at the same seq",
                                    {"reason": "fork", "seq": head.seq})
            self.check_log(fresh)
            with self.store.tx() as conn:  # and the store holds exactly the signed state
                trust_scoped.check_answer_txn(conn, fresh, "head")
            return
        self.check_log(fresh)
        self._pull_changes(report, head, fresh.seq)

    def check_log(self, fresh: SignedHead, recovered: bool = False) -> None:
        """The head's log checkpoint extends the one we accepted last and carries the
        witnesses' co-signatures (replica/trust/logcheck.py); kept once it does. A restore
        from a backup the member accepted (``quire accept-restore``) starts a new line; so
        does a fork recovery on the way to this epoch (``recovered``), under the witness
        policy kept (a recovery cannot shed witnesses)."""
        kept = self.store.get_meta(logcheck.KEPT)
        if kept is not None and self.store.get_meta(ACCEPTED_RESTORE) == fresh.epoch:
            kept = None
        elif isinstance(kept, dict) and recovered:
            # a new line, but not fewer witnesses: the kept policy's quorum still applies
            kept = {"policy": kept.get("policy")}
        new = logcheck.check(fresh, kept, self.client.hub_keys, self.log_sources())
        if new is not None and new != kept:
            self.store.set_meta(logcheck.KEPT, new)

    def fork_recovered(self, head: Head) -> bool:
        """Does a hub-signed fork recovery lie between our epoch and the hub's (the
        snapshot's epoch statements; logcheck.fork_recovery checks its proof)?"""
        lines = self.client.snapshot_lines(self.space_id)
        try:
            first = next(lines)
            epochs = first.get("epochs") if isinstance(first, dict) else None
            signed = self.client.verified_head(first.get("head"), self.space_id)
            keys = self.client.hub_keys
            parsed = [parse_epoch_statement(keys, e, space=self.space_id)
                      for e in epochs or []]
            path = epoch_path(parsed, head.epoch, signed.epoch)
        except (HubUnverified, StopIteration, AttributeError):
            return False
        finally:
            close = getattr(lines, "close", None)
            if close is not None:
                close()
        return logcheck.fork_recovery(path, tuple(keys), self.space_id) is not None

    def restore_behind(self, head: Head, fresh: SignedHead) -> None:
        """A shorter log in a new epoch: a hub restored from a backup after losing data
        says so in its signed epoch statement, and the snapshot path refuses that as
        ``restore_behind`` (with the way to accept it). Only the snapshot's first line is
        read (its head and epoch statements); nothing is applied."""
        lines = self.client.snapshot_lines(self.space_id)
        try:
            first = next(lines)
            signed = self.client.verified_head(first.get("head"), self.space_id)
            accepted = self.store.get_meta(ACCEPTED_RESTORE)
            verify.snapshot_path(self.client.hub_keys, self.space_id, head, signed,
                                 first.get("epochs"), fresh,
                                 accepted if isinstance(accepted, str) else None)
        finally:
            close = getattr(lines, "close", None)
            if close is not None:
                close()

    def log_sources(self) -> logcheck.Sources:
        path = f"/v1/spaces/{self.space_id}"
        return logcheck.Sources(
            proof=lambda m, n: self.client.admin_get(f"{path}/log/consistency",
                                                     {"first": m, "second": n}),
            policies=lambda: (self.client.admin_get(f"{path}/witnesses") or {}).get(
                "policies", []),
            cosign=lambda w, note, size, guess, proof: witness.add_checkpoint(
                w.url, note, size, guess, proof),
            latest=lambda w, origin: witness.latest(w.url, origin))

    def authors(self, conn: Conn | None = None) -> verify.Authors:
        """Device attestations (cached in the store, read in ``conn`` when given; fetched
        when a batch needs one)."""
        cached = (self.store.get_meta(verify.DEVICES) if conn is None
                  else st.get_meta_txn(conn, verify.DEVICES))
        return verify.Authors(lambda: self.client.hub_keys, lambda: self.client.devices(
            self.space_id), cached)

    def apply_page_txn(self, conn: Conn, page: ChangesPage, authors: verify.Authors,
                       report: SyncReport) -> None:
        """Apply a verified page of changes, then check that the store adds up to the state
        the hub signed at its end; raises (and the transaction rolls back) otherwise."""
        assert page.signed is not None
        # a space with witnesses: nothing past the head whose log they co-signed (the
        # watcher's fast path then takes a full sync, which checks the log first)
        logcheck.check_witnessed(st.get_meta_txn(conn, logcheck.KEPT, None),
                                 page.signed.epoch, page.signed.seq)
        # receipts are served as signed when accepted: any key of the pinned chain
        verify.check_authors(self.client.hub_keys, page.changes, authors)
        trust_scoped.check_scope(page.end, scoped.held_scope_txn(conn))
        marks = scoped.Marks()  # entries a ``was`` mark names (scoped answers only)
        for change in page.changes:
            self._apply_change_txn(conn, change, report, marks)
        trust_scoped.check_answer_txn(conn, page.signed, "changes", page.end)
        if authors.refreshed:
            st.set_meta_txn(conn, verify.DEVICES, authors.wire)

    def _pull_changes(self, report: SyncReport, head: Head, until: int) -> None:
        authors = self.authors()
        start = head.seq  # progress: batches pulled of those the signed head says there are
        # a space with witnesses: pages end at the witnessed head at the latest (what was
        # published since waits for the next sync, which checks the log first)
        witnessed = logcheck.requires_witnesses(self.store.get_meta(logcheck.KEPT))
        while True:
            if witnessed and head.seq >= until:
                return
            try:
                page = self.client.changes(
                    self.space_id, epoch=head.epoch, after=head.seq, after_digest=head.digest,
                    limit=min(until - head.seq, WITNESSED_PAGE) if witnessed else None,
                    scope=scoped.held_scope(self.store), only=scoped.only_of(self.store))
            except SnapshotRequired:
                self.snapshots.snapshot(report)
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

    def _apply_change_txn(self, conn: Conn, change: Change, report: SyncReport,
                          marks: scoped.Marks | None = None) -> None:
        batch = change.batch
        ids = [op.entry_id for op in batch.ops]
        if change.withheld is not None:  # a scoped answer: what it left out (scoped.py)
            scoped.apply_withheld_txn(conn, change.withheld, marks or scoped.Marks(), report,
                                      self.ledger.schedule_write_txn, self.ledger.clock())
        if scoped.held_scope_txn(conn):
            for op in batch.ops:  # an entry coming into the scope leaves the withheld sums
                scoped.entering_txn(conn, op)
        # what it changed, page by page, read before it changes anything; our own batch
        # rebased by the hub was summarized at its receipt (replica/engine/changes.py)
        detail = (st.get_meta_txn(conn, changes.pushed_key(batch.batch_id))
                  if batch.replica_id == self.replica_id else None)
        if detail is not None:
            st.drop_meta_txn(conn, changes.pushed_key(batch.batch_id))
        else:
            detail = changes.record_txn(conn, ids, [op.entry for op in batch.ops],
                                        batch.provenance)
        # local work carried across a rename on either side (replica/engine/renames.py)
        settled = renames.rebase_txn(conn, batch.ops, report, self.ledger.schedule_write_txn)
        for op in batch.ops:
            if op.entry_id in settled:
                continue
            # the batch provenance rides along: conflict packets show which agent wrote theirs
            self.ledger.merge_remote_txn(
                conn, op.entry, report,
                author=dict(change.author or {}, provenance=batch.provenance), seq=change.seq)
        head = st.head_txn(conn)
        assert head is not None
        st.set_head_txn(conn, Head(head.epoch, change.seq, change.head))
        st.add_history_txn(conn, epoch=batch.epoch, seq=change.seq, head=change.head,
                           kind="batch", entries=[op.entry_id for op in batch.ops],
                           batch_id=batch.batch_id, replica_id=batch.replica_id,
                           batch_digest=batch.digest, author=change.author,
                           accepted_at=change.accepted_at, detail=detail)
        own = batch.replica_id == self.replica_id
        if batch.ops:  # (every op of it outside the scope: nothing to tell)
            report.changes.append(changes.change(
                "pushed" if own else "pulled", epoch=batch.epoch, seq=change.seq,
                at=change.accepted_at, author=change.author, own=own, detail=detail))
        if batch.replica_id == self.replica_id:
            # our own batch, accepted while we were not listening: it is published (a
            # batch of ours no longer in the outbox deletes nothing; another replica's
            # batch cannot be in our outbox, so its change reads no outbox row)
            st.drop_outbox_txn(conn, batch.batch_id)
