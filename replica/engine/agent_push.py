"""Publishing for an agent principal (``AgentPublisher``): the batch source of an MCP session,
beside the device's (replica/engine/push.py), run by ``Replica.sync_agent`` with a client
that carries the agent's delegation and never the device's own credential.

What it publishes is the agent's own and nothing else (docs/agents.md, "What a write does"):

    agent_changes rows of this agent (replica/store/overlay.py)
      ├─ equal to the synced entry: landed (a receipt lost in a crash) or moot: dropped
      ├─ base moved since the write: merge_entry(base, the write, synced) onto the pulled
      │  state when clean, else state ``conflict`` (kept, not sent; the agent writes again)
      ├─ refused by the rules the hub gave this agent's head (``access:agent:NAME``), or
      │  by content screening: state ``denied`` with the refusal (kept, judged again later)
      └─ the rest
    + the resolutions this agent's sessions made (replica/engine/resolutions.py)
      ──► one batch at a time (resolutions first), signed by the device key, provenance
          naming the agent, saved in ``agent_outbox`` before it is sent
      ──► receipt: the rows and the outbox row go; the pull that follows brings the landed
          version into the store and the vault like any teammate's change

The device's dirty entries and its outbox are never read here: a person's edit is not the
agent's to publish (it would carry the agent's name and be judged by the agent's rules),
and a batch saved by one principal is resent only by that principal.
"""

from __future__ import annotations

from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from replica.engine import blocked, deleted
from replica.engine.clone import Snapshotter
from replica.engine.ledger import Ledger
from replica.engine.merge import merge_entry, same
from replica.engine.pull import Puller
from replica.engine.purge import compact_store
from replica.engine.push import MAX_OPS_PER_BATCH, Publisher, catch_up
from replica.engine.report import SyncReport
from replica.engine.resolutions import forget_resolutions_txn, plan_batch, resolutions_of
from replica.engine.screened import allows_from, hold_back
from replica.engine.sync import Replica
from replica.hubclient.client import HubClient
from replica.store import overlay
from replica.store import store as st
from replica.store.overlay import AgentChange
from replica.store.store import EntryState
from shared.entry import Entry, tombstone
from shared.errors import (
    BaseMismatch,
    ContentScreened,
    EpochChanged,
    HeadChanged,
    HubUnverified,
    PolicyDenied,
    QuireError,
    SnapshotRequired,
    SpaceDeleted,
)
from shared.ids import new_id
from shared.wire import Batch, Op, build_batch, parse_batch


def access_key(agent: str) -> str:
    """The store meta key of the role and rules the hub gave ``agent``'s head."""
    return f"access:agent:{agent}"


def _live(e: Entry | None) -> Entry | None:
    return None if e is None or e.deleted else e


