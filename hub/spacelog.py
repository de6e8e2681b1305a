"""The space log, the hub's side (docs/architecture.md, "The log and its witnesses";
shared/merkle.py, shared/tlog.py; decisions.md D140).

    publication (guard, any path)  ──insert_batch_txn──▶ leaf {epoch, seq, head, batch}
    epoch statement (bump, purge, restore) ──epoch_leaf_txn──▶ leaf {epoch, 0, genesis,
                                                                      statement}
    owner sets the witnesses ──set_witnesses──▶ signed policy + leaf {…, witnesses}, audited
    a head is signed ──checkpoint_txn──▶ (size at that head, root, policy digest)
                      signed_state.signed_head signs it as a note into the head
    GET …/log/consistency, …/log/inclusion ──▶ proofs (the nodes above the leaves built
                      first, in a write transaction: ``build``)

Leaves are written in the transaction that decides what they record, with the perfect nodes
they complete (amortized two rows, one read of the space's log row). A log not built to its
end (a space logged by migration 0028) is built when a proof is asked for, and appends then
build as they go; meanwhile a root is computed from the leaves past what is built. The log is never
rewritten: a purge removes content from batches and entries but leaves hold only digests;
a new epoch is one more leaf; a restore is a new epoch too. A hub restored from a backup
that lost data (``quire hub restore --lost-data``) has a shorter log than replicas and witnesses
hold: they refuse it until a member accepts the restore and the witness's operator forgets
the old line (decisions.md D140).

    owner's fork recovery (bump_epoch with ``fork``) ──fork_evidence──▶ the new epoch's
                      statement names the two checkpoints; its leaf is in this log, which
                      survives (replicas republish the other's changes: D146)
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from hub import audit
from hub.access import Principal, space_access_txn
from hub.keys import HubKey
from hub.store import log_sql
from hub.store.db import Store
from hub.store.spaces_sql import SpaceRow, get_space_txn
from shared import merkle, tlog
from shared.canonical import canonical_str
from shared.digest import digest_of, genesis_digest
from shared.errors import Forbidden, InvalidRequest, NotFound
from shared.signed import sign_statement


class LogHead(NamedTuple):
    """What a head's checkpoint says, before the hub signs it (signed_state.signed_head)."""

    size: int
    root: bytes
    policy: str | None  # digest of the witness policy in force, if any was ever set
    epoch: str = ""  # the head it is the log of
    seq: int = 0


def _leaf_txn(conn: Any, space_id: str, data: dict[str, Any], epoch: str, seq: int) -> None:
    text = canonical_str(data)
    log_sql.leaf_txn(conn, space_id, text, merkle.leaf_hash(text.encode()), epoch, seq)


def epoch_leaf_txn(conn: Any, space_id: str, epoch: str, statement: dict[str, Any]) -> None:
    """The leaf of a new epoch (its statement), in the transaction that signs it."""
    _leaf_txn(conn, space_id, tlog.epoch_leaf(epoch=epoch, head=genesis_digest(space_id, epoch),
                                              statement=statement), epoch, 0)


def _tree_txn(conn: Any, space_id: str, proof: Any) -> Any:
    """Run ``proof(tree)`` over the stored nodes, reading exactly those it needs."""
    built = log_sql.built_txn(conn, space_id)
    need = merkle.Tree.needed(proof, built)
    nodes = log_sql.nodes_txn(conn, space_id, need)
    if len(nodes) != len(need):
        raise NotFound("the log does not hold this part", {"reason": "log_missing"})
    return proof(merkle.Tree(merkle.built_upto(nodes.__getitem__, built)))


def checkpoint_txn(conn: Any, space: SpaceRow, seq: int | None = None) -> LogHead | None:
    """The log right after head ``seq`` (default: the space's head) of its epoch; None when
    no leaf leads to that head (a head from before the log: decisions.md D140)."""
    seq = space.head_seq if seq is None else seq
    fast = log_sql.at_head_txn(conn, space.id, space.epoch, seq)
    if fast is not None:  # one statement: the size, the root's nodes, the policy
        return LogHead(fast[0], merkle.fold(fast[1]), _policy_digest(fast[2]), space.epoch,
                       seq)
    size = log_sql.size_at_txn(conn, space.id, space.epoch, seq)
    if size is None:
        if seq != 0 or log_sql.size_txn(conn, space.id) != 0:
            return None
        size = 0  # a new space's first epoch, nothing published yet
    root = merkle.EMPTY_ROOT if size == 0 else _tree_txn(conn, space.id,
                                                         lambda t: t.root(size))
    return LogHead(size, root, _policy_digest(log_sql.policy_txn(conn, space.id, size)),
                   space.epoch, seq)


