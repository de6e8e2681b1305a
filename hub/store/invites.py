"""SQL for invites: redeeming one (single use), creating, listing and revoking them.
``_txn`` functions run inside a transaction opened by the store."""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, insert, select, update
from sqlalchemy.engine import Connection

from hub.store.schema import invites
from hub.store.sql import Sql

# the new member's display name an invite offers (migration 0026), in plain SQL
_SET_NAME = Sql("UPDATE invites SET name = :name WHERE id = :id")
_NAME = Sql("SELECT name FROM invites WHERE id = :id")
_NAMES = Sql("SELECT id, name FROM invites WHERE space_id = :space AND name IS NOT NULL")
_HUB_NAMES = Sql("SELECT id, name FROM invites WHERE space_id IS NULL AND name IS NOT NULL")


def invite_by_hash_txn(conn: Connection, code_hash: str) -> Any:
    return conn.execute(select(invites).where(invites.c.code_hash == code_hash)).first()


def insert_invite_txn(conn: Connection, **values: Any) -> None:
    conn.execute(insert(invites).values(**values))


def use_invite_txn(conn: Connection, invite_id: str, user_id: str, now: int) -> bool:
    """Mark an invite used; False when another redemption got there first (single use)."""
    res = conn.execute(update(invites).where(and_(invites.c.id == invite_id,
                                                  invites.c.used_at.is_(None)))
                       .values(used_at=now, used_by=user_id))
    return res.rowcount == 1


def list_invites_txn(conn: Connection, space_id: str | None) -> list[dict[str, Any]]:
    q = select(invites)
    q = q.where(invites.c.space_id.is_(None) if space_id is None
                else invites.c.space_id == space_id)
    rows = conn.execute(q.order_by(invites.c.created_at, invites.c.id)).all()
    named = {str(r[0]): str(r[1]) for r in (
        _HUB_NAMES.all(conn, {}) if space_id is None else _NAMES.all(conn, {"space": space_id}))}
    return [{"id": r.id, "space": r.space_id, "role": r.role, "created_by": r.created_by,
             "created_at": r.created_at, "expires_at": r.expires_at, "used_at": r.used_at,
             "used_by": r.used_by, "revoked_at": r.revoked_at, "name": named.get(r.id)}
            for r in rows]


def set_invite_name_txn(conn: Connection, invite_id: str, name: str) -> None:
    _SET_NAME.run(conn, {"id": invite_id, "name": name})


def invite_name_txn(conn: Connection, invite_id: str) -> str | None:
    """The display name the invite offers its new member, or None."""
    row = _NAME.one(conn, {"id": invite_id})
    return None if row is None or row[0] is None else str(row[0])


def get_invite_txn(conn: Connection, invite_id: str) -> Any:
    return conn.execute(select(invites).where(invites.c.id == invite_id)).first()


def revoke_invite_txn(conn: Connection, invite_id: str, now: int) -> int:
    return conn.execute(update(invites).where(and_(invites.c.id == invite_id,
                                                   invites.c.revoked_at.is_(None),
                                                   invites.c.used_at.is_(None)))
                        .values(revoked_at=now)).rowcount
