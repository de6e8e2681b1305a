"""Proposals: a change an agent's rules refuse, filed with its reason, for a member who may
make it to accept or reject (docs/agents.md, "Proposals"; docs/decisions.md D135).

    file      an agent (delegated token) of a member of the space: the whole proposed entry
              (or a delete), the version it wrote against (``base``, the current one, else
              ``base_mismatch``: sync first) and its reason ─────────────────► open
    accept    a member acting as themselves (never an agent): published hub-attested
              (hub/attested_publish.py) through the guard with the MEMBER's role and rules,
              decided at accept time in the committing transaction; the proposal is closed
              in that same transaction ─────────────────────────────────────► accepted
              its base moved (the guard's base_mismatch): nothing overwritten ► stale
              the member may not make it (forbidden, policy_denied …): it stays open
    reject    a member who may make the change, or the agent's own member ──► rejected
    withdraw  the proposing agent (same member, same agent name) ──────────► withdrawn

Every move is an audit event of the space (``proposal.file``, ``.reject``, ``.withdraw``,
``.stale``); an acceptance is the ``publish`` event itself, whose actor names the accepting
member, the hub-held device and the agent (``attested``) and whose provenance the proposal.
Only ``open`` moves, by one conditional UPDATE: two deciders racing, one wins and the other
gets ``proposal_closed``.

Who sees them: a member of the space sees every proposal of it, each with ``can_accept``
(the guard's pure rule evaluation for them now); an agent sees only its own.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable
from typing import Any

from hub import audit, guard, policy
from hub import scope as scopes
from hub import screening as screen
from hub.access import HubAttested, Principal, space_access_txn
from hub.admission import check_portable
from hub.attested_publish import publish_attested
from hub.keys import HubKey
from hub.store import proposals_sql as sql
from hub.store.batches import current_contents_txn, current_versions_txn
from hub.store.db import Store
from hub.store.principals import names_txn
from hub.store.rules import list_rules_txn
from shared.canonical import canonical_str
from shared.entry import DEFAULT_MAX_BODY, make_entry
from shared.errors import (
    BaseMismatch,
    Forbidden,
    InvalidRequest,
    NotFound,
    PolicyDenied,
    ProposalClosed,
    ProposalStale,
)
from shared.ids import is_id, new_id
from shared.wire import Op, parse_op

STATES = ("open", "accepted", "rejected", "withdrawn", "stale")
MAX_REASON = 2000
MAX_OPEN_PER_AGENT = 50  # open proposals one agent of one member may have in a space
MAX_LISTED = 200
DIFF_LINES = 2000


# ---------------------------------------------------------------- pure


def entry_lines(entry: dict[str, Any] | None) -> list[str]:
    """An entry as lines for a diff: its fields, then its body (None: absent)."""
    if entry is None or entry.get("deleted"):
        return []
    head = [f"title: {entry.get('title', '')}",
            f"tags: {', '.join(entry.get('tags') or [])}",
            f"links: {', '.join(entry.get('links') or [])}",
            f"meta: {json.dumps(entry.get('meta') or {}, sort_keys=True, ensure_ascii=False)}",
            "---"]
    return head + str(entry.get("body") or "").splitlines()


def diff(current: dict[str, Any] | None, proposed: dict[str, Any] | None) -> list[str]:
    """Unified diff lines from the current entry to the proposed one: at most DIFF_LINES,
    then, when there are more, one line saying how many are not shown (a reviewer must
    never take a cut diff for the whole change: ``diff_complete`` in ``show``)."""
    out = list(difflib.unified_diff(entry_lines(current), entry_lines(proposed),
                                    "current", "proposed", lineterm="", n=3))
    if len(out) <= DIFF_LINES:
        return out
    return [*out[:DIFF_LINES], f"@@ {len(out) - DIFF_LINES} more lines of this diff are not "
            "shown: read the whole proposal (quire proposals show ID --json) @@"]


def _reason(body: dict[str, Any]) -> str:
    r = body.get("reason")
    if not isinstance(r, str) or not r.strip() or len(r) > MAX_REASON or "\x00" in r:
        raise InvalidRequest(f"reason: say why, in 1 to {MAX_REASON} characters")
    return r.strip()


# ---------------------------------------------------------------- views


def _view(row: sql.ProposalRow, names: dict[str, str], *, can_accept: bool | None = None
          ) -> dict[str, Any]:
    entry = json.loads(row.content)
    out: dict[str, Any] = {
        "id": row.id, "space": row.space_id, "entry_id": row.entry_id,
        "op": "delete" if row.deleted else "put", "base": row.base, "version": row.version,
        "entry": None if row.deleted else entry, "agent": row.agent, "user": row.user_id,
        "user_name": names.get(row.user_id), "reason": row.reason, "state": row.state,
        "created_at": row.created_at, "decided_at": row.decided_at,
        "decided_by": row.decided_by,
        "decided_by_name": names.get(row.decided_by) if row.decided_by else None,
        "note": row.note, "seq": row.seq}
    if can_accept is not None:
        out["can_accept"] = can_accept
    return out


def _is_agent(p: Principal) -> bool:
    return p.agent is not None or p.delegation_id is not None


def _own(p: Principal, row: sql.ProposalRow) -> bool:
    """Is ``p`` the agent that filed ``row``?"""
    return p.agent == row.agent and p.user_id == row.user_id


def _op_of(row: sql.ProposalRow) -> Op:
    return Op(entry=make_entry(json.loads(row.content)), base=row.base)


def may_make_txn(conn: Any, space_id: str, p: Principal, role: str,
                 row: sql.ProposalRow) -> bool:
    """Would the guard let ``p`` (as themselves) publish this change now? Its role and the
    rules on the real diff, as the guard judges them (the guard decides again at accept)."""
    if _is_agent(p) or not policy.at_least(role, "editor"):
        return False
    op = _op_of(row)
    current = current_versions_txn(conn, space_id, [op.entry_id])
    changes, _claims = policy.judge_txn(conn, space_id, [op], current)
    try:
        guard.check_rules(changes, list_rules_txn(conn, space_id), p, role)
    except PolicyDenied:
        return False
    return True


def _readable_txn(conn: Any, space_id: str, scope: scopes.ReadScope,
                  rows: list[sql.ProposalRow]) -> list[sql.ProposalRow]:
    """The proposals the reader of ``scope`` may see (hub/scope.py, D142): on an entry it
    may read, proposing content it may read."""
    if scope.unrestricted:
        return rows
    seen = scopes.visible_txn(conn, space_id, scope, [r.entry_id for r in rows])
    return [r for r in rows if r.entry_id in seen
            and (r.deleted or scopes.readable_content(scope, r.entry_id, r.content))]


def _get_txn(conn: Any, p: Principal, space_ref: str, proposal_id: str, *,
             lock: bool = False) -> tuple[Any, str, sql.ProposalRow]:
    space, role = space_access_txn(conn, p, space_ref, "viewer", lock=lock)
    row = sql.get_txn(conn, space.id, proposal_id) if is_id(proposal_id) else None
    if row is not None and not _readable_txn(conn, space.id,
                                             scopes.scope_txn(conn, p, space, role), [row]):
        row = None  # outside the reader's scope: as if there were none
    if row is None or (_is_agent(p) and not _own(p, row)):
        raise NotFound(f"no proposal {proposal_id} in this space")
    return space, role, row


# ---------------------------------------------------------------- the moves


def file(store: Store, p: Principal, space_ref: str, body: dict[str, Any], now: int, *,
         max_body: int = DEFAULT_MAX_BODY, screening: screen.Config = screen.DEFAULT
         ) -> dict[str, Any]:
    """An agent files a proposal: ``body`` = {op: a batch op (put with the whole entry, or
    delete), reason}. The op's ``base`` must be the entry's current version. Screened like
    a publication (``content_screened``), the reason too: a secret an agent proposes is
    never stored, not even in a proposal nobody accepts."""
    if p.agent is None or p.delegation_id is None:
        raise Forbidden("proposals are filed by agents (under a delegation); a member "
                        "makes the change, or asks an admin", {"reason": "agents_only"})
    op = parse_op(body.get("op"), 0, max_body)
    if op.moved_from is not None:  # a rename is two ops (docs/protocol.md, "Renames")
        raise InvalidRequest("a proposal is one op: a rename ('from') needs the delete of "
                             "its old name in the same batch", {"reason": "rename_in_proposal"})
    reason = _reason(body)

    def txn(conn: Any) -> dict[str, Any]:
        space, role = space_access_txn(conn, p, space_ref, "viewer", lock=True)
        current = current_versions_txn(conn, space.id, [op.entry_id])
        # an agent proposes only what it may read (as the guard refuses writes)
        scopes.check_writes_txn(conn, space.id, [op], current,
                                list_rules_txn(conn, space.id), p, role, space.folders)
        cur = current.get(op.entry_id)
        ok = (cur is None or cur[1]) if op.base is None else (
            cur is not None and not cur[1] and cur[0] == op.base)
        if not ok or (op.entry.deleted and (cur is None or cur[1])):
            raise BaseMismatch(f"{op.entry_id} is not at the version this was written "
                               "against; sync, read it again and propose on it",
                               {"base": op.base, "current": cur[0] if cur else None})
        check_portable([op], current)
        if cur is not None and not cur[1] and cur[0] == op.entry.version:
            raise InvalidRequest(f"{op.entry_id} is already exactly as proposed")
        screen.check_txn(conn, space.id, [op], screening, {"note": reason})
        if sql.count_open_txn(conn, space.id, p.user_id, p.agent or "") >= MAX_OPEN_PER_AGENT:
            raise Forbidden(f"this agent has {MAX_OPEN_PER_AGENT} open proposals in this "
                            "space; withdraw some or wait for a decision",
                            {"reason": "too_many_proposals", "max": MAX_OPEN_PER_AGENT})
        pid = new_id(now)
        sql.insert_txn(conn, id=pid, space_id=space.id, entry_id=op.entry_id, base=op.base,
                       version=op.entry.version, deleted=op.entry.deleted,
                       content=canonical_str(op.entry.to_dict()), agent=p.agent,
                       user_id=p.user_id, device_id=p.device_id,
                       delegation_id=p.delegation_id, reason=reason, created_at=now)
        audit.record_space_txn(conn, space, at=now, action="proposal.file", actor=p.actor(),
                               details={"proposal": pid, "entry": op.entry_id,
                                        "base": op.base, "version": op.entry.version,
                                        "reason": reason})
        row = sql.get_txn(conn, space.id, pid)
        assert row is not None
        return {"proposal": _view(row, names_txn(conn, {p.user_id}))}

    return store.run_write(txn)


def list_proposals(store: Store, p: Principal, space_ref: str, state: str | None = "open"
                   ) -> dict[str, Any]:
    """The space's proposals, newest first (``state``: one state, None or ``all``: every
    one); an agent's own only. Each with ``can_accept`` for the caller."""
    if state not in (None, "all", *STATES):
        raise InvalidRequest(f"state must be one of {', '.join(STATES)} or all")
    with store.read() as conn:
        space, role = space_access_txn(conn, p, space_ref, "viewer")
        rows = sql.list_txn(conn, space.id,
                            states=None if state in (None, "all") else (state,),
                            agent=(p.user_id, p.agent or "") if _is_agent(p) else None,
                            limit=MAX_LISTED)
        rows = _readable_txn(conn, space.id, scopes.scope_txn(conn, p, space, role), rows)
        names = names_txn(conn, {i for r in rows for i in (r.user_id, r.decided_by) if i})
        out = [_view(r, names, can_accept=r.state == "open"
                     and may_make_txn(conn, space.id, p, role, r)) for r in rows]
    return {"space": space.id, "space_name": space.name, "proposals": out,
            "limit": MAX_LISTED}