_DIGESTS: dict[str, str] = {}  # policy statement text → its digest (content-addressed)


def _policy_digest(statement: str | None) -> str | None:
    """The digest a checkpoint names a policy by, each statement's computed once."""
    if statement is None:
        return None
    d = _DIGESTS.get(statement)
    if d is None:
        if len(_DIGESTS) >= 256:
            _DIGESTS.clear()
        d = _DIGESTS[statement] = digest_of(json.loads(statement))
    return d


# ---------------------------------------------------------------- proofs


def build(store: Store, space_id: str, size: int) -> None:
    """Store the perfect nodes the first ``size`` leaves complete (idempotent: a node is a
    function of its leaves, two processes building at once write the same rows)."""
    def txn(conn: Any) -> None:
        built = log_sql.built_txn(conn, space_id)
        if built >= size:
            return
        targets = merkle.completed(built, size) + merkle.frontier_nodes(size)
        need = merkle.Tree.needed(lambda t: [t.node(n) for n in targets], built)
        get = merkle.built_upto(log_sql.nodes_txn(conn, space_id, need).__getitem__, built)
        log_sql.insert_nodes_txn(conn, space_id, [(n, get(n)) for n in targets if n[0]],
                                 size, [get(n) for n in merkle.frontier_nodes(size)])

    store.run_write(txn)


def _int(raw: Any, what: str) -> int:
    try:
        v = int(raw)
    except (TypeError, ValueError):
        raise InvalidRequest(f"{what} must be a whole number") from None
    if v < 0:
        raise InvalidRequest(f"{what} must not be negative")
    return v


def _size(conn: Any, space: SpaceRow) -> int:
    return log_sql.size_txn(conn, space.id)


def consistency(store: Store, p: Principal, space_ref: str, first: Any, second: Any
                ) -> dict[str, Any]:
    """A consistency proof from the log of ``first`` leaves to that of ``second``, and the
    inclusion proof of the last leaf of ``second`` with its data (what binds a head to its
    checkpoint: the leaf names the head)."""
    m, n = _int(first, "first"), _int(second, "second")
    with store.read() as conn:
        space, _ = space_access_txn(conn, p, space_ref, "viewer")
        size = _size(conn, space)
    if not m <= n <= size:
        raise InvalidRequest(f"sizes must satisfy first ≤ second ≤ {size} (the log's size)",
                             {"reason": "log_size", "size": size})
    build(store, space.id, n)
    with store.read() as conn:
        proof, first_root = _tree_txn(conn, space.id, lambda t: (
            t.consistency_proof(m, n), t.root(m) if m else merkle.EMPTY_ROOT))
        # first_root: evidence when another checkpoint of size m has another root
        out: dict[str, Any] = {"first": m, "second": n, "proof": [h.hex() for h in proof],
                               "first_root": first_root.hex()}
        if n:
            data = log_sql.leaf_data_txn(conn, space.id, n - 1)
            last = _tree_txn(conn, space.id, lambda t: t.inclusion_proof(n - 1, n))
            out["last"] = {"index": n - 1, "data": json.loads(data) if data else None,
                           "proof": [h.hex() for h in last]}
    return out


def inclusion(store: Store, p: Principal, space_ref: str, epoch: Any, seq: Any,
              size: Any = None) -> dict[str, Any]:
    """The inclusion proof of the leaf that head ``(epoch, seq)`` is right after (a batch,
    or a new epoch at seq 0) in the log of ``size`` leaves (default: the whole log)."""
    s = _int(seq, "seq")
    if not isinstance(epoch, str):
        raise InvalidRequest("epoch is required")
    with store.read() as conn:
        space, _ = space_access_txn(conn, p, space_ref, "viewer")
        total = _size(conn, space)
        idxs = log_sql.leaf_indexes_txn(conn, space.id, epoch, s)
    n = total if size is None else _int(size, "size")
    if not idxs:
        raise NotFound("no leaf of the log leads to that head", {"reason": "log_missing"})
    if not idxs[0] < n <= total:
        raise InvalidRequest(f"size must be past the leaf and at most {total}",
                             {"reason": "log_size", "size": total})
    build(store, space.id, n)
    with store.read() as conn:
        proof = _tree_txn(conn, space.id, lambda t: t.inclusion_proof(idxs[0], n))
        data = log_sql.leaf_data_txn(conn, space.id, idxs[0])
    return {"index": idxs[0], "size": n, "data": json.loads(data) if data else None,
            "proof": [h.hex() for h in proof]}


