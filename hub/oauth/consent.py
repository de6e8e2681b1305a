"""A member's consent to an agent: the step between ``/oauth/authorize`` and the code.

    /oauth/authorize ─► request_txn (a pending request, ``oauth_requests``)
                    ─► 302 /console/consent?request=ID   (the member signs in as ever)
    consent page    ─► pending(): which client, which agent name, which scopes, which spaces
    approve()        one transaction: the request is spent; the member's role in the space
                     is checked (write needs editor); a device row for the agent (a key
                     nobody holds: it signs nothing, it names the agent's access), a
                     delegation of it for the space (agent, read or write, until the
                     consent ends: so rules for agents, the guard and the audit see the
                     agent as they see a ``quire mcp`` session), the consent, a code
                     ─► 303 redirect_uri?code=…&state=…
    deny()          ─► 303 redirect_uri?error=access_denied&state=…
    revoke()         the consent, its delegation, its device row and every token of it:
                     the next call fails

A consent lasts ``oauth_consent_ttl`` (at most ``delegation_ttl_max``, like any agent's
delegation); the agent host signs in again after it.
"""

from __future__ import annotations

import json
import re
import secrets
from typing import Any
from urllib.parse import urlencode

from hub import audit, grants
from hub.access import Principal, secret_hash, space_access_txn
from hub.oauth import scopes as sc
from hub.store import oauth_sql as sql
from hub.store.db import Store
from hub.store.identity import get_delegation_txn, insert_delegation_txn, revoke_delegation_txn
from hub.store.principals import insert_device_txn, revoke_device_txn
from hub.store.spaces_sql import get_space_txn
from shared.errors import InvalidRequest, NotFound
from shared.ids import new_id
from shared.signing import new_private_key, public_b64

CODE_PREFIX = "qoc_"


def agent_name(client_name: str) -> str:
    """The agent name a client's registered name becomes (rules and the audit name it):
    letters, digits, ``_.-``, at most 64, prefixed ``remote-``."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", client_name).strip("-._")[:56]
    return "remote-" + (slug or "agent")


def _with_query(uri: str, params: dict[str, str | None]) -> str:
    q = urlencode({k: v for k, v in params.items() if v is not None})
    return uri + ("&" if "?" in uri else "?") + q


def pending(store: Store, request_id: str, now: int) -> dict[str, Any]:
    """What the consent page shows: the request, its client and the scopes it asks."""
    with store.read() as conn:
        r = sql.request_txn(conn, request_id) if len(request_id) <= 64 else None
        c = sql.client_txn(conn, r.client_id) if r is not None else None
    if r is None or c is None or r.done_at is not None or r.expires_at <= now:
        raise NotFound("this sign-in request is unknown, answered already or expired; "
                       "start the agent's sign-in again")
    actions, space = sc.parse(r.scopes)
    info = json.loads(c.info)
    return {"request": r.id, "client_id": c.id, "client_name": c.name,
            "client_uri": info.get("client_uri"), "redirect_uri": r.redirect_uri,
            "agent": agent_name(c.name), "actions": sc.closed(actions), "space": space}


def approve(store: Store, settings: Any, p: Principal, request_id: str, space_ref: str,
            actions: list[str], now: int) -> str:
    """The member says yes: returns where the browser goes (the client, with the code)."""
    asked = pending(store, request_id, now)
    granted = sc.closed([a for a in actions if a in asked["actions"]] or ["read"])
    if asked["space"] is not None and space_ref != asked["space"]:
        raise InvalidRequest(f"the agent asked for space {asked['space']!r} only")
    ttl_ms = min(settings.oauth_consent_ttl, settings.delegation_ttl_max) * 1000
    code = CODE_PREFIX + secrets.token_urlsafe(32)

    def txn(conn: Any) -> str:
        r = sql.request_txn(conn, request_id)
        if not sql.finish_request_txn(conn, request_id, now):
            raise NotFound("this sign-in request was answered already")
        space, _ = space_access_txn(conn, p, space_ref,
                                    "editor" if "write" in granted else "viewer", lock=True)
        agent = asked["agent"]
        device_id, delegation_id, consent_id = new_id(now), new_id(now), new_id(now)
        name, _ = grants.distinct_name_txn(conn, p.user_id, f"remote agent {agent}"[:90])
        insert_device_txn(conn, id=device_id, user_id=p.user_id, name=name,
                          public_key=public_b64(new_private_key()), token_hash=None,
                          created_at=now)
        scope = "write" if "write" in granted else "read"
        insert_delegation_txn(conn, id=delegation_id, user_id=p.user_id, device_id=device_id,
                              space_id=space.id, agent=agent, scope=scope, created_at=now,
                              expires_at=now + ttl_ms)
        sql.insert_txn(conn, sql.oauth_consents, id=consent_id, client_id=r.client_id,
                       user_id=p.user_id, device_id=device_id, delegation_id=delegation_id,
                       space_id=space.id, agent=agent, scopes=" ".join(granted),
                       created_at=now, expires_at=now + ttl_ms)
        sql.insert_txn(conn, sql.oauth_codes, code_hash=secret_hash(code),
                       consent_id=consent_id, client_id=r.client_id,
                       redirect_uri=r.redirect_uri, redirect_explicit=r.redirect_explicit,
                       code_challenge=r.code_challenge, scopes=" ".join(granted),
                       resource=r.resource, expires_at=now + settings.oauth_code_ttl * 1000)
        audit.record_space_txn(conn, space, at=now, action="oauth.consent", actor=p.actor(),
                               details={"consent": consent_id, "client": r.client_id,
                                        "agent": agent, "scopes": granted,
                                        "delegation": delegation_id,
                                        "expires_at": now + ttl_ms})
        return _with_query(r.redirect_uri, {"code": code, "state": r.state})

    return store.run_write(txn)


def deny(store: Store, request_id: str, now: int) -> str:
    """The member says no: the client learns ``access_denied``."""
    pending(store, request_id, now)

    def txn(conn: Any) -> str:
        r = sql.request_txn(conn, request_id)
        if not sql.finish_request_txn(conn, request_id, now):
            raise NotFound("this sign-in request was answered already")
        return _with_query(r.redirect_uri, {"error": "access_denied",
                                            "error_description": "the member declined",
                                            "state": r.state})

    return store.run_write(txn)


def list_consents(store: Store, p: Principal, now: int) -> list[dict[str, Any]]:
    """The member's consents, newest first, live ones marked."""
    with store.read() as conn:
        rows = sql.consents_of_txn(conn, p.user_id)
    return [{"id": r.id, "client_name": r.client_name, "agent": r.agent,
             "space_name": r.space_name, "scopes": r.scopes.split(),
             "created_at": r.created_at, "expires_at": r.expires_at,
             "revoked_at": r.revoked_at,
             "live": r.revoked_at is None and r.expires_at > now} for r in rows]


