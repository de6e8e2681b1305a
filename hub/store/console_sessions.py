"""SQL for console sessions (hub/console/sessions.py). ``_txn`` functions run inside a
transaction opened by the store."""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Connection

from hub.store.sql import Sql

_BY_HASH = Sql("SELECT id, user_id, device_id, device_code, expires_at, revoked_at "
               "FROM console_sessions WHERE token_hash = :h")
_INSERT = Sql("INSERT INTO console_sessions (id, token_hash, device_code, created_at, "
              "expires_at) VALUES (:id, :h, :dc, :now, :exp)")
_INSERT_BOUND = Sql("INSERT INTO console_sessions (id, token_hash, user_id, device_id, "
                    "created_at, expires_at) VALUES (:id, :h, :u, :d, :now, :exp)")
_BIND = Sql("UPDATE console_sessions SET user_id = :u, device_id = :d, device_code = NULL, "
            "token_hash = :h WHERE id = :id AND device_id IS NULL")
_REVOKE = Sql("UPDATE console_sessions SET revoked_at = :now WHERE id = :id")
_REVOKE_DEVICE = Sql("UPDATE devices SET revoked_at = :now WHERE id = :d AND revoked_at IS NULL")
_DEVICE_USER = Sql("SELECT d.user_id, u.name, u.is_owner FROM devices d "
                   "JOIN users u ON u.id = d.user_id WHERE d.id = :d")


def by_hash_txn(conn: Connection, token_hash: str) -> Any:
    return _BY_HASH.one(conn, {"h": token_hash})


def insert_txn(conn: Connection, *, id: str, token_hash: str, device_code: str, now: int,
               expires_at: int) -> None:
    _INSERT.run(conn, {"id": id, "h": token_hash, "dc": device_code, "now": now,
                       "exp": expires_at})


def insert_bound_txn(conn: Connection, *, id: str, token_hash: str, user_id: str,
                     device_id: str, now: int, expires_at: int) -> None:
    """A session signed in from the start (OpenID Connect: the provider vouched for it)."""
    _INSERT_BOUND.run(conn, {"id": id, "h": token_hash, "u": user_id, "d": device_id,
                             "now": now, "exp": expires_at})


def bind_txn(conn: Connection, session_id: str, user_id: str, device_id: str,
             token_hash: str) -> None:
    """Sign the session in, under a new secret (``token_hash``): the one it had while it
    waited stops working."""
    _BIND.run(conn, {"u": user_id, "d": device_id, "id": session_id, "h": token_hash})


def revoke_txn(conn: Connection, session_id: str, device_id: str | None, now: int) -> None:
    """Sign-out: the session, and the browser's device with it."""
    _REVOKE.run(conn, {"now": now, "id": session_id})
    if device_id:
        _REVOKE_DEVICE.run(conn, {"now": now, "d": device_id})


def device_user_txn(conn: Connection, device_id: str) -> Any:
    """(user_id, user name, is_owner) of a device, or None."""
    return _DEVICE_USER.one(conn, {"d": device_id})
