"""OAuth access and refresh tokens of the remote MCP endpoint: random, short-lived, stored
as SHA-256 only, and checked against their consent on every call (docs/security.md keeps
device tokens; these are bearer tokens for one space, D136).

    mint_pair_txn(conn, consent, ...)   an access token (``oauth_access_ttl``) and a refresh
                                        token (until the consent expires), by hash in the db
    verify(store, token, now)           every MCP request: the token, its consent, the
                                        consent's delegation, device and user as they are now
                                        ─► RemoteGrant (an agent principal for one space)

Revoking the consent (console), its delegation (``quire delegate revoke``), the member's
device or the member stops the next request: nothing is cached.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from hub.access import Principal, recheck_principal_txn, secret_hash
from hub.oauth import scopes as sc
from hub.store import oauth_sql as sql
from hub.store.db import Store
from hub.store.principals import device_by_id_txn
from shared.errors import Unauthorized

ACCESS_PREFIX = "qoa_"
REFRESH_PREFIX = "qor_"
MAX_TOKEN = 200


@dataclass(frozen=True)
class RemoteGrant:
    """Who a remote MCP request acts as: the agent, for its member, in one space."""

    principal: Principal
    consent_id: str
    client_id: str
    space_id: str
    space_name: str
    scopes: list[str]
    expires_at: int  # the access token's, ms

    def allows(self, action: str) -> bool:
        return sc.allows(self.scopes, action)


def mint_pair_txn(conn: Any, *, consent_id: str, client_id: str, scopes: str, now: int,
                  access_ttl_s: int, refresh_until: int) -> dict[str, Any]:
    """A fresh access and refresh token of a consent; returns them once (never stored)."""
    access = ACCESS_PREFIX + secrets.token_urlsafe(32)
    refresh = REFRESH_PREFIX + secrets.token_urlsafe(32)
    access_exp = min(now + access_ttl_s * 1000, refresh_until)
    for tok, kind, exp in ((access, "access", access_exp), (refresh, "refresh", refresh_until)):
        sql.insert_txn(conn, sql.oauth_tokens, token_hash=secret_hash(tok), kind=kind,
                       consent_id=consent_id, client_id=client_id, scopes=scopes,
                       created_at=now, expires_at=exp)
    return {"access_token": access, "refresh_token": refresh, "scope": scopes,
            "expires_in": max(1, (access_exp - now) // 1000)}


def _refuse(message: str, reason: str) -> Unauthorized:
    return Unauthorized(message, {"reason": reason})


def consent_live(c: Any, now: int) -> None:
    """Refuse a revoked or expired consent."""
    if c is None:
        raise _refuse("this token's consent no longer exists", "invalid_token")
    if c.revoked_at is not None:
        raise _refuse("a member revoked this agent's consent; ask them to sign it in again",
                      "consent_revoked")
    if c.expires_at <= now:
        raise _refuse("this agent's consent expired; sign in again", "consent_expired")


def verify(store: Store, token: str, now: int) -> RemoteGrant:
    """The grant behind a bearer access token, as the database has it now."""
    if not token.startswith(ACCESS_PREFIX) or len(token) > MAX_TOKEN:
        raise _refuse("not an access token of this hub", "invalid_token")
    with store.read() as conn:
        t = sql.token_txn(conn, secret_hash(token))
        if t is None or t.kind != "access":
            raise _refuse("access token not recognized", "invalid_token")
        c = sql.consent_txn(conn, t.consent_id)
        consent_live(c, now)  # first: a revoked consent says so, not just "token revoked"
        if t.revoked_at is not None:
            raise _refuse("this access token was revoked", "token_revoked")
        if t.expires_at <= now:
            raise _refuse("this access token expired; use the refresh token", "token_expired")
        dev = device_by_id_txn(conn, c.device_id)
        if dev is None:
            raise _refuse("this agent's device no longer exists", "device_removed")
        stub = Principal(c.user_id, c.device_id, dev.user_name, dev.is_owner, c.agent,
                         c.delegation_id, "write" if "write" in t.scopes.split() else "read",
                         c.space_id)
        # the device, its user and the delegation as they are now (revoked: Unauthorized)
        p = recheck_principal_txn(conn, stub, now)
    return RemoteGrant(p, c.id, t.client_id, c.space_id, c.space_name, t.scopes.split(),
                       int(t.expires_at))