def show(store: Store, p: Principal, space_ref: str, proposal_id: str) -> dict[str, Any]:
    """One proposal, the entry as it is now and the diff between them."""
    with store.read() as conn:
        space, role, row = _get_txn(conn, p, space_ref, proposal_id)
        live = current_contents_txn(conn, space.id, [row.entry_id]).get(row.entry_id)
        version = current_versions_txn(conn, space.id, [row.entry_id]).get(row.entry_id)
        names = names_txn(conn, {i for i in (row.user_id, row.decided_by) if i})
        can = row.state == "open" and may_make_txn(conn, space.id, p, role, row)
    current = json.loads(live) if live is not None else None
    proposed = None if row.deleted else json.loads(row.content)
    return {"proposal": _view(row, names, can_accept=can), "space_name": space.name,
            "current": {"version": None if version is None or version[1] else version[0],
                        "entry": current},
            "moved": (None if version is None or version[1] else version[0]) != row.base,
            "diff": (d := diff(current, proposed)),
            "diff_complete": len(d) <= DIFF_LINES}


def accept(store: Store, key: HubKey, settings: Any, p: Principal, space_ref: str,
           proposal_id: str, now: Callable[[], int],
           hooks: guard.GuardHooks | None = None) -> tuple[dict[str, Any], guard.Outcome]:
    """A member accepts: the change published hub-attested with both principals (module
    docstring). Returns (the answer, the guard's outcome: the caller emits it)."""
    if _is_agent(p):
        raise Forbidden("an agent cannot accept a proposal, its own or another's; a member "
                        "accepts it in the console or with quire proposals accept",
                        {"reason": "agent_cannot_approve"})
    with store.read() as conn:
        space, _role, row = _get_txn(conn, p, space_ref, proposal_id)
    if row.state != "open":
        raise ProposalClosed(f"this proposal is {row.state} already", {"state": row.state})
    at = now()

    def close_txn(conn: Any, out: guard.Outcome) -> None:
        if not sql.close_txn(conn, row.id, "accepted", at=at, by=p.user_id, seq=out.seq,
                             epoch=out.epoch):
            raise ProposalClosed("this proposal was decided meanwhile", {"state": "closed"})

    try:
        out = publish_attested(store, key, settings, member=p, space_id=space.id,
                               ops=[_op_of(row)],
                               attested=HubAttested(row.agent, row.user_id, p.user_id, row.id),
                               now=now, then_txn=close_txn, hooks=hooks)
    except BaseMismatch as e:
        current = ((e.details.get("ops") or [{}])[0]).get("current")
        _close(store, p, space.id, row, "stale", at,
               note=f"the entry changed since it was proposed (now {current})")
        raise ProposalStale(f"{row.entry_id} changed since this proposal was written "
                            "against it: nothing was overwritten; the proposal is now "
                            "stale (the agent may propose again on the new version)",
                            {"base": row.base, "current": current, "state": "stale"}
                            ) from None
    if out.replayed:  # never: a new batch id each time
        raise ProposalClosed("this proposal was published already", {"state": "accepted"})
    with store.read() as conn:
        done = sql.get_txn(conn, space.id, row.id)
        names = names_txn(conn, {row.user_id, p.user_id})
    assert done is not None
    return {"proposal": _view(done, names), "seq": out.seq,
            "receipt": json.loads(out.receipt)}, out