class AgentPublisher:
    """Publishes one agent's own changes of one space; the caller holds the space lock and
    built ``client`` with the agent's delegation."""

    def __init__(self, ledger: Ledger, client: HubClient, puller: Puller,
                 snapshots: Snapshotter, *, space_id: str, replica_id: str,
                 key: Ed25519PrivateKey, agent: str, provenance: dict[str, str]):
        assert provenance.get("agent") == agent, "the provenance names the publishing agent"
        self.store = ledger.store
        self.clock = ledger.clock
        self.client = client
        self.puller = puller
        self.snapshots = snapshots
        self.space_id = space_id
        self.replica_id = replica_id
        self.key = key
        self.agent = agent
        self.provenance = provenance
        overlay.ensure(self.store)

    # ------------------------------------------------------------ what goes out

    def rebase(self) -> list[AgentChange]:
        """Bring every row of this agent onto the synced state (module docstring); the rows
        left pending or denied, to be judged."""
        out = []
        with self.store.tx() as conn:
            for c in overlay.changes_txn(conn, self.agent).values():
                synced = _live(st.get_state_txn(conn, c.entry_id).synced)
                if same(c.entry, synced):
                    overlay.drop_change_txn(conn, self.agent, c.entry_id)
                    continue
                if c.base_version != (None if synced is None else synced.version):
                    result = merge_entry(c.base, c.entry, synced)
                    if result.clean and result.entry is None:
                        overlay.drop_change_txn(conn, self.agent, c.entry_id)
                        continue
                    if result.clean:
                        assert result.entry is not None
                        c.entry, c.base, c.state, c.refusal = result.entry, synced, \
                            "pending", None
                    else:
                        c.state = "conflict"
                        c.refusal = {
                            "id": c.entry_id, "rule": "conflict",
                            "fields": list(result.conflicts),
                            "message": f"{c.entry_id} changed on the hub since you wrote it "
                                       f"and the two do not merge ({', '.join(result.conflicts)}"
                                       "): read it with at_hub, then write it again"}
                    overlay.put_change_txn(conn, c)
                    if c.state == "conflict":
                        continue
                    if same(c.entry, synced):
                        overlay.drop_change_txn(conn, self.agent, c.entry_id)
                        continue
                out.append(c)
        return out

    def _build_ops(self, report: SyncReport) -> list[Op]:
        access = self.store.get_meta(access_key(self.agent)) or {}
        guardrails: dict[str, Entry] | None = None

        def synced_guardrails() -> dict[str, Entry]:
            nonlocal guardrails
            if guardrails is None:
                guardrails = self.store.synced_guardrails()
            return guardrails

        rows = {c.entry_id: c for c in self.rebase()}
        candidates: list[tuple[EntryState, Op]] = []
        with self.store.engine.connect() as conn:
            for c in rows.values():
                s = st.get_state_txn(conn, c.entry_id)
                base = s.synced.version if s.synced is not None else None
                candidates.append((EntryState(c.entry_id, s.synced, c.entry), Op(c.entry, base)))
            for eid, version in sorted(resolutions_of(self.store, self.agent).items()):
                s = st.get_state_txn(conn, eid)
                if eid in rows or s.held or not s.dirty:
                    continue
                local = s.local if s.local is not None else tombstone(eid)
                if local.version != version or (local.deleted and _live(s.synced) is None):
                    continue
                base = s.synced.version if s.synced is not None else None
                candidates.append((s, Op(local, base)))
        ops: list[Op] = []
        denied: list[dict[str, Any]] = []
        refused: dict[str, dict[str, Any]] = {}
        for s, op in candidates:
            refusal = Publisher.local_denial(access, s, op, synced_guardrails)
            if refusal is not None:
                denied.append(refusal)
                refused[s.id] = refusal
            elif len(ops) < MAX_OPS_PER_BATCH:
                ops.append(op)
        ops, screened = hold_back(ops, allows_from(self.client, self.space_id))
        refused.update({f["id"]: dict(f, rule="content_screened") for f in screened})
        self._mark(rows, refused)
        report.policy_denied = denied
        report.content_screened = screened
        return ops

    def _mark(self, rows: dict[str, AgentChange], refused: dict[str, dict[str, Any]]) -> None:
        """Record on each row whether this sync kept it back, and why."""
        with self.store.tx() as conn:
            for eid, c in rows.items():
                state = "denied" if eid in refused else "pending"
                if (c.state, c.refusal) != (state, refused.get(eid)):
                    c.state, c.refusal = state, refused.get(eid)
                    overlay.put_change_txn(conn, c)

    def _next_batch(self, report: SyncReport) -> Batch | None:
        head = self.store.head()
        assert head is not None
        with self.store.tx() as conn:
            for row in overlay.outbox_txn(conn, self.agent):
                batch = parse_batch(row["body"])
                if (batch.epoch, batch.parent_seq, batch.parent_digest) == (
                        head.epoch, head.seq, head.digest):
                    return batch  # resend unchanged: a replay gets the same receipt
                # its parent is gone: accepted (the pull brought it, and ``rebase`` drops
                # its rows) or never accepted (its rows are still here, built again)
                overlay.drop_outbox_txn(conn, batch.batch_id)
        ops = self._build_ops(report)
        if not ops:
            return None
        ops, provenance = plan_batch(self.store, ops, self.provenance)
        batch = build_batch(self.key, batch_id=new_id(), replica_id=self.replica_id,
                            space=self.space_id, epoch=head.epoch, parent_seq=head.seq,
                            parent_digest=head.digest, ops=ops, provenance=provenance)
        with self.store.tx() as conn:
            overlay.add_outbox_txn(conn, batch.batch_id, self.agent, batch.to_wire(),
                                   self.clock())
        return batch

    # ------------------------------------------------------------ sending

    def replay_outbox(self, report: SyncReport) -> None:
        """Resend a batch of this agent a crash left saved, before anything else moves."""
        head = self.store.head()
        with self.store.engine.connect() as conn:
            rows = overlay.outbox_txn(conn, self.agent)
        if head is None or not rows:
            return
        batch = parse_batch(rows[0]["body"])
        if (batch.epoch, batch.parent_seq, batch.parent_digest) != (head.epoch, head.seq,
                                                                    head.digest):
            return
        try:
            receipt = self.client.push(self.space_id, batch)
        except (HeadChanged, BaseMismatch, EpochChanged, SnapshotRequired):
            return
        self._landed(batch, receipt, report)

    def push(self, report: SyncReport) -> None:
        rounds = 0
        while True:
            batch = self._next_batch(report)
            if batch is None:
                return
            try:
                receipt = self.client.push(self.space_id, batch)
            except (HeadChanged, BaseMismatch, EpochChanged, SnapshotRequired) as e:
                rounds = catch_up(e, rounds, self.puller, self.snapshots, report)
                continue
            except (PolicyDenied, ContentScreened) as e:
                # the hub judged otherwise than the local check (rules changed since the
                # head): the refused rows are marked, nothing is retried blindly
                self._refused(batch, e)
                raise
            except QuireError as e:
                if not e.retryable:
                    with self.store.tx() as conn:
                        overlay.drop_outbox_txn(conn, batch.batch_id)
                raise
            self._landed(batch, receipt, report)

    def _refused(self, batch: Batch, e: QuireError) -> None:
        details = e.details or {}
        items = details.get("denied") or details.get("findings") or []
        named = {str(d.get("id") or d.get("entry")) for d in items if isinstance(d, dict)}
        with self.store.tx() as conn:
            overlay.drop_outbox_txn(conn, batch.batch_id)
            for op in batch.ops:
                c = overlay.change_txn(conn, self.agent, op.entry_id)
                if c is not None and (op.entry_id in named or not named):
                    c.state = "denied"
                    c.refusal = {"id": op.entry_id, "rule": e.code, "message": e.message}
                    overlay.put_change_txn(conn, c)

    def _landed(self, batch: Batch, receipt: dict[str, Any], report: SyncReport) -> None:
        """Accepted: the rows it carried and its outbox row go, then the pull brings the
        batch (and every batch before it) into the store like anyone's."""
        ids = [op.entry_id for op in batch.ops]
        with self.store.tx() as conn:
            overlay.drop_outbox_txn(conn, batch.batch_id)
            for op in batch.ops:
                c = overlay.change_txn(conn, self.agent, op.entry_id)
                if c is not None and c.entry.version == op.entry.version:
                    overlay.drop_change_txn(conn, self.agent, op.entry_id)
            forget_resolutions_txn(conn, ids)
            st.save_receipt_txn(conn, batch.batch_id, receipt)
        report.pushed += len(batch.ops)
        report.batches += 1
        self.puller.pull(report)
        head = self.store.head()
        if head is None or head.epoch != batch.epoch:
            return  # a new epoch: the snapshot replaced this history
        if head.seq < receipt["seq"]:
            raise HubUnverified("the hub's history ends before a batch it gave a receipt for",
                                {"seq": receipt["seq"], "hub_seq": head.seq})
        with self.store.engine.connect() as conn:
            rows = conn.execute("SELECT batch_digest, head FROM history WHERE epoch = ? AND"
                                " seq = ? AND kind != 'snapshot'",
                                (batch.epoch, receipt["seq"])).fetchall()
        if rows and any((r.batch_digest, r.head) != (batch.digest, receipt["head"])
                        for r in rows):
            raise HubUnverified("the pulled change at a receipt's seq is not that batch",
                                {"seq": receipt["seq"], "batch_id": batch.batch_id})


