"""Console sessions: who a browser is, and the CSRF token of its forms.

    sign-in  start()   a random session secret goes to the browser as an HttpOnly cookie;
                       the hub stores only its hash, and starts a device login (RFC 8628)
                       whose device key is derived from the secret
             resume()  on each visit of the waiting page: once a signed-in device of the
                       member approved the code, the login is redeemed with a proof signed
                       by that key; the session is then bound to the new device and its user
                       under a new secret (the browser's cookie is replaced): a secret
                       planted in a browser before sign-in (session fixation) signs no one in
    or       start_signed_in()  after an OpenID Connect sign-in (hub/console/oidc.py): the same
                       kind of session and device, bound to the user at once
    visit    principal_txn()  session -> (user, device), re-read as they are now
    sign-out end()     the session and its device are revoked

A session lives ``console_session_ttl`` seconds from sign-in, whatever happens. The CSRF token
is an HMAC of the session secret: a form posted without it, or from another origin, changes
nothing (hub/console/http.py checks both).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from hub import audit, grants
from hub.access import Principal, recheck_principal_txn, secret_hash
from hub.grants import AuthorizationPending
from hub.store import console_sessions as cs
from hub.store.db import Store
from hub.store.principals import insert_device_txn
from shared.errors import Unauthorized
from shared.ids import new_id
from shared.signing import jwk_thumbprint, public_b64

COOKIE = "quire_console"
SECRET_PREFIX = "qs_"


def device_key(secret: str) -> Ed25519PrivateKey:
    """The browser's device key, derived from its session secret (never stored)."""
    seed = hmac.new(secret.encode(), b"quire console device key", hashlib.sha256).digest()
    return Ed25519PrivateKey.from_private_bytes(seed)


def csrf_token(secret: str) -> str:
    return hmac.new(secret.encode(), b"quire console csrf", hashlib.sha256).hexdigest()


def csrf_ok(secret: str, sent: str | None) -> bool:
    return isinstance(sent, str) and hmac.compare_digest(csrf_token(secret), sent)


@dataclass(frozen=True)
class Session:
    id: str
    user_id: str | None
    device_id: str | None
    device_code: str | None
    expires_at: int

    @property
    def signed_in(self) -> bool:
        return self.device_id is not None


def find(store: Store, secret: str | None, now: int) -> Session | None:
    """The live session behind a cookie, or None (unknown, expired or signed out)."""
    if not secret or not secret.startswith(SECRET_PREFIX) or len(secret) > 100:
        return None
    with store.read() as conn:
        r = cs.by_hash_txn(conn, secret_hash(secret))
    if r is None:
        return None
    sid, user_id, device_id, device_code, expires_at, revoked_at = r
    if revoked_at is not None or expires_at <= now:
        return None
    return Session(sid, user_id, device_id, device_code, int(expires_at))


def start(store: Store, settings: Any, now: int, client: str | None = None
          ) -> tuple[str, str]:
    """A new pending session: (secret for the cookie, user code to approve); ``client``:
    the browser's address, shown to the approver."""
    secret = SECRET_PREFIX + secrets.token_urlsafe(32)
    login = grants.start_device(store, settings, {
        "device_name": "console (browser)", "device_key": public_b64(device_key(secret))}, now,
        client)

    store.run_write(lambda conn: cs.insert_txn(
        conn, id=new_id(now), token_hash=secret_hash(secret), device_code=login["device_code"],
        now=now, expires_at=now + settings.console_session_ttl * 1000))
    return secret, str(login["user_code"])


def resume(store: Store, key: Any, settings: Any, secret: str, session: Session, now: int
           ) -> str | None:
    """Finish a pending sign-in if its code was approved: returns the session's secret from
    now on (a new one: the caller replaces the cookie; the waiting secret is dead), or None
    while it waits. A session signed in already keeps its secret."""
    if session.signed_in:
        return secret
    try:
        out = grants.redeem_device_code(
            store, key, settings, {"device_code": session.device_code},
            jwk_thumbprint(public_b64(device_key(secret))), now)
    except AuthorizationPending:
        return None
    rotated = SECRET_PREFIX + secrets.token_urlsafe(32)
    store.run_write(lambda conn: cs.bind_txn(conn, session.id, out["user_id"],
                                             out["device_id"], secret_hash(rotated)))
    return rotated


def start_signed_in(store: Store, user_id: str, now: int, ttl_s: int, via: dict[str, Any]
                    ) -> str:
    """A session bound to ``user_id`` from the start, with its browser device (named
    ``console (browser)`` as by device approval, its key derived from the secret); audited as
    a device login with ``via`` (how the user was identified). Returns the cookie secret."""
    secret = SECRET_PREFIX + secrets.token_urlsafe(32)
    name, key = "console (browser)", public_b64(device_key(secret))

    def txn(conn: Any) -> None:
        device_id, sid = new_id(now), new_id(now)
        insert_device_txn(conn, id=device_id, user_id=user_id, name=name, public_key=key,
                          token_hash=None, created_at=now)
        cs.insert_bound_txn(conn, id=sid, token_hash=secret_hash(secret), user_id=user_id,
                            device_id=device_id, now=now, expires_at=now + ttl_s * 1000)
        audit.record_hub_txn(conn, at=now, action="device.login",
                             actor={"user": user_id, "device": device_id, "agent": None},
                             details={"device_name": name, "session": sid, **via})

    store.run_write(txn)
    return secret


def principal(store: Store, session: Session, now: int) -> Principal:
    """The session's user and device as they are now (revoked device: Unauthorized)."""
    if not session.signed_in:
        raise Unauthorized("not signed in", {"reason": "no_session"})
    with store.read() as conn:
        r = cs.device_user_txn(conn, str(session.device_id))
        if r is None:
            raise Unauthorized("device no longer exists", {"reason": "device_removed"})
        stub = Principal(r[0], str(session.device_id), r[1], bool(r[2]))
        return recheck_principal_txn(conn, stub, now)


def end(store: Store, session: Session, now: int) -> None:
    """Sign out: the session is revoked, and so is the browser's device."""
    store.run_write(lambda conn: cs.revoke_txn(conn, session.id, session.device_id, now))