# ---------------------------------------------------------------- witness policy


def witnesses(store: Store, p: Principal, space_ref: str) -> dict[str, Any]:
    """The space's witness policies, hub-signed, oldest first (the last is in force)."""
    with store.read() as conn:
        space, _ = space_access_txn(conn, p, space_ref, "viewer")
        return {"policies": [json.loads(s) for s in log_sql.policies_txn(conn, space.id)]}


def set_witnesses(store: Store, key: HubKey, p: Principal, space_ref: str,
                  body: dict[str, Any], now: int) -> dict[str, Any]:
    """A hub owner sets the space's witnesses and how many must co-sign (``quorum``): a
    statement the hub key signs, a leaf of the log (so witnesses see the change in the line
    they co-sign) and an audit event, in one transaction under the space lock."""
    if not p.is_owner or p.delegation_id is not None:
        raise Forbidden("only a hub owner sets a space's witnesses", {"reason": "owner"})
    try:
        tlog.check_witnesses(body.get("witnesses"), body.get("quorum"))
    except ValueError as e:
        raise InvalidRequest(str(e)) from None
    reason = body.get("reason", "")
    if not isinstance(reason, str) or len(reason) > 500:
        raise InvalidRequest("reason is at most 500 characters")

    def txn(conn: Any) -> dict[str, Any]:
        found, _ = space_access_txn(conn, p, space_ref, "viewer")
        space = get_space_txn(conn, found.id, lock=True)
        if space is None:
            raise NotFound("no such space")
        prev = log_sql.policy_txn(conn, space.id)
        prev_wire = None if prev is None else json.loads(prev)
        statement = sign_statement(key.private, tlog.WITNESSES_DOMAIN, tlog.policy_body(
            space=space.id, n=1 if prev_wire is None else int(prev_wire["n"]) + 1,
            quorum=body["quorum"], witnesses=body["witnesses"],
            previous=None if prev_wire is None else digest_of(prev_wire), at=now,
            by=p.user_id))
        leaf = log_sql.size_txn(conn, space.id)
        _leaf_txn(conn, space.id, tlog.policy_leaf(epoch=space.epoch, seq=space.head_seq,
                                                   head=space.head_digest, policy=statement),
                  space.epoch, space.head_seq)
        log_sql.insert_policy_txn(conn, space.id, statement["n"], canonical_str(statement),
                                  leaf, now)
        audit.record_space_txn(conn, space, at=now, action="witnesses.set",
                               actor=p.actor(), details={
                                   "n": statement["n"], "quorum": statement["quorum"],
                                   "witnesses": [{"name": w["name"], "key": w["key"]}
                                                 for w in statement["witnesses"]],
                                   "digest": digest_of(statement), "reason": reason})
        return {"policy": statement, "digest": digest_of(statement), "leaf": leaf}

    return store.run_write(txn)


# ---------------------------------------------------------------- fork recovery


def fork_evidence(key: HubKey | None, p: Principal, space_id: str, fork: Any) -> list[Any]:
    """The evidence a fork recovery carries (``bump_epoch`` with ``fork``): two checkpoints
    of this space's log, signed by this hub's key, that prove two histories
    (``tlog.equivocation``, as ``quire verify --evidence`` checks them). Hub owners only:
    the new epoch's statement names them, this hub's log is the one that survives, and the
    witnesses take it as their line again (hub/witness/app.py ``release``)."""
    if not p.is_owner:
        raise Forbidden("only a hub owner recovers a space from a fork", {"reason": "owner"})
    notes = fork.get("checkpoints") if isinstance(fork, dict) else None
    if not (isinstance(notes, list) and len(notes) == 2 and key is not None):
        raise InvalidRequest("fork is {\"checkpoints\": [NOTE, NOTE], \"consistency\"?}",
                             {"reason": "fork"})
    consistency = fork.get("consistency")  # checkpoints of different sizes: the proof
    try:
        tlog.equivocation(notes[0], notes[1], consistency)
        cp = tlog.parse_checkpoint(tlog.parse_note(notes[0]).body)
    except (ValueError, TypeError) as e:
        raise InvalidRequest(f"the fork's evidence proves nothing: {e}",
                             {"reason": "fork"}) from None
    if cp.space != space_id or cp.hub_key != key.public:
        raise InvalidRequest("the fork's evidence is of another space or another hub key",
                             {"reason": "fork"})
    return [str(n) for n in notes] + ([] if consistency is None else [consistency])
