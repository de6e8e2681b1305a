"""SQL for OpenID Connect sign-in (hub/console/oidc.py) and the users' sign-in emails.
``_txn`` functions run inside a transaction opened by the store."""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Connection

from hub.store.sql import Sql

_INSERT = Sql("INSERT INTO console_oidc_logins (id, data, created_at, expires_at) "
              "VALUES (:id, :data, :now, :exp)")
_PRUNE = Sql("DELETE FROM console_oidc_logins WHERE expires_at <= :now")
_GET = Sql("SELECT data, expires_at FROM console_oidc_logins WHERE id = :id")
_TAKE = Sql("DELETE FROM console_oidc_logins WHERE id = :id")
_USER_BY_EMAIL = Sql("SELECT id, name, active FROM users WHERE email = :email")
_SET_EMAIL = Sql("UPDATE users SET email = :email WHERE id = :id")
_USERS = Sql("SELECT id, name, email, is_owner, active FROM users ORDER BY name, id")


def insert_txn(conn: Connection, *, id: str, data: str, now: int, expires_at: int) -> None:
    """A pending sign-in; expired ones are dropped on the way (the table stays small)."""
    _PRUNE.run(conn, {"now": now})
    _INSERT.run(conn, {"id": id, "data": data, "now": now, "exp": expires_at})


def take_txn(conn: Connection, id: str, now: int) -> str | None:
    """The pending sign-in's data, deleted in the same transaction: only the first of two
    callbacks with one cookie gets it (the second deletes nothing and gets None)."""
    row = _GET.one(conn, {"id": id})
    if row is None or _TAKE.run(conn, {"id": id}) != 1 or row[1] <= now:
        return None
    return str(row[0])


def user_by_email_txn(conn: Connection, email: str) -> Any:
    """(id, name, active) of the user with this sign-in email (lower-case), or None."""
    return _USER_BY_EMAIL.one(conn, {"email": email})


def set_email_txn(conn: Connection, user_id: str, email: str | None) -> int:
    return _SET_EMAIL.run(conn, {"id": user_id, "email": email})


def users_txn(conn: Connection) -> list[Any]:
    return _USERS.all(conn, {})
