"""Audit events in hash chains: one chain per space (serialized by the space lock) and one
for hub-level events. ``digest_n = SHA-256(canonical(event_n with prev = digest_{n-1}))``.

``verify_events`` is pure: given exported events it names the first one that does not verify.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from hub.logs import current_request_id
from hub.store.audit_sql import advance_audit_tip_txn, insert_audit_txn
from hub.store.hub_state import hub_state_txn
from shared.canonical import canonical_str
from shared.digest import digest_of

GENESIS = "0" * 64


def event_digest(*, chain: str, n: int, at: int, action: str, actor: dict[str, Any],
                 details: dict[str, Any], prev: str) -> str:
    return digest_of({"chain": chain, "n": n, "at": at, "action": action, "actor": actor,
                      "details": details, "prev": prev})


_CURRENT = object()


def record_txn(conn: Any, *, chain: str, tip: tuple[int, str], at: int, action: str,
               actor: dict[str, Any], details: dict[str, Any], advance: bool = True,
               request_id: Any = _CURRENT) -> tuple[int, str]:
    """Append one event to ``chain`` whose tip ``(n, digest)`` the caller holds locked.
    ``advance=False``: the caller stores the returned new tip itself (the guard does, in the
    same UPDATE of the space row that moves the head).

    The request's id (``X-Request-Id``, hub/logs.py) goes into ``details.request_id``, so
    an audit event leads to the request's log lines; a caller running another request's
    function (group commit) passes it explicitly."""
    rid = current_request_id() if request_id is _CURRENT else request_id
    if rid:
        details = {**details, "request_id": rid}
    n, prev = tip[0] + 1, tip[1]
    digest = event_digest(chain=chain, n=n, at=at, action=action, actor=actor, details=details,
                          prev=prev)
    insert_audit_txn(conn, chain=chain, n=n, at=at, action=action,
                     actor=canonical_str(actor), details=canonical_str(details), prev=prev,
                     digest=digest)
    if advance:
        advance_audit_tip_txn(conn, chain, n, digest)
    return n, digest


def record_hub_txn(conn: Any, *, at: int, action: str, actor: dict[str, Any],
                   details: dict[str, Any], request_id: Any = _CURRENT) -> None:
    """Append a hub-level event (locks the hub state row)."""
    state = hub_state_txn(conn, lock=True)
    record_txn(conn, chain="hub", tip=(state.audit_seq, state.audit_digest), at=at,
               action=action, actor=actor, details=details, request_id=request_id)


def record_space_txn(conn: Any, space: Any, *, at: int, action: str, actor: dict[str, Any],
                     details: dict[str, Any]) -> None:
    """Append an event to a space's chain; ``space`` must have been read with the lock."""
    record_txn(conn, chain=space.id, tip=(space.audit_seq, space.audit_digest), at=at,
               action=action, actor=actor, details=details)


def row_to_event(row: Any) -> dict[str, Any]:
    return {"chain": row.chain, "n": row.n, "at": row.at, "action": row.action,
            "actor": json.loads(row.actor), "details": json.loads(row.details),
            "prev": row.prev, "digest": row.digest}


def verify_events(events: Iterable[dict[str, Any]]) -> tuple[bool, dict[str, Any] | None]:
    """Check every chain in ``events`` (each chain complete from n=1, in order).

    Returns ``(True, None)`` or ``(False, first_bad_event)``.
    """
    tips: dict[str, tuple[int, str]] = {}
    for ev in events:
        n0, prev = tips.get(ev["chain"], (0, GENESIS))
        expected = event_digest(chain=ev["chain"], n=ev["n"], at=ev["at"], action=ev["action"],
                                actor=ev["actor"], details=ev["details"], prev=prev)
        if ev["n"] != n0 + 1 or ev["prev"] != prev or ev["digest"] != expected:
            return False, ev
        tips[ev["chain"]] = (ev["n"], ev["digest"])
    return True, None