def sync_agent(rep: Replica, publisher: AgentPublisher) -> SyncReport:
    """A sync of an agent session: the vault's edits folded and the hub's changes pulled as
    in ``Replica.sync`` (reads, merges, conflicts: the replica's, whoever pulls), then only
    ``publisher``'s agent's own changes published. The device's outbox is not resent and
    its dirty entries are not sent: they are not this principal's. ``rep`` was built with
    the agent's client; the caller holds the space lock."""
    report = SyncReport()
    rep.flush_vault()
    rep.scan(report)
    try:
        publisher.replay_outbox(report)
        rep.ledger.absorbed = {}
        rep.puller.pull(report)
        if rep.ledger.absorbed:  # a blocked version the pull took back off a local edit
            with rep.store.tx() as conn:
                blocked.absorbed(conn, rep.client, rep.space_id, rep.ledger.absorbed,
                                 rep.clock(), rep.ledger.schedule_write_txn, report)
        publisher.push(report)
    except SpaceDeleted as e:  # stop only on the hub's signed word (replica/engine/deleted.py)
        raise deleted.confirm(rep.client, rep.space_id, e) from e
    rep.flush_vault()
    if report.purged:  # the dropped bytes leave the store's files (replica/engine/purge.py)
        compact_store(rep.store.path)
    return report
