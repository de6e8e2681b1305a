"""Who is calling, and what may they do in a space.

``authenticate`` turns a credential into a ``Principal``; ``space_access_txn`` re-reads the
principal's current state and role from the database. The guard calls the latter twice:
once while preparing and again inside the committing transaction, so a revocation that
lands in between is seen.

Credentials today are device bearer secrets (stored as SHA-256: they are 256-bit random,
so a fast hash is enough, and the lookup by hash compares no secret bytes in Python).
The identity work adds device-bound JWTs with DPoP and delegations; they produce the same
``Principal`` (with ``agent`` and ``delegation_id`` set for delegated callers).
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Any

from hub import policy
from hub.store import queries as q
from shared.errors import Forbidden, NotFound, Unauthorized

TOKEN_PREFIX = "qd_"
INVITE_PREFIX = "qi_"
MAX_CREDENTIAL = 512


@dataclass(frozen=True)
class Principal:
    user_id: str
    device_id: str
    user_name: str
    is_owner: bool
    agent: str | None = None
    delegation_id: str | None = None
    scope: str | None = None  # "read" | "write" for delegated tokens

    def actor(self) -> dict[str, Any]:
        """How this caller appears in receipts and audit events."""
        return {"user": self.user_id, "device": self.device_id, "agent": self.agent}


def new_secret(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(32)


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def bearer_from_header(header: str | None) -> str:
    if not header:
        raise Unauthorized("no credential: send 'Authorization: Bearer <device credential>' "
                           "(run 'quire join' to get one)")
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value or len(value) > MAX_CREDENTIAL:
        raise Unauthorized("malformed Authorization header; expected 'Bearer <credential>'")
    return value.strip()


def authenticate_txn(conn: Any, token: str) -> Principal:
    if not token.startswith(TOKEN_PREFIX):
        raise Unauthorized("credential not recognized")
    dev = q.device_by_token_hash_txn(conn, secret_hash(token))
    if dev is None:
        raise Unauthorized("credential not recognized")
    _check_device(dev)
    return Principal(dev.user_id, dev.id, dev.user_name, dev.is_owner)


def _check_device(dev: Any) -> None:
    if dev.revoked_at is not None:
        raise Unauthorized("this device was revoked; ask an admin, then log in again",
                           {"reason": "device_revoked"})
    if not dev.user_active:
        raise Unauthorized("this user was deactivated", {"reason": "user_inactive"})


def recheck_principal_txn(conn: Any, p: Principal) -> Principal:
    """Re-read the device and user behind ``p``; raises when either is no longer valid."""
    dev = q.device_by_id_txn(conn, p.device_id)
    if dev is None:
        raise Unauthorized("device no longer exists", {"reason": "device_removed"})
    _check_device(dev)
    return Principal(dev.user_id, dev.id, dev.user_name, dev.is_owner, p.agent,
                     p.delegation_id, p.scope)


def effective_role_txn(conn: Any, p: Principal, space_id: str) -> str | None:
    if p.is_owner and p.delegation_id is None:
        return "admin"
    role = q.role_txn(conn, space_id, p.user_id)
    if role is not None and p.scope == "read":
        return "viewer"
    if role == "admin" and p.delegation_id is not None:
        return "editor"  # delegated tokens never reach admin rights
    return role


def space_access_txn(conn: Any, p: Principal, space_ref: str, minimum: str,
                     *, lock: bool = False) -> tuple[Any, str]:
    """Resolve ``space_ref`` and check ``p`` holds at least ``minimum`` there.

    A space the caller is not a member of is ``not_found`` (its existence is not leaked).
    """
    space = q.find_space_txn(conn, space_ref)
    if space is not None and lock:
        space = q.get_space_txn(conn, space.id, lock=True)
    role = effective_role_txn(conn, p, space.id) if space is not None else None
    if space is None or role is None:
        raise NotFound(f"no space {space_ref!r} that you are a member of")
    if not policy.at_least(role, minimum):
        raise Forbidden(f"your role in this space is {role}; this needs {minimum}",
                        {"role": role, "required": minimum})
    return space, role