def _close(store: Store, p: Principal, space_id: str, row: sql.ProposalRow, state: str,
           at: int, note: str | None) -> bool:
    """Move ``row`` from open to ``state`` with its audit event; False when it was decided
    meanwhile (nothing written)."""
    def txn(conn: Any) -> bool:
        space, _ = space_access_txn(conn, p, space_id, "viewer", lock=True)
        if not sql.close_txn(conn, row.id, state, at=at, by=p.user_id, note=note):
            return False
        audit.record_space_txn(conn, space, at=at, action=f"proposal.{state}",
                               actor=p.actor(), details={"proposal": row.id,
                                                        "entry": row.entry_id, "note": note})
        return True

    return store.run_write(txn)


def reject(store: Store, p: Principal, space_ref: str, proposal_id: str,
           body: dict[str, Any], now: int) -> dict[str, Any]:
    """A member who may make the change, or the agent's own member, rejects it; ``body``:
    {reason?}."""
    note = body.get("reason")
    if note is not None and (not isinstance(note, str) or len(note) > MAX_REASON):
        raise InvalidRequest(f"reason: at most {MAX_REASON} characters")
    if _is_agent(p):
        raise Forbidden("an agent withdraws its own proposal (withdraw); rejecting is for "
                        "members", {"reason": "agent_cannot_approve"})
    with store.read() as conn:
        space, role, row = _get_txn(conn, p, space_ref, proposal_id)
        allowed = row.user_id == p.user_id or may_make_txn(conn, space.id, p, role, row)
    if not allowed:
        raise Forbidden("only a member who may make this change, or the agent's own member, "
                        "rejects it", {"reason": "may_not_decide"})
    return _decide(store, p, space.id, row, "rejected", now, (note or "").strip() or None)


def withdraw(store: Store, p: Principal, space_ref: str, proposal_id: str, now: int
             ) -> dict[str, Any]:
    """The proposing agent takes its proposal back."""
    with store.read() as conn:
        space, _role, row = _get_txn(conn, p, space_ref, proposal_id)
    if not _own(p, row):
        raise Forbidden("only the agent that filed a proposal withdraws it (members reject)",
                        {"reason": "not_proposer"})
    return _decide(store, p, space.id, row, "withdrawn", now, None)


def _decide(store: Store, p: Principal, space_id: str, row: sql.ProposalRow, state: str,
            now: int, note: str | None) -> dict[str, Any]:
    if row.state != "open" or not _close(store, p, space_id, row, state, now, note):
        with store.read() as conn:
            fresh = sql.get_txn(conn, space_id, row.id)
        got = fresh.state if fresh is not None else row.state
        raise ProposalClosed(f"this proposal is {got} already", {"state": got})
    with store.read() as conn:
        done = sql.get_txn(conn, space_id, row.id)
        names = names_txn(conn, {row.user_id, p.user_id})
    assert done is not None
    return {"proposal": _view(done, names)}