def revoke(store: Store, p: Principal, consent_id: str, now: int) -> None:
    """Revoke one of the member's consents: its tokens and delegation stop at once."""

    def txn(conn: Any) -> None:
        c = sql.consent_txn(conn, consent_id) if len(consent_id) <= 26 else None
        if c is None or c.user_id != p.user_id:
            raise NotFound("no such consent of yours")
        end_txn(conn, c, now, actor=p.actor(), reason="member")

    store.run_write(txn)


def revoke_leaked_txn(conn: Any, consent_id: str, now: int) -> None:
    """A replayed authorization code or a rotated refresh token used again: the consent's
    credentials leaked, so everything it made ends as a member's revocation does, audited
    with ``reason: leaked`` (the actor: the consent's own agent, whose credential it was)."""
    c = sql.consent_txn(conn, consent_id)
    if c is not None:
        end_txn(conn, c, now, reason="leaked",
                actor={"user": c.user_id, "device": c.device_id, "agent": c.agent})


def end_txn(conn: Any, c: Any, now: int, *, actor: dict[str, Any], reason: str) -> None:
    """The consent ``c`` (a row of ``sql.consent_txn``) revoked with its delegation and its
    device row (nothing of it left live), audited ``oauth.consent_revoke``; nothing when it
    was revoked already."""
    if not sql.revoke_consent_txn(conn, c.id, now):
        return  # revoked already
    d = get_delegation_txn(conn, c.delegation_id)
    if d is not None and d.revoked_at is None:
        revoke_delegation_txn(conn, c.delegation_id, now)
    revoke_device_txn(conn, c.device_id, now)
    space = get_space_txn(conn, c.space_id, lock=True)  # a former member revokes too
    audit.record_space_txn(conn, space, at=now, action="oauth.consent_revoke", actor=actor,
                           details={"consent": c.id, "agent": c.agent,
                                    "delegation": c.delegation_id, "reason": reason})
