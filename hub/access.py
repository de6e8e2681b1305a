"""Who is calling, and what may they do in a space.

``authenticate`` turns an access token plus its DPoP proof into a ``Principal``;
``space_access_txn`` re-reads the principal's current state and role from the database. The
guard calls the latter twice: once while preparing and again inside the committing
transaction, so a revocation that lands in between is seen.

    Authorization: DPoP <access token>     (hub/tokens.py: JWT signed by the hub key)
    DPoP: <proof>                          (hub/dpop.py: signed by the device key)

The token's ``cnf.jkt`` must equal the proof key's thumbprint and the thumbprint of the
device key registered for ``did``; the device (and its user, and a delegation if the token
is delegated) is re-read on every request, so revocation is effective on the next request.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from hub import policy
from hub.dpop import JtiCache, verify_proof
from hub.keys import HubKey
from hub.store.identity import get_delegation_txn
from hub.store.principals import device_by_id_txn, get_replica_txn, role_txn
from hub.store.spaces_sql import deleted_statement_txn, find_space_txn, get_space_txn
from hub.tokens import AccessClaims, TokenCache, verify_access_token
from shared.errors import Forbidden, NotFound, SpaceDeleted, Unauthorized
from shared.signing import jwk_thumbprint

REFRESH_PREFIX = "qr_"
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
    space_id: str | None = None  # the one space a delegated token reaches
    replica_id: str | None = None  # the replica a pull names (``Quire-Replica`` header)
    # a hub-attested publication (hub/attested_publish.py): the device is the member's
    # hub-held one, and this says whose change it is and who approved it
    via_hub: HubAttested | None = None

    @property
    def author_agent(self) -> str | None:
        """The agent a batch of this caller is by: its own, or the one whose change the
        hub attests for a member."""
        return self.via_hub.agent if self.via_hub is not None else self.agent

    def actor(self) -> dict[str, Any]:
        """How this caller appears in receipts and audit events."""
        out: dict[str, Any] = {"user": self.user_id, "device": self.device_id,
                               "agent": self.agent}
        if self.delegation_id is not None:
            out["delegation"] = self.delegation_id  # which grant the agent acted under
        if self.via_hub is not None:
            out["attested"] = self.via_hub.to_json()  # both principals, in one event
        return out


@dataclass(frozen=True)
class HubAttested:
    """Whose change a hub-attested batch carries (hub/attested_publish.py): ``agent``
    acting for the member ``agent_user``, approved by the member ``approved_by`` (the
    publishing principal), from ``proposal`` when it was one."""

    agent: str
    agent_user: str
    approved_by: str
    proposal: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"by": "hub", "agent": self.agent, "agent_user": self.agent_user,
                "approved_by": self.approved_by, "proposal": self.proposal}

    def provenance(self) -> dict[str, str]:
        """What the batch's signed provenance says of it (checked by the guard)."""
        out = {"agent": self.agent, "attested": "hub", "proposed_by": self.agent_user,
               "approved_by": self.approved_by}
        if self.proposal is not None:
            out["proposal"] = self.proposal
        return out


