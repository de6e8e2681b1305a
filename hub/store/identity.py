"""SQL for credentials: refresh tokens (single use, revoked by family), agent
delegations and device-login codes. ``_txn`` functions run inside a transaction opened
by the store."""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, func, insert, select, update
from sqlalchemy.engine import Connection

from hub.store.schema import delegations, device_codes, refresh_tokens, spaces


def insert_refresh_txn(conn: Connection, **values: Any) -> None:
    conn.execute(insert(refresh_tokens).values(**values))


def refresh_by_hash_txn(conn: Connection, token_hash: str) -> Any:
    return conn.execute(select(refresh_tokens)
                        .where(refresh_tokens.c.token_hash == token_hash)).first()


def use_refresh_txn(conn: Connection, refresh_id: str, now: int) -> bool:
    """Mark a refresh credential used; False when another use got there first."""
    res = conn.execute(update(refresh_tokens).where(and_(refresh_tokens.c.id == refresh_id,
                                                         refresh_tokens.c.used_at.is_(None)))
                       .values(used_at=now))
    return res.rowcount == 1


def revoke_refresh_family_txn(conn: Connection, family_id: str, now: int) -> int:
    return conn.execute(update(refresh_tokens).where(and_(
        refresh_tokens.c.family_id == family_id, refresh_tokens.c.revoked_at.is_(None)))
        .values(revoked_at=now)).rowcount


def revoke_device_refresh_txn(conn: Connection, device_id: str, now: int) -> int:
    return conn.execute(update(refresh_tokens).where(and_(
        refresh_tokens.c.device_id == device_id, refresh_tokens.c.revoked_at.is_(None)))
        .values(revoked_at=now)).rowcount


def insert_delegation_txn(conn: Connection, **values: Any) -> None:
    conn.execute(insert(delegations).values(**values))


def get_delegation_txn(conn: Connection, delegation_id: str) -> Any:
    return conn.execute(select(delegations).where(delegations.c.id == delegation_id)).first()


def list_delegations_txn(conn: Connection, *, user_id: str | None = None,
                         space_id: str | None = None) -> list[dict[str, Any]]:
    q = select(delegations, spaces.c.name.label("space_name")).join(
        spaces, spaces.c.id == delegations.c.space_id)
    if user_id is not None:
        q = q.where(delegations.c.user_id == user_id)
    if space_id is not None:
        q = q.where(delegations.c.space_id == space_id)
    rows = conn.execute(q.order_by(delegations.c.created_at, delegations.c.id)).all()
    return [{"id": r.id, "user_id": r.user_id, "device_id": r.device_id, "space": r.space_id,
             "space_name": r.space_name, "agent": r.agent, "scope": r.scope,
             "created_at": r.created_at, "expires_at": r.expires_at,
             "revoked_at": r.revoked_at} for r in rows]


def live_delegations_txn(conn: Connection, user_id: str, agent: str, now: int
                         ) -> tuple[int, int]:
    """(live delegations of ``user_id`` to ``agent``, live delegations of ``user_id``):
    not revoked and not expired."""
    live = and_(delegations.c.user_id == user_id, delegations.c.revoked_at.is_(None),
                delegations.c.expires_at > now)
    r = conn.execute(select(
        func.count().filter(delegations.c.agent == agent), func.count()).where(live)).one()
    return int(r[0]), int(r[1])


def revoke_delegation_txn(conn: Connection, delegation_id: str, now: int) -> int:
    return conn.execute(update(delegations).where(and_(delegations.c.id == delegation_id,
                                                       delegations.c.revoked_at.is_(None)))
                        .values(revoked_at=now)).rowcount


def insert_device_code_txn(conn: Connection, **values: Any) -> None:
    conn.execute(insert(device_codes).values(**values))


def device_code_by_txn(conn: Connection, *, device_code_hash: str | None = None,
                       user_code_hash: str | None = None) -> Any:
    q = select(device_codes)
    if device_code_hash is not None:
        q = q.where(device_codes.c.device_code_hash == device_code_hash)
    else:
        q = q.where(device_codes.c.user_code_hash == user_code_hash)
    return conn.execute(q).first()


def approve_device_code_txn(conn: Connection, code_id: str, user_id: str, now: int) -> bool:
    res = conn.execute(update(device_codes).where(and_(device_codes.c.id == code_id,
                                                       device_codes.c.approved_at.is_(None)))
                       .values(approved_by=user_id, approved_at=now))
    return res.rowcount == 1


def name_device_code_txn(conn: Connection, code_id: str, name: str) -> None:
    """The name the approval gave (distinct from the approver's devices)."""
    conn.execute(update(device_codes).where(device_codes.c.id == code_id)
                 .values(device_name=name))


def use_device_code_txn(conn: Connection, code_id: str, device_id: str, now: int) -> bool:
    """Single use, enforced here: only the first token request for a code succeeds."""
    res = conn.execute(update(device_codes).where(and_(device_codes.c.id == code_id,
                                                       device_codes.c.used_at.is_(None)))
                       .values(used_at=now, device_id=device_id))
    return res.rowcount == 1
