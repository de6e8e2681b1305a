"""Publishing, the push part of the sync engine (``Publisher``, one of the parts
``replica.engine.sync.Replica`` is made of): build the next batch from the dirty entries
(resolutions first, changes the space rules deny and content screening finds a secret in
kept back: replica/engine/screened.py), save it in the outbox before sending, send it,
apply the receipt (the ledger's ``apply_receipt_txn``, replica/engine/ledger.py); on
``head_changed`` pull (the ``Puller`` it is given) and retry (bounded), on an epoch change
take a snapshot; a batch the hub chained on a later head is checked in the history the next
pull brings. See the invariants in replica/engine/sync.py's docstring.

On ``version_blocked`` (an admin reverted that version and blocked it) the edits the
refusal names are held as conflicts, not republished, not lost (replica/engine/blocked.py); the
rest of the batch is built again and sent.

A refusal the local check could not foresee holds back only what it names, for this sync,
the way the local check does (kept dirty in the store and the vault, reported under
``policy_denied``), and the rest of the batch is built again and sent (``hub_refused``):

    policy_denied   the ops ``details.denied`` names (the hub judges on state the replica
                    lacks: after an epoch bump a snapshot carries no tombstones, so a
                    re-create looks like a create here and is an update on the hub)
    quota_exceeded  entries or bytes: the changes that grow the measure past the room the
                    refusal states (``limit - usage``), in the batch's order; an edit that
                    does not grow it is never held back by it (rule ``quota:entries``,
                    ``quota:bytes``). History bytes grow with any batch: nothing to hold back
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from replica.engine import blocked, renames, scoped
from replica.engine.blobs import upload_blobs
from replica.engine.clone import Snapshotter
from replica.engine.crash import crash_point
from replica.engine.ledger import Ledger
from replica.engine.pull import Puller
from replica.engine.report import SyncReport
from replica.engine.resolutions import agent_owned, plan_batch
from replica.engine.screened import allows_from, hold_back
from replica.hubclient.client import HubClient
from replica.store import store as st
from replica.store.store import EntryState
from shared import policy
from shared.entry import Entry, tombstone
from shared.entry import validated_canonical_bytes as canonical_bytes
from shared.errors import (
    BaseMismatch,
    EpochChanged,
    HeadChanged,
    HubUnverified,
    PolicyDenied,
    QuireError,
    QuotaExceeded,
    SnapshotRequired,
    VersionBlocked,
)
from shared.ids import new_id, portability_problem
from shared.names import collisions, portable_name
from shared.wire import Batch, Op, build_batch, parse_batch

MAX_ROUNDS = 8  # push attempts per sync when the head keeps moving


def catch_up(e: QuireError, rounds: int, puller: Puller, snapshots: Snapshotter,
             report: SyncReport) -> int:
    """A push the hub refused because its head moved (pull the gap) or its epoch did (take
    a snapshot): catch up and return the rounds used; past ``MAX_ROUNDS``, raise ``e``.
    The device's and an agent's publishers share it."""
    rounds += 1
    if rounds >= MAX_ROUNDS:
        raise e
    if isinstance(e, (EpochChanged, SnapshotRequired)):
        snapshots.snapshot(report)
    else:
        puller.pull(report)
    return rounds
MAX_OPS_PER_BATCH = 500


class Publisher:
    """Publishes one space's local changes; the caller holds the space lock. When the hub's
    head moved, ``puller`` brings the store up to it (``snapshots`` when the epoch changed)
    before the next attempt."""

    def __init__(self, ledger: Ledger, client: HubClient, puller: Puller,
                 snapshots: Snapshotter, *, space_id: str, replica_id: str,
                 key: Ed25519PrivateKey, provenance: dict[str, str] | None = None):
        self.ledger = ledger
        self.store = ledger.store
        self.clock = ledger.clock
        self.client = client
        self.puller = puller
        self.snapshots = snapshots
        self.space_id = space_id
        self.replica_id = replica_id  # named in every batch
        self.key = key
        self.provenance = provenance
        # local deletes above the mass-delete threshold, not confirmed: kept back, local
        # (replica/engine/mass_delete.py; set by the sync before each push)
        self.held_deletes: set[str] = set()
        # changes the hub refused in this sync (policy_denied, quota_exceeded), by entry id:
        # held back from the batches built after the refusal, reported (``hub_refused``)
        self.refused: dict[str, dict[str, Any]] = {}

    def _build_ops(self, report: SyncReport | None = None) -> list[Op]:
        ops = []
        denied: list[dict[str, Any]] = []
        refused_gone: dict[str, Entry] = {}  # deletes the rules keep back: synced content
        access = self.store.get_meta("access") or {}
        # resolutions an agent's MCP session made: its own sync publishes them, under its
        # delegation (replica/engine/agent_push.py), never this device's
        res = self.store.get_meta("resolutions") or {}
        guardrails: dict[str, Entry] | None = None  # synced, read once when one takes a key
        only = scoped.only_of(self.store)  # a partial replica publishes only inside its globs

        def synced_guardrails() -> dict[str, Entry]:
            nonlocal guardrails
            if guardrails is None:
                guardrails = self.store.synced_guardrails()
            return guardrails

        for s in self.store.dirty_states().values():
            if s.held or not s.dirty or s.id in self.held_deletes or s.id in self.refused:
                continue
            base = s.synced.version if s.synced is not None else None
            if s.local is None or s.local.deleted:
                if s.synced is None or s.synced.deleted:
                    continue
                op = Op(tombstone(s.id), base)
            else:
                op = Op(s.local, base)
            if agent_owned(res, s.id, op.entry.version):
                continue
            refusal = (scoped.outside_scope(self.space_id, only, s.id, op)
                       if scoped.outside(only, s.id) else
                       self._local_denial(access, s, op, synced_guardrails))
            if refusal is not None:
                denied.append(refusal)  # kept dirty in the store and the vault, not pushed
                if op.entry.deleted and s.synced is not None:
                    refused_gone[s.id] = s.synced
                continue
            ops.append(op)
            if len(ops) >= MAX_OPS_PER_BATCH:
                break
        ops = self._hold_renamed(ops, refused_gone, denied)
        ops = self._hold_collisions(ops, denied)
        # content screening, as the guard will (replica/engine/screened.py): kept back, reported
        ops, screened = hold_back(ops, allows_from(self.client, self.space_id))
        if report is not None:
            report.policy_denied = denied + list(self.refused.values())
            report.content_screened = screened
        return ops

    def hub_refused(self, batch: Batch, e: QuireError) -> bool:
        """Hold back the changes of ``batch`` that the hub's refusal ``e`` names (rules) or
        that grow past the room a quota refusal states; True when something new is held
        back (the rest can be sent again), False when nothing is (``e`` stands)."""
        details = e.details or {}
        if isinstance(e, PolicyDenied):
            ids = {op.entry_id for op in batch.ops}
            held = {str(d["id"]): dict(d, message=f"{d.get('reason')}; the hub refused it; "
                                                  "kept locally, not published")
                    for d in details.get("denied") or []
                    if isinstance(d, dict) and d.get("id") in ids}
            # a rename is one change: refused its delete, its put waits with it
            held.update({op.entry_id: {
                "id": op.entry_id, "action": "create", "rule": "rename", "of": op.moved_from,
                "reason": f"renamed from {op.moved_from}, whose delete the hub refused",
                "message": f"renamed from {op.moved_from}, whose delete the hub refused; "
                           "kept locally, not published"}
                for op in batch.ops if op.moved_from in held and op.entry_id not in held})
        elif isinstance(e, QuotaExceeded):
            held = self._over_quota(batch, details)
        else:
            held = {}
        fresh = {k: v for k, v in held.items() if k not in self.refused}
        self.refused.update(fresh)
        return bool(fresh)

    def _over_quota(self, batch: Batch, d: dict[str, Any]) -> dict[str, dict[str, Any]]:
        quota, limit, usage = d.get("quota"), d.get("limit"), d.get("usage")
        if quota not in ("entries", "bytes") or not (
                isinstance(limit, int) and isinstance(usage, int)):
            return {}
        states = self.store.dirty_states()

        def size(e: Entry | None) -> int:
            return 0 if e is None or e.deleted else len(canonical_bytes(e))

        grows = []
        for op in batch.ops:
            s = states.get(op.entry_id)
            old = s.synced if s is not None and s.synced is not None and \
                not s.synced.deleted else None
            new = None if op.entry.deleted else op.entry
            if quota == "entries":
                grows.append((op, (new is not None) - (old is not None)))
            else:
                grows.append((op, size(new) - size(old)))
        room = limit - usage - sum(g for _, g in grows if g < 0)  # what shrinks frees room
        held: dict[str, dict[str, Any]] = {}
        for op, g in grows:
            if g <= 0:
                continue
            if g <= room:
                room -= g
                continue
            action = "create" if quota == "entries" else "grow"
            held[op.entry_id] = {
                "id": op.entry_id, "action": action, "rule": f"quota:{quota}",
                "reason": f"over the {d.get('scope', 'space')}'s {quota} quota ({limit}, "
                          f"{usage} in use)",
                "message": f"over the {d.get('scope', 'space')}'s {quota} quota ({limit}, "
                           f"{usage} in use); kept locally, not published: remove or shrink "
                           "other pages, or ask an admin to raise it (quire admin space "
                           "quota)"}
        return held

    @staticmethod
    def _hold_renamed(ops: list[Op], refused_gone: dict[str, Entry],
                      denied: list[dict[str, Any]]) -> list[Op]:
        """A rename is one change: the create that renames a page whose delete the rules
        keep back (a guardrail moved out of its folder) is kept back with it, never
        published alone as a copy (replica/engine/renames.py)."""
        moved = renames.partners(ops, refused_gone)
        for new, old in sorted(moved.items()):
            denied.append({"id": new, "action": "create", "rule": "rename",
                           "of": old, "reason": f"renamed from {old}, whose delete is "
                                                "refused",
                           "message": f"{new}.md is {old}.md renamed, and the rules refuse "
                                      f"to delete {old}; kept locally, not published"})
        return [op for op in ops if op.entry_id not in moved]

    def _hold_collisions(self, ops: list[Op], denied: list[dict[str, Any]]) -> list[Op]:
        """The creates of ``ops`` whose name is one file with another entry's on macOS and
        Windows (shared/names.py ``collisions``: case, Unicode normalization, a folder
        spelled two ways) are kept back, as the hub would refuse them (``name_collision``);
        the entries of the space after the batch are judged, read only when it creates."""
        creates = [op.entry_id for op in ops if op.base is None and not op.entry.deleted]
        if not creates:
            return ops
        gone = {op.entry_id for op in ops if op.entry.deleted}
        with self.store.engine.connect() as conn:
            rows = st.live_versions_txn(conn)
        new = set(creates)
        live = [r[0] for r in rows if (r[1] is not None or r[2] is not None)
                and r[0] not in gone and r[0] not in new]
        hit = collisions(creates, live)
        if not hit:
            return ops
        for eid, p in sorted(hit.items()):
            rename = f"; rename it to '{p.suggested}.md'" if p.suggested else ""
            denied.append({"id": eid, "action": "create", "rule": p.code, "of": p.other,
                           "suggested": p.suggested, "reason": p.reason,
                           "message": f"{eid}.md: {p.reason}{rename}; kept locally, not "
                                      "published"})
        return [op for op in ops if op.entry_id not in hit]

    @staticmethod
    def _local_denial(access: dict[str, Any], s: EntryState, op: Op,
                      synced_guardrails: Callable[[], dict[str, Entry]] = dict
                      ) -> dict[str, Any] | None:
        """Would the hub deny this op? Judged with the role and rules of this sync's head
        (already narrowed to this caller) against the synced content, as the guard does
        (a guardrail that takes another's key as an update of it: ``synced_guardrails()``,
        read only then); the hub still checks. None when allowed or when the head did not
        say."""
        current = None if s.synced is None else (s.synced.version, s.synced.deleted)
        problem = None if op.entry.deleted or (current and not current[1]) \
            else portability_problem(s.id)
        if problem:  # the hub refuses it too (hub/admission.py)
            better = portable_name(s.id)
            return {"id": s.id, "action": "create", "rule": "portable_id",
                    "reason": problem, "suggested": better,
                    "message": f"{s.id}.md cannot be a file on every replica ({problem}); "
                               f"rename it (to '{better}.md'?); kept locally, not "
                               "published"}
        role = access.get("role")
        if role is None:
            return None
        folders = access.get("kinds")  # the space's folder mapping (shared/kinds.py)
        change = policy.change_of(s.id, op.entry, current, s.synced, folders)
        if change is None:
            return None
        if not policy.at_least(role, "editor"):
            return {"id": s.id, "action": change.action, "rule": f"role:{role}",
                    "reason": f"a {role} cannot publish",
                    "message": f"a {role} cannot publish; kept locally"}
        rules = [policy.Rule.from_dict(r) for r in access.get("rules") or []]
        hit = policy.denial(rules, change)
        live = s.synced if s.synced is not None and not s.synced.deleted else None
        if hit is None and policy.taken_key(op.entry, live, folders) is not None:
            hit = next((d for d in (policy.denial(rules, c) for c in policy.key_takeovers(
                op.entry, live, synced_guardrails(), folders=folders)) if d is not None),
                None)
        if hit is None:
            return None
        return dict(hit, message=f"{hit['reason']}; kept locally, not published")

    local_denial = _local_denial  # public: an agent's publication judges its ops the same way

    def _next_batch(self, report: SyncReport | None = None) -> Batch | None:
        head = self.store.head()
        assert head is not None
        for row in self.store.outbox():
            batch = parse_batch(row["body"])
            if (batch.epoch, batch.parent_seq, batch.parent_digest) == (
                    head.epoch, head.seq, head.digest):
                return batch  # resend unchanged: a replay gets the same receipt
            # its parent is gone and our pull did not contain it: never accepted, never will be
            with self.store.tx() as conn:
                st.drop_outbox_txn(conn, batch.batch_id)
        ops = self._build_ops(report)
        if not ops:
            return None
        ops, provenance = plan_batch(self.store, ops, self.provenance)
        with self.store.engine.connect() as conn:  # a delete and a create of one content
            ops = renames.pair_txn(conn, ops)
        batch = build_batch(self.key, batch_id=new_id(), replica_id=self.replica_id,
                            space=self.space_id, epoch=head.epoch, parent_seq=head.seq,
                            parent_digest=head.digest, ops=ops, provenance=provenance)
        with self.store.tx() as conn:
            st.add_outbox_txn(conn, batch.batch_id, batch.to_wire(), self.clock())
        return batch

    def _send(self, batch: Batch) -> dict[str, Any]:
        """Publish ``batch``: the bytes of its attachments first (replica/engine/blobs.py
        ``upload_blobs``, the one upload path), then the batch; its verified receipt."""
        if self.ledger.blobs is not None:
            upload_blobs(self.client, self.space_id, self.ledger.blobs.cache,
                         [op.entry for op in batch.ops])
        return self.client.push(self.space_id, batch)

    def replay_outbox(self, report: SyncReport) -> None:
        """Resend a batch a crash left in the outbox, before anything else moves.

        Accepted before the crash: the hub replays the same receipt. Not accepted and the
        head moved: the hub refuses it and the pull that follows settles it.
        """
        head = self.store.head()
        rows = self.store.outbox()
        if head is None or not rows:
            return
        batch = parse_batch(rows[0]["body"])
        if (batch.epoch, batch.parent_seq, batch.parent_digest) != (head.epoch, head.seq,
                                                                    head.digest):
            return
        try:
            receipt = self._send(batch)
        except (HeadChanged, BaseMismatch, EpochChanged, SnapshotRequired):
            return
        with self.store.tx() as conn:
            moved = self.ledger.apply_receipt_txn(conn, batch, receipt, report)
        report.pushed += len(batch.ops)
        report.batches += 1
        if not moved:  # accepted on a later head: pull the gap, which ends with this batch
            self.puller.pull(report)
            self._check_landed([(batch, receipt)])

    def push(self, report: SyncReport) -> None:
        rounds = 0
        self.refused = {}
        landed: list[tuple[Batch, dict[str, Any]]] = []  # accepted beyond the local head
        while True:
            batch = self._next_batch(report)
            if batch is None:
                if not landed:
                    return
                # the hub chained our batches on a head we had not pulled: pull the gap
                # (every remote batch before ours, then ours, applied as a no-op) and check
                # that the history the hub serves holds them where the receipts said
                self.puller.pull(report)
                self._check_landed(landed)
                landed = []
                continue  # merges made by that pull may have something to publish
            crash_point("before_push")
            try:
                receipt = self._send(batch)
            except (HeadChanged, BaseMismatch, EpochChanged, SnapshotRequired) as e:
                rounds = catch_up(e, rounds, self.puller, self.snapshots, report)
                continue
            except (PolicyDenied, QuotaExceeded) as e:
                rounds += 1
                with self.store.tx() as conn:
                    st.drop_outbox_txn(conn, batch.batch_id)
                if not self.hub_refused(batch, e) or rounds >= MAX_ROUNDS:
                    raise
                continue  # the rest goes in the next batch; these stay dirty, reported
            except VersionBlocked as e:
                rounds += 1
                with self.store.tx() as conn:  # replica/engine/blocked.py
                    st.drop_outbox_txn(conn, batch.batch_id)
                    held = blocked.refused(conn, batch.ops, e, self.clock(),
                                           self.ledger.schedule_write_txn, report)
                if not held or rounds >= MAX_ROUNDS:
                    raise
                continue  # the other edits go in the next batch
            except QuireError as e:
                if not e.retryable:
                    # refused for good (forbidden, policy, too large): keep every local
                    # change, drop the batch so it is never retried blindly
                    with self.store.tx() as conn:
                        st.drop_outbox_txn(conn, batch.batch_id)
                raise
            crash_point("after_push_before_receipt")
            with self.store.tx() as conn:
                if not self.ledger.apply_receipt_txn(conn, batch, receipt, report):
                    landed.append((batch, receipt))
            crash_point("after_receipt")
            report.pushed += len(batch.ops)
            report.batches += 1

    def _check_landed(self, landed: list[tuple[Batch, dict[str, Any]]]) -> None:
        """After pulling a gap: the change at each receipt's seq is that batch, with the
        receipt's head (the pull verified the chain through it)."""
        head = self.store.head()
        for batch, receipt in landed:
            if head is None or head.epoch != batch.epoch:
                return  # a new epoch: the snapshot replaced this history
            if head.seq < receipt["seq"]:
                raise HubUnverified("the hub's history ends before a batch it gave a receipt "
                                    "for", {"seq": receipt["seq"], "hub_seq": head.seq})
            with self.store.tx() as conn:
                rows = conn.execute(
                    "SELECT batch_digest, head FROM history WHERE epoch = ? AND seq = ?"
                    " AND kind != 'snapshot'", (batch.epoch, receipt["seq"])).fetchall()
            if rows and any((r.batch_digest, r.head) != (batch.digest, receipt["head"])
                            for r in rows):
                raise HubUnverified("the pulled change at a receipt's seq is not that batch",
                                    {"seq": receipt["seq"], "batch_id": batch.batch_id})
