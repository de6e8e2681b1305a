"""The publication guard (docs/architecture.md, "A publication").

    publish()
      1. parse and validate the batch, recompute its digest          (pure, shared.wire)
      2. prepare, outside any lock: replay check, principal, role, replica, signature,
         provenance (an agent it names is the caller), epoch, current versions of the
         touched entries, the caller's read scope (hub/scope.py: it writes only what it
         may read), bases, rules, content screening
         of the entries it writes (hub/screening.py: content_screened, nothing written),
         versions a revert blocked (hub/blocks.py: version_blocked), attachments whose bytes
         are not uploaded (hub/blobs.py: blob_missing, too_large)
      3. hooks.after_prepare()                                       (tests pause here)
      4. commit_txn(), in the one transaction that commits: lock the space row, re-read
         principal, role, replica, epoch and rules version; compare parent with the head;
         re-check every base; judge a guardrail that takes a key on the key's holders read
         now (hub/policy.py); write batch, entries, head, receipt and audit event.

Why re-read at commit: preparation ran without a lock, so a revocation, a role change, an
epoch bump, a rule change or a guardrail holding the key a new one takes may have committed
since. Only what is read under the space lock, in the transaction that advances the head,
is true when the batch lands. Device revocation and user deactivation do not take the space
lock (a device reaches many spaces), so the device and user rows are re-read locked
(PostgreSQL ``FOR SHARE``): such a change waits for the publication's commit instead of
committing between the re-read and it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hub import audit, blob_scope, blobs, blocks, policy, signed_state
from hub import scope as scopes
from hub import screening as screen
from hub.access import (
    Principal,
    authenticate_device_txn,
    check_replica_row,
    check_replica_txn,
    effective_role,
    raise_deleted_txn,
    recheck_device_row_txn,
    recheck_device_txn,
    space_access_txn,
)
from hub.admission import check_names, check_portable, names_asked
from hub.events import CHANNEL, Broker
from hub.keys import HubKey
from hub.logs import current_request_id, event, reason_of
from hub.quotas import HubQuotas, count_txn
from hub.quotas import check_txn as check_quota_txn
from hub.store.batches import (
    PriorBatch,
    batch_by_ids_txn,
    contents_reads,
    current_versions_txn,
    head_digest_at_txn,
    insert_batch_txn,
    upsert_entries_txn,
    versions_of,
    versions_reads,
)
from hub.store.db import Store
from hub.store.guard_reads import (
    CommitContext,
    PrepareContext,
    commit_context_of,
    commit_context_read,
    prepare_context_of,
    prepare_context_read,
)
from hub.store.names_sql import lowered_of, lowered_reads
from hub.store.principals import role_txn
from hub.store.quotas_sql import live_counts_txn, usage_row_txn
from hub.store.rules import list_rules_txn, rules_of, rules_read
from hub.store.spaces_sql import (
    SpaceRow,
    advance_head_and_audit_txn,
    get_space_txn,
    raise_protocol_txn,
)
from hub.store.sql import notify_txn, pipelined, read_together
from hub.tokens import AccessClaims
from shared import RAW_PROTOCOL
from shared.attachments import DEFAULT_MAX_BYTES, is_attachment
from shared.canonical import canonical_str
from shared.digest import chain_next, genesis_digest
from shared.errors import (
    BaseMismatch,
    BatchConflict,
    EpochChanged,
    Forbidden,
    HeadChanged,
    InvalidRequest,
    NotFound,
    PolicyDenied,
    QuireError,
)
from shared.wire import (
    ATTESTED_PROVENANCE,
    Batch,
    Op,
    parse_batch,
    receipt_body,
    sign_receipt,
)

log = logging.getLogger("quire.hub.guard")


@dataclass
class GuardHooks:
    """Test seams. ``after_prepare`` runs between preparation and the committing
    transaction; ``in_commit(conn, batch, point)`` runs inside it, at ``"locked"`` (the space
    row just locked) and ``"written"`` (every check passed, every row written, the commit
    next). Tests use them to change the world at the worst moment, or to fail there."""

    after_prepare: Callable[[Batch], None] | None = None
    in_commit: Callable[[Any, Batch, str], None] | None = None


@dataclass(frozen=True)
class Prepared:
    space_id: str
    epoch: str
    rules_version: int
    role: str
    device_key: str
    # canonical JSON of the batch and of each op's entry, as stored: pure functions of the
    # batch, computed while preparing so the committing transaction (serialized by the
    # space lock) does not
    body: str
    contents: tuple[str, ...]
    # each op's ``entries.key_digest`` (hub/policy.py ``key_digest_of``), pure as well
    key_digests: tuple[str | None, ...] = ()
    # the ops that take a guardrail key another guardrail may hold (hub/policy.py
    # ``judge_txn``), judged again under the space lock, with the space rules they were
    # prepared under (the same at commit, or ``rules_changed``)
    claims: tuple[int, ...] = ()
    rules: tuple[dict[str, Any], ...] = ()
    # the space's folder mapping the kinds were judged under (the same at commit, or
    # ``rules_changed``: a mapping change bumps the rules version)
    folders: dict[str, str] | None = None


@dataclass
class Outcome:
    receipt: str  # canonical JSON, served as stored
    replayed: bool
    seq: int = 0
    space_id: str = ""
    head_digest: str = ""
    epoch: str = ""
    at: int = 0
    state: str = ""  # the state root after this batch (hub/signed_state.py)


def check_bases(batch: Batch, current: dict[str, tuple[str, bool]]) -> None:
    """Every op's base must be the entry's current version (creates: absent or tombstone)."""
    bad = []
    for i, op in enumerate(batch.ops):
        cur = current.get(op.entry_id)
        if op.base is None:
            ok = cur is None or cur[1]
        else:
            ok = cur is not None and cur[0] == op.base
        if ok and op.entry.deleted and (cur is None or cur[1]):
            ok = False  # deleting what is already gone
        if not ok:
            bad.append({"op": i, "id": op.entry_id, "base": op.base,
                        "current": cur[0] if cur else None})
    if bad:
        raise BaseMismatch(f"{len(bad)} op(s) were made from a version that is not current; "
                           "pull, merge and push again", {"ops": bad})


def check_rules(changes: list[policy.Change], rules: list[dict[str, Any]],
                principal: Principal, role: str) -> None:
    """The effective rules (typed defaults + the space's) on what the batch does to the
    hub's state (``policy.changes_txn``), never on what the client declares."""
    actor = policy.Actor(principal.user_id, role, principal.agent)
    denied = policy.denied_changes(policy.effective_rules(rules), actor, changes)
    if denied:
        raise PolicyDenied(f"{len(denied)} op(s) are denied by the space rules; the whole "
                           f"batch was refused: {denied[0]['reason']}",
                           {"denied": denied, "reason": "rules"})


def check_provenance(batch: Batch, principal: Principal) -> None:
    """The batch's signed provenance may name an agent only when that agent is the caller:
    a device's own credential cannot publish a batch that says an agent wrote it, nor one
    agent's delegation a batch naming another (the audit's actor and the provenance must
    tell the same story)."""
    prov = batch.provenance or {}
    claimed = prov.get("agent")
    if claimed is not None and claimed != principal.author_agent:
        raise InvalidRequest(
            f"the batch's provenance names agent {claimed!r} but the caller is "
            + (f"agent {principal.author_agent!r}" if principal.author_agent
               else "the device itself"),
            {"reason": "provenance_agent", "agent": principal.author_agent})
    # only the hub's own attested publication (hub/attested_publish.py) says who approved
    # a change: a replica's batch claiming it would put a member's name on it
    said = {k: prov[k] for k in ATTESTED_PROVENANCE if k in prov}
    want = {} if principal.via_hub is None else {
        k: v for k, v in principal.via_hub.provenance().items() if k in ATTESTED_PROVENANCE}
    if said != want:
        raise InvalidRequest("the batch's provenance claims a hub attestation (attested, "
                             "proposed_by, approved_by, proposal) it does not have",
                             {"reason": "provenance_attested"})


def _check_replica_txn(conn: Any, batch: Batch, principal: Principal, space_id: str) -> None:
    check_replica_txn(conn, principal, batch.replica_id, space_id)


def _replay_txn(conn: Any, batch: Batch, space_id: str) -> Outcome | None:
    return _replay_of(batch_by_ids_txn(conn, batch.replica_id, batch.batch_id), batch,
                      space_id)


def _replay_of(prior: PriorBatch | None, batch: Batch, space_id: str) -> Outcome | None:
    if prior is None:
        return None
    if prior.digest != batch.digest or prior.space_id != space_id:
        raise BatchConflict("this batch id was already accepted with other content; "
                            "use a new batch id", {"batch_id": batch.batch_id})
    return Outcome(receipt=prior.receipt, replayed=True)


@dataclass(frozen=True)
class Preread:
    """What preparing reads, read together (``preread_txn``): the single-row reads, and the
    touched entries' versions, the rules and the blocked versions of the space the batch
    names (used only once that space is the one the path names)."""

    ctx: PrepareContext
    current: dict[str, tuple[str, bool]]
    rules: list[dict[str, Any]]
    blocked: list[Any] | None  # None: no op writes a version that could be blocked


def preread_txn(conn: Any, batch: Batch, principal: Principal | AccessClaims,
                space_ref: str) -> Preread:
    """The preparing reads in one round trip on PostgreSQL (``read_together``)."""
    blocked = blocks.check_read(batch.space, batch.ops)
    versions = versions_reads(batch.space, [op.entry_id for op in batch.ops])
    rows = read_together(conn, [
        prepare_context_read(device_id=principal.device_id, user_id=principal.user_id,
                             space_ref=space_ref, replica_id=batch.replica_id,
                             batch_id=batch.batch_id),
        rules_read(batch.space), *versions, *([blocked] if blocked else [])])
    return Preread(prepare_context_of(rows[0][0], principal.user_id),
                   versions_of(rows[2:2 + len(versions)]), rules_of(rows[1]),
                   rows[-1] if blocked else None)


def prepare_txn(conn: Any, batch: Batch, principal: Principal, space_ref: str,
                dev: Any = None, screening: screen.Config = screen.DEFAULT,
                pre: Preread | None = None, attachment_limit: int = DEFAULT_MAX_BYTES
                ) -> tuple[Principal, Prepared | None, Outcome | None]:
    """``dev``: the device row, when this transaction already read it (authentication).
    ``attachment_limit``: the hub's limit on one attachment (a space may set its own).
    ``screening``: the content screening the batch passes (after the rules: a refusal
    for policy says nothing about the content). ``pre``: the reads below, as this
    transaction already made them (``preread_txn``)."""
    ctx = pre.ctx if pre is not None else None
    if dev is None:
        principal, dev = recheck_device_txn(conn, principal)
    if ctx is None:
        space, role = space_access_txn(conn, principal, space_ref, "viewer")
        replay = _replay_txn(conn, batch, space.id)
    else:
        space, role = space_access_txn(
            conn, principal, space_ref, "viewer", found=ctx.space,
            member_role=lambda: ctx.role if ctx.user_id == principal.user_id
            else role_txn(conn, ctx.space.id if ctx.space else "", principal.user_id))
        replay = _replay_of(ctx.prior, batch, space.id)
    if batch.space != space.id:
        raise InvalidRequest("batch.space does not match the space in the path",
                             {"space": space.id})
    if replay is not None:
        return principal, None, replay
    if not policy.at_least(role, "editor"):
        raise Forbidden(f"your role in this space is {role}; publishing needs editor",
                        {"role": role, "required": "editor", "reason": "role"})
    if ctx is None:
        _check_replica_txn(conn, batch, principal, space.id)
    else:
        check_replica_row(principal, ctx.replica, space.id)
    if not batch.verify_signature(dev.public_key):
        raise InvalidRequest("batch signature does not verify with this device's key",
                             {"reason": "bad_signature"})
    check_provenance(batch, principal)
    if batch.epoch != space.epoch:
        raise EpochChanged("the space moved to another epoch; take a snapshot and replay "
                           "local changes", {"epoch": space.epoch})
    # ``pre`` read them for batch.space: the space checked above
    current = pre.current if pre is not None else current_versions_txn(
        conn, space.id, [op.entry_id for op in batch.ops])
    rules = pre.rules if pre is not None else list_rules_txn(conn, space.id)
    # before the bases: a base mismatch would tell the current version of an entry the
    # caller may not read (hub/scope.py; the rules version is compared again at commit)
    scopes.check_writes_txn(conn, space.id, batch.ops, current, rules, principal, role,
                            space.folders)
    check_bases(batch, current)
    check_portable(batch.ops, current)
    # attachments: well formed, within the limit, their bytes uploaded (hub/blobs.py)
    blobs.check_batch_txn(conn, space.id, batch.ops, attachment_limit,
                          lambda held: blob_scope.unproven_txn(conn, principal, space, role,
                                                               rules, held))
    # kinds under the space's folder mapping, read with the rules version compared at commit
    folders = space.folders
    changes, claims = policy.judge_txn(conn, space.id, batch.ops, current, folders)
    check_rules(changes, rules, principal, role)
    if principal.agent is not None:  # an agent's mass delete (shared/policy.py bulk_deletes)
        check_rules(policy.bulk_deletes(changes, _live_count_txn(conn, space.id) if
                                        policy.needs_live_count(changes) else None),
                    rules, principal, role)
    # revert --block (hub/blocks.py)
    if pre is None:
        blocks.check_txn(conn, space.id, batch.ops)
    elif pre.blocked is not None:
        blocks.check_rows(batch.ops, pre.blocked)
    screen.check_txn(conn, space.id, batch.ops, screening, batch.provenance)
    return principal, Prepared(space.id, space.epoch, space.rules_version, role,
                               dev.public_key, canonical_str(batch.to_wire()),
                               tuple(canonical_str(op.entry.to_dict()) for op in batch.ops),
                               tuple(policy.key_digest_of(op.entry, folders) for op in batch.ops),
                               claims, tuple(rules) if claims else (), folders), None


def _live_count_txn(conn: Any, space_id: str) -> int:
    """The space's live pages as its quota row counts them (counted when it has none)."""
    row = usage_row_txn(conn, space_id)
    return int(row["entries"]) if row is not None else live_counts_txn(conn, space_id)[0]


def known_head_txn(conn: Any, space: SpaceRow, seq: int, digest: str) -> bool:
    """Was ``(seq, digest)`` a head of the space's current epoch (genesis included)?"""
    return _known_head(space, seq, digest,
                       lambda: head_digest_at_txn(conn, space.id, space.epoch, seq))


def _known_head(space: SpaceRow, seq: int, digest: str,
                head_at: Callable[[], str | None]) -> bool:
    """``known_head_txn``; ``head_at()``: the head digest after batch ``seq`` of the epoch."""
    if seq < 0 or seq > space.head_seq:
        return False
    if seq == space.head_seq:
        return digest == space.head_digest
    if seq == 0:
        return digest == genesis_digest(space.id, space.epoch)
    return head_at() == digest


def _commit_reads_txn(conn: Any, space: SpaceRow, batch: Batch, principal: Principal,
                      quota: bool, state_root: bool, claims: tuple[int, ...] = ()
                      ) -> tuple[CommitContext, dict[str, tuple[str, bool]],
                                 dict[str, str] | None,
                                 tuple[dict[int, bytes] | None, dict[str, Any] | None],
                                 list[list[Any]], list[str]]:
    """What the committing transaction reads once it holds the space lock, in one round
    trip on PostgreSQL (``read_together``): the re-reads (``commit_context_read``), the
    current versions of the touched entries, their live contents (the quota measures
    them), the holders of the guardrail keys the ``claims`` take (hub/policy.py
    ``takeover_reads``) and the kept lattices of their buckets (the state root moves with
    them; and the folder tree's nodes on their paths), and the live entries whose names a create may collide with (hub/admission.py
    ``names_asked``: a create is an op without a base, bases being checked here). Only
    writes under the same lock change any of it, so reading it together is reading it in
    turn."""
    ids = [op.entry_id for op in batch.ops]
    versions = versions_reads(space.id, ids)
    contents = contents_reads(space.id, ids) if quota else []
    reads = [commit_context_read(
        conn.dialect.name, space_id=space.id, epoch=space.epoch, parent_seq=batch.parent_seq,
        device_id=principal.device_id, user_id=principal.user_id,
        replica_id=batch.replica_id, batch_id=batch.batch_id, quota=quota),
        *versions, *contents]
    holders = policy.takeover_reads(space.id, batch.ops, claims, space.folders) if claims else []
    reads += holders
    asked = names_asked([op for op in batch.ops if op.base is None], {})
    names = lowered_reads(space.id, asked) if asked else []
    reads += names
    tree = state_root and signed_state.FOLDER_TREE
    if tree:
        reads.append(signed_state.folder_read(space.id, batch.ops))
    if state_root:
        reads.append(signed_state.lattice_read(space.id, batch.ops))
    rows = read_together(conn, reads)
    ctx = commit_context_of(rows[0][0], space.id, quota)
    current = versions_of(rows[1:1 + len(versions)])
    live = {eid: c for part in rows[1 + len(versions):1 + len(versions) + len(contents)]
            for eid, c in part} if quota else None
    at = 1 + len(versions) + len(contents)
    lattices = signed_state.lattices_of(rows[-1]) if state_root else None
    folders = signed_state.folder_nodes_of(rows[-2]) if tree else None
    found = lowered_of(rows[at + len(holders):at + len(holders) + len(names)])
    return ctx, current, live, (lattices, folders), rows[at:at + len(holders)], found


def commit_txn(conn: Any, key: HubKey, batch: Batch, principal: Principal, prep: Prepared,
               now: int, rebase: bool = False, state_root: bool = True,
               hooks: GuardHooks | None = None, quota: HubQuotas | None = None,
               request_id: str | None = None,
               then_txn: Callable[[Any, Outcome], None] | None = None) -> Outcome:
    """With ``rebase``, a batch made on an earlier head of this epoch is chained on the
    current head, provided every base is still current (checked below, under the lock):
    per-entry bases guard concurrent edits; the head only orders them (docs/decisions.md).

    ``then_txn(conn, outcome)``: runs in this transaction once every row is written (a
    proposal is marked accepted there, hub/proposals.py); what it raises refuses the batch."""
    space = get_space_txn(conn, prep.space_id, lock=True)
    if space is None:
        raise NotFound("the space no longer exists")
    if space.deleted_at is not None:  # deleted since preparation (hub/space_delete.py)
        raise_deleted_txn(conn, space)
    if hooks is not None and hooks.in_commit is not None:
        hooks.in_commit(conn, batch, "locked")
    # every re-read below, after the lock (and after the hook: what a concurrent change
    # committed by now is seen), in one round trip; the checks run in their usual order
    ctx, current, contents, kept, holders, named = _commit_reads_txn(
        conn, space, batch, principal, quota is not None, state_root, prep.claims)
    # a concurrent publish of the very same batch may have landed since preparation
    replay = _replay_of(ctx.prior, batch, space.id)
    if replay is not None:
        return replay
    if space.epoch != prep.epoch or batch.epoch != space.epoch:
        raise EpochChanged("the space moved to another epoch; take a snapshot and replay "
                           "local changes", {"epoch": space.epoch})
    if (batch.parent_seq, batch.parent_digest) != (space.head_seq, space.head_digest) and not (
            rebase and _known_head(space, batch.parent_seq, batch.parent_digest,
                                   lambda: ctx.parent_head)):
        raise HeadChanged("the head moved since this batch was made; pull, merge, push again",
                          {"seq": space.head_seq, "digest": space.head_digest})
    # read locked (FOR SHARE) until commit: a revocation or deactivation that does not lock
    # the space waits
    user_before = principal.user_id
    principal = recheck_device_row_txn(conn, principal, ctx.device)[0]
    # the space row is already locked and read: check the role on it, not a fresh lookup
    role = effective_role(principal, space.id, lambda: ctx.role if principal.user_id ==
                          user_before else role_txn(conn, space.id, principal.user_id))
    if role is None:
        raise NotFound("you are no longer a member of this space", {"reason": "not_member"})
    if not policy.at_least(role, "editor"):
        raise Forbidden(f"your role in this space is now {role}; publishing needs editor",
                        {"role": role, "required": "editor", "reason": "role"})
    check_replica_row(principal, ctx.replica, space.id)
    if space.rules_version != prep.rules_version or role != prep.role:
        # evaluated under other rules: the client retries and is judged by the new ones
        raise HeadChanged("the space rules changed while this batch was prepared; retry",
                          {"reason": "rules_changed", "seq": space.head_seq,
                           "digest": space.head_digest})
    check_bases(batch, current)
    # a create whose name another batch took since preparing (hub/admission.py)
    check_names(batch.ops, current, named)
    if prep.claims:
        # a guardrail that takes a key is an update of the key's holders (hub/policy.py):
        # judged on the holders read under this lock, as one may have landed since the
        # batch was prepared; with the bases current, the claims themselves still hold
        check_rules(policy.takeovers_of(batch.ops, prep.claims, holders, prep.folders),
                    list(prep.rules),
                    principal, role)
    body, new_contents = prep.body, list(prep.contents)
    rows = [{"entry_id": op.entry_id, "version": op.entry.version, "deleted": op.entry.deleted,
             "content": content, "key_digest": kd}
            for op, content, kd in zip(batch.ops, new_contents, prep.key_digests, strict=True)]
    # before anything is written (hub/quotas.py); the counts are written with the rest
    counts = None if quota is None else check_quota_txn(
        conn, quota, space.id, batch.ops, current, body, new_contents, ctx.quota, contents)
    # PostgreSQL: what follows is written in one pipeline (hub/store/sql.py
    # ``pipelined``): the writes go out together, one round trip. Plain SQL only in here
    # (``Sql``), no SQLAlchemy statement: those read their results at once.
    with pipelined(conn):
        if counts is not None:
            count_txn(conn, counts)
        seq = space.head_seq + 1
        head = chain_next(space.head_digest, batch.digest)
        # the signed state root moves with the head, O(ops) (hub/signed_state.py)
        root = signed_state.advance_txn(conn, space.id, signed_state.batch_changes(
            batch.ops, current), ctx.root, *kept) if state_root \
            else signed_state.DISABLED_ROOT
        receipt = canonical_str(sign_receipt(key.private, receipt_body(
            space=space.id, batch_id=batch.batch_id, replica_id=batch.replica_id, seq=seq,
            head=head, epoch=space.epoch, accepted_at=now, digest=batch.digest)))
        insert_batch_txn(conn, space_id=space.id, epoch=space.epoch, seq=seq,
                         batch_id=batch.batch_id, replica_id=batch.replica_id,
                         digest=batch.digest, head_digest=head, user_id=principal.user_id,
                         device_id=principal.device_id, agent=principal.author_agent,
                         accepted_at=now, body=body, receipt=receipt,
                         state_root=root)
        upsert_entries_txn(conn, space.id, space.epoch, seq, rows, set(current))
        tip = audit.record_txn(conn, chain=space.id, tip=(space.audit_seq,
                                                          space.audit_digest),
                               at=now, action="publish", actor=principal.actor(),
                               details={"batch_id": batch.batch_id,
                                        "replica_id": batch.replica_id, "seq": seq,
                                        "digest": batch.digest, "head": head,
                                        "ops": len(batch.ops),
                                        "provenance": batch.provenance},
                               advance=False, request_id=request_id)
        advance_head_and_audit_txn(conn, space.id, seq, head, tip)
        if any(_needs_current_replicas(op) for op in batch.ops):
            raise_protocol_txn(conn, space.id, RAW_PROTOCOL)  # old replicas cannot read it
        # delivered to other hub processes exactly when this transaction commits (§5.6)
        notify_txn(conn, CHANNEL, Broker.payload("head", {
            "space": space.id, "epoch": space.epoch, "seq": seq, "digest": head, "at": now,
            "state": root}))
    out = Outcome(receipt=receipt, replayed=False, seq=seq, space_id=space.id,
                  head_digest=head, epoch=space.epoch, at=now, state=root)
    if then_txn is not None:
        then_txn(conn, out)
    if hooks is not None and hooks.in_commit is not None:
        hooks.in_commit(conn, batch, "written")
    return out


def publish(store: Store, key: HubKey, principal: Principal | AccessClaims, space_ref: str,
            raw: Any, *,
            max_ops: int, max_body: int, now: Callable[[], int],
            hooks: GuardHooks | None = None, rebase: bool = False,
            state_root: bool = True, quota: HubQuotas | None = None,
            screening: screen.Config = screen.DEFAULT,
            then_txn: Callable[[Any, Outcome], None] | None = None) -> Outcome:
    """Accept a batch exactly once, or raise the error that says why not.

    ``then_txn``: see ``commit_txn`` (not run for a replay).

    ``principal``: the caller, or the request's verified token claims (then the device is
    read in the preparing transaction: one read transaction per publication).

    ``rebase``: accept a batch whose parent is an earlier head of this epoch when its bases
    are current, chained on the current head (``?rebase=1``, docs/protocol.md).

    Every decision is logged as one ``guard`` line (accepted, replayed or refused, with
    the code and reason): ids and counts only, never the batch's content."""
    try:
        out = _publish(store, key, principal, space_ref, raw, max_ops=max_ops,
                       max_body=max_body, now=now, hooks=hooks, rebase=rebase,
                       state_root=state_root, quota=quota, screening=screening,
                       then_txn=then_txn)
    except QuireError as e:
        event(log, "guard", outcome="refused", code=e.code,
              reason=reason_of(e.details) or None,
              space=space_ref if isinstance(space_ref, str) and len(space_ref) <= 64 else None)
        raise
    event(log, "guard", outcome="replayed" if out.replayed else "accepted",
          space=out.space_id or None, seq=out.seq or None)
    return out


def _publish(store: Store, key: HubKey, principal: Principal | AccessClaims, space_ref: str,
             raw: Any, *, max_ops: int, max_body: int, now: Callable[[], int],
             hooks: GuardHooks | None, rebase: bool, state_root: bool,
             quota: HubQuotas | None, screening: screen.Config,
             then_txn: Callable[[Any, Outcome], None] | None = None) -> Outcome:
    # PostgreSQL: no BEGIN/COMMIT round trips; what preparing reads is re-checked under the
    # space lock when it matters (module docstring), as under READ COMMITTED before
    with store.read(statements=True) as conn:
        claims = principal if isinstance(principal, AccessClaims) else None
        try:
            batch = parse_batch(raw, max_ops=max_ops, max_body=max_body)
        except QuireError:
            if claims is not None:  # authentication answers first, as on every endpoint
                authenticate_device_txn(conn, claims, now())
            raise
        # the device (the request's verified token: read once, here), the space, the role,
        # the replay check, the replica, versions, rules and blocks in one round trip;
        # checked in the usual order
        pre = preread_txn(conn, batch, principal, space_ref)
        if isinstance(principal, AccessClaims):
            principal, dev = authenticate_device_txn(conn, principal, now(), pre.ctx.device)
        else:
            principal, dev = recheck_device_row_txn(conn, principal, pre.ctx.device)
        principal, prep, replay = prepare_txn(
            conn, batch, principal, space_ref, dev, screening, pre,
            quota.max_attachment_bytes if quota is not None else DEFAULT_MAX_BYTES)
    if replay is not None:
        return replay
    assert prep is not None
    if hooks is not None and hooks.after_prepare is not None:
        hooks.after_prepare(batch)
    rid = current_request_id()  # the group's leader may run this in its own thread
    # the space's own lane: publications to other spaces commit beside it (hub/store/db.py)
    return store.commit_group.run(lambda conn: commit_txn(conn, key, batch, principal, prep,
                                                          now(), rebase, state_root, hooks,
                                                          quota, rid, then_txn),
                                  key=prep.space_id)


def _needs_current_replicas(op: Op) -> bool:
    """Does this op hold what a replica before protocol 2 cannot read? A file's ``raw``
    text, a rename's ``from`` (an unknown field: it would stop pulling) and an attachment
    (it would write the file as a page): the space then refuses such replicas
    ``upgrade_required`` rather than let them fail or write the wrong file."""
    return op.entry.raw is not None or op.moved_from is not None or is_attachment(op.entry)