def new_secret(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(32)


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def token_from_header(header: str | None) -> str:
    if not header:
        raise Unauthorized("no credential: send 'Authorization: DPoP <access token>' with a "
                           "DPoP proof (run 'quire join' or 'quire login' to get tokens)",
                           {"reason": "no_token"})
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer":
        raise Unauthorized("bearer credentials are not accepted: tokens are bound to the "
                           "device key; send 'Authorization: DPoP <token>' and a DPoP proof",
                           {"reason": "dpop_required"})
    if scheme.lower() != "dpop" or not value.strip() or len(value) > 4096:
        raise Unauthorized("malformed Authorization header; expected 'DPoP <access token>'",
                           {"reason": "invalid_token"})
    return value.strip()


def verify_request(key: HubKey, cache: JtiCache, *, aud: str, method: str, path: str,
                   authorization: str | None, proof: str | None, now_ms: int,
                   window_s: int, tokens: TokenCache | None = None) -> AccessClaims:
    """The stateless half of authentication: token signature and claims, proof, binding.
    ``tokens`` caches verified tokens (hub/tokens.py says what a hit skips and what not)."""
    token = token_from_header(authorization)
    claims = (verify_access_token(token, key, aud=aud, now_ms=now_ms) if tokens is None
              else tokens.verify(token, key, aud=aud, now_ms=now_ms))
    jkt = verify_proof(proof, method=method, url=aud.rstrip("/") + path, access_token=token,
                       now_ms=now_ms, window_s=window_s, cache=cache)
    if jkt != claims.jkt:
        raise Unauthorized("the DPoP proof is signed by another key than the token is bound "
                           "to", {"reason": "dpop_key_mismatch"})
    return claims


def authenticate_txn(conn: Any, claims: AccessClaims, now_ms: int) -> Principal:
    """The stateful half: the device, its user and any delegation, as they are now."""
    return authenticate_device_txn(conn, claims, now_ms)[0]


_READ: Any = object()  # "not read yet": the function reads the row itself


def authenticate_device_txn(conn: Any, claims: AccessClaims, now_ms: int, dev: Any = _READ
                            ) -> tuple[Principal, Any]:
    """``authenticate_txn`` that also returns the device row it read (its public key).
    ``dev``: the device row (or None) as this transaction already read it."""
    if dev is _READ:
        dev = device_by_id_txn(conn, claims.device_id)
    if dev is None or dev.user_id != claims.user_id:
        raise Unauthorized("credential not recognized", {"reason": "unknown_device"})
    _check_device(dev)
    if jwk_thumbprint(dev.public_key) != claims.jkt:
        raise Unauthorized("token is bound to a key this device does not hold",
                           {"reason": "dpop_key_mismatch"})
    p = Principal(dev.user_id, dev.id, dev.user_name, dev.is_owner)
    if claims.delegation_id is not None:
        p = Principal(dev.user_id, dev.id, dev.user_name, dev.is_owner, claims.agent,
                      claims.delegation_id, claims.scope, claims.space_id)
        _check_delegation_txn(conn, p, now_ms)
    return p, dev


def _check_delegation_txn(conn: Any, p: Principal, now_ms: int | None) -> None:
    d = get_delegation_txn(conn, p.delegation_id or "")
    if d is None or d.device_id != p.device_id or d.space_id != p.space_id:
        raise Unauthorized("delegation not recognized", {"reason": "unknown_delegation"})
    if d.revoked_at is not None:
        raise Unauthorized("this delegation was revoked", {"reason": "delegation_revoked"})
    if now_ms is not None and d.expires_at <= now_ms:
        raise Unauthorized("this delegation expired", {"reason": "delegation_expired"})


def _check_device(dev: Any) -> None:
    if dev.revoked_at is not None:
        raise Unauthorized("this device was revoked; ask an admin, then log in again",
                           {"reason": "device_revoked"})
    if not dev.user_active:
        raise Unauthorized("this user was deactivated", {"reason": "user_inactive"})


def recheck_principal_txn(conn: Any, p: Principal, now_ms: int | None = None, *,
                          lock: bool = False) -> Principal:
    """Re-read the device and user behind ``p``; raises when either is no longer valid.
    ``now_ms``: also re-check a delegation's expiry (long-lived event streams).
    ``lock``: keep what was read true until this transaction commits (the guard's commit):
    the device and user rows stay locked, so a revocation or deactivation waits for it.
    Under READ COMMITTED a plain re-read is true only at the moment it runs."""
    return recheck_device_txn(conn, p, now_ms, lock=lock)[0]


def recheck_device_txn(conn: Any, p: Principal, now_ms: int | None = None, *,
                       lock: bool = False) -> tuple[Principal, Any]:
    """``recheck_principal_txn`` that also returns the device row (its public key)."""
    return recheck_device_row_txn(conn, p, device_by_id_txn(conn, p.device_id, lock=lock),
                                  now_ms)


def recheck_device_row_txn(conn: Any, p: Principal, dev: Any, now_ms: int | None = None
                           ) -> tuple[Principal, Any]:
    """``recheck_device_txn`` on a device row the caller read in this transaction (the
    guard reads it with the rest of its commit-time checks: ``commit_context_read``)."""
    if dev is None:
        raise Unauthorized("device no longer exists", {"reason": "device_removed"})
    _check_device(dev)
    if p.delegation_id is not None:
        # a request's expiry was checked when it arrived (now_ms None); revocation must be
        # seen at commit; a stream that outlives its delegation passes now_ms
        _check_delegation_txn(conn, p, now_ms)
    return replace(p, user_id=dev.user_id, device_id=dev.id, user_name=dev.user_name,
                   is_owner=dev.is_owner), dev


def effective_role_txn(conn: Any, p: Principal, space_id: str) -> str | None:
    return effective_role(p, space_id, lambda: role_txn(conn, space_id, p.user_id))


def effective_role(p: Principal, space_id: str, member_role: Callable[[], str | None]
                   ) -> str | None:
    """The role ``p`` acts with in the space; ``member_role()``: the user's membership role
    (read only when the answer depends on it)."""
    if p.delegation_id is not None and p.space_id != space_id:
        return None  # a delegated token reaches exactly one space
    # an agent's rights: a delegated token, or a hub-attested change judged as the agent
    # acting for the member (hub/attested_publish.py, rights="agent")
    for_agent = p.delegation_id is not None or (p.via_hub is not None and p.agent is not None)
    if p.is_owner and not for_agent:
        return "admin"
    role = member_role()
    if role is not None and p.scope == "read":
        return "viewer"
    if role == "admin" and for_agent:
        return "editor"  # an agent never reaches admin rights, however it publishes
    return role


def space_access_txn(conn: Any, p: Principal, space_ref: str, minimum: str,
                     *, lock: bool = False, deleted: bool = False, found: Any = _READ,
                     member_role: Callable[[], str | None] | None = None
                     ) -> tuple[Any, str]:
    """Resolve ``space_ref`` and check ``p`` holds at least ``minimum`` there.

    A space the caller is not a member of is ``not_found`` (its existence is not leaked);
    a deleted one is ``space_deleted`` for its members, with the hub-signed deletion
    statement (hub/space_delete.py), unless ``deleted`` (its delete and restore).

    ``found`` and ``member_role()``: the space row ``space_ref`` names (or None) and the
    user's membership role in it, as this transaction already read them (the guard's
    ``prepare_context_read``).
    """
    space = find_space_txn(conn, space_ref) if found is _READ else found
    if space is not None and lock:
        space = get_space_txn(conn, space.id, lock=True)
    role = None if space is None else (
        effective_role_txn(conn, p, space.id) if member_role is None
        else effective_role(p, space.id, member_role))
    if space is None or role is None:
        raise NotFound(f"no space {space_ref!r} that you are a member of")
    if space.deleted_at is not None and not deleted:
        raise_deleted_txn(conn, space)
    if not policy.at_least(role, minimum):
        raise Forbidden(f"your role in this space is {role}; this needs {minimum}",
                        {"role": role, "required": minimum})
    if p.replica_id is not None:  # a replica's pull: it must still be this device's, live
        check_replica_txn(conn, p, p.replica_id, space.id)
    return space, role


def raise_deleted_txn(conn: Any, space: Any) -> None:
    """Refuse a deleted space: ``space_deleted`` with the signed deletion statement."""
    raw = deleted_statement_txn(conn, space.id)
    st = json.loads(raw) if raw else None
    raise SpaceDeleted(
        f"space {space.name!r} was deleted; an admin may restore it until it is purged",
        {"space": space.id, "deleted_at": space.deleted_at,
         "purge_after": st.get("purge_after") if isinstance(st, dict) else None,
         "statement": st})


def check_replica_txn(conn: Any, p: Principal, replica_id: str, space_id: str) -> None:
    """``replica_id`` is registered to ``p``'s device in this space and not revoked."""
    check_replica_row(p, get_replica_txn(conn, replica_id), space_id)


def check_replica_row(p: Principal, rep: Any, space_id: str) -> None:
    """``check_replica_txn`` on the replica's row as this transaction read it."""
    if rep is None or rep.space_id != space_id or rep.device_id != p.device_id:
        raise Forbidden("replica is not registered to this device in this space",
                        {"reason": "unknown_replica"})
    if rep.revoked_at is not None:
        raise Forbidden("this replica was revoked; re-join the space",
                        {"reason": "replica_revoked"})
