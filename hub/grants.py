"""Token grants: what ``POST /v1/token`` and invite redemption hand out.

- ``issue_tokens_txn``: a new refresh family for a device (at join or device login).
- ``refresh``: ``grant_type=refresh_token``. The refresh credential is single use: each use
  rotates it (a new one in the same family); presenting one that was already rotated means
  two parties hold it, so the whole family is revoked (RFC 9700 §4.14.2) and audited.
  A proof by the device key is required: a stolen refresh credential alone is useless.
- device authorization grant (RFC 8628) for a member's second machine: ``start_device``
  (records the requesting address), ``preview_device`` (what the approver is shown first:
  the name as requested and as it will be, the address, the time, the code),
  ``approve_device`` (from a signed-in device), ``redeem_device_code`` (the polling
  machine, with a proof by the key it registered). Codes are single use and expire.
  The requester picks the name, so a name that reads like one of the approver's active
  devices (``name_skeleton``: case, width, look-alike letters, punctuation) is given a
  distinct one, ``<name> (2)``, … (device-approval phishing, docs/decisions.md D118);
  names with control or invisible characters are refused.

Refresh credentials are 256-bit random secrets stored as SHA-256 (see hub/access.py).
"""

from __future__ import annotations

import secrets
import unicodedata
from typing import Any

from hub import audit
from hub.access import REFRESH_PREFIX, Principal, new_secret, secret_hash
from hub.keys import HubKey
from hub.settings import Settings
from hub.store.db import Store
from hub.store.identity import (
    approve_device_code_txn,
    device_code_by_txn,
    insert_device_code_txn,
    insert_refresh_txn,
    name_device_code_txn,
    refresh_by_hash_txn,
    revoke_refresh_family_txn,
    use_device_code_txn,
    use_refresh_txn,
)
from hub.store.principals import device_by_id_txn, insert_device_txn, list_devices_txn
from hub.tokens import issue_access_token
from shared.errors import Forbidden, InvalidRequest, QuireError, Unauthorized
from shared.ids import new_id
from shared.signing import jwk_thumbprint, load_public

DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
DEVICE_CODE_PREFIX = "qc_"
USER_CODE_ALPHABET = "BCDFGHJKLMNPQRSTVWXZ"  # no vowels: no words; 20^8 ≈ 2^34.6
USER_CODE_LEN = 8


class AuthorizationPending(QuireError):
    """RFC 8628 §3.5: the user has not approved yet; poll again after ``interval``."""

    code = "authorization_pending"
    status = 400
    retryable = True


def issue_tokens_txn(conn: Any, key: HubKey, settings: Settings, *, user_id: str,
                     device_id: str, device_key: str, now: int,
                     family_id: str | None = None) -> dict[str, Any]:
    refresh = new_secret(REFRESH_PREFIX)
    insert_refresh_txn(conn, id=new_id(now), family_id=family_id or new_id(now),
                       device_id=device_id, token_hash=secret_hash(refresh), created_at=now,
                       expires_at=now + settings.refresh_ttl * 1000)
    access, exp = issue_access_token(key, aud=settings.url, user_id=user_id,
                                     device_id=device_id, jkt=jwk_thumbprint(device_key),
                                     now_ms=now, ttl_s=settings.access_ttl)
    return {"access_token": access, "token_type": "DPoP", "expires_in": settings.access_ttl,
            "expires_at": exp, "refresh_token": refresh}


def refresh(store: Store, key: HubKey, settings: Settings, body: dict[str, Any],
            proof_jkt: str, now: int) -> dict[str, Any]:
    token = body.get("refresh_token")
    if not (isinstance(token, str) and token.startswith(REFRESH_PREFIX) and len(token) < 200):
        raise InvalidRequest("refresh_token must be a refresh credential ('qr_…')")

    def txn(conn: Any) -> dict[str, Any] | QuireError:
        row = refresh_by_hash_txn(conn, secret_hash(token))
        if row is None:
            return Unauthorized("refresh credential not recognized", {"reason": "invalid_grant"})
        dev = device_by_id_txn(conn, row.device_id)
        if dev is None or dev.revoked_at is not None or not dev.user_active:
            return Unauthorized("this device was revoked; log in again",
                                {"reason": "device_revoked"})
        if jwk_thumbprint(dev.public_key) != proof_jkt:
            return Unauthorized("the DPoP proof is not signed by this device's key",
                                {"reason": "dpop_key_mismatch"})
        if row.revoked_at is not None:
            return Unauthorized("this refresh credential was revoked; log in again",
                                {"reason": "refresh_revoked"})
        if row.used_at is not None or not use_refresh_txn(conn, row.id, now):
            # a rotated credential came back: someone else holds a copy. Revoke the family
            # and commit that (the error is returned, not raised, so the revocation lands).
            n = revoke_refresh_family_txn(conn, row.family_id, now)
            audit.record_hub_txn(conn, at=now, action="token.reuse_detected",
                                 actor={"user": dev.user_id, "device": dev.id, "agent": None},
                                 details={"family": row.family_id, "revoked": n})
            return Unauthorized("this refresh credential was already used; every credential "
                                "of this login is now revoked: log in again",
                                {"reason": "refresh_reused"})
        if row.expires_at <= now:
            return Unauthorized("refresh credential expired; log in again",
                                {"reason": "refresh_expired"})
        return issue_tokens_txn(conn, key, settings, user_id=dev.user_id, device_id=dev.id,
                                device_key=dev.public_key, now=now, family_id=row.family_id)

    out = store.run_write(txn)
    if isinstance(out, QuireError):
        raise out
    return out


# ---------------------------------------------------------------- device authorization grant


def normalize_user_code(code: Any) -> str:
    if not isinstance(code, str) or len(code) > 20:
        raise InvalidRequest("user_code must be a code like BCDF-GHJK")
    return "".join(ch for ch in code.upper() if ch.isalnum())


def shown_user_code(code: str) -> str:
    return code[:4] + "-" + code[4:]


# letters of other scripts that read as Latin ones (the common look-alikes; NFKC already
# folds full-width and compatibility forms)
_LOOKALIKE = str.maketrans({
    "а": "a", "е": "e", "о": "o", "р": "p", "с": "c", "у": "y", "х": "x", "і": "i",
    "ј": "j", "ѕ": "s", "ԁ": "d", "ɡ": "g", "һ": "h", "к": "k", "м": "m", "т": "t",
    "в": "b", "н": "h", "ο": "o", "α": "a", "ι": "i", "κ": "k", "τ": "t", "ρ": "p",
    "ν": "v", "ε": "e", "0": "o", "1": "l", "|": "l"})


def name_skeleton(name: str) -> str:
    """What a device name reads as: NFKC, case-folded, look-alike letters folded, accents
    and everything but letters and digits dropped. Two names with one skeleton look alike."""
    folded = unicodedata.normalize("NFKC", name).casefold().translate(_LOOKALIKE)
    plain = unicodedata.normalize("NFKD", folded)
    return "".join(ch for ch in plain if ch.isalnum())


def check_device_name(name: Any) -> str:
    """1-100 characters, none of them control, format (bidi overrides, zero-width, soft
    hyphen) or separators other than the space, and not blank: a name people read."""
    if not (isinstance(name, str) and 0 < len(name) <= 100):
        raise InvalidRequest("device_name must be 1-100 characters")
    bad = [ch for ch in name if unicodedata.category(ch)[0] in "CZ" and ch != " "]
    if bad or not name.strip():
        raise InvalidRequest("device_name must be printable text (no control, invisible or "
                             "direction-changing characters)",
                             {"field": "device_name"})
    return name


def distinct_name_txn(conn: Any, user_id: str, requested: str) -> tuple[str, str | None]:
    """The name a device requested, or ``<name> (N)`` when it reads like one of the user's
    active devices; and the name of the device it reads like (None when distinct)."""
    active = [d["name"] for d in list_devices_txn(conn, user_id) if d["revoked_at"] is None]
    skeletons = {name_skeleton(n): n for n in active}
    like = skeletons.get(name_skeleton(requested))
    if like is None:
        return requested, None
    n = 2
    while True:
        candidate = f"{requested[:92]} ({n})"
        if name_skeleton(candidate) not in skeletons:
            return candidate, like
        n += 1


def start_device(store: Store, settings: Settings, body: dict[str, Any], now: int,
                 client: str | None = None) -> dict[str, Any]:
    """RFC 8628 §3.1-3.2: a device code for the new machine and a short user code.
    ``client``: the address it came from (hub/clientaddr.py), shown to the approver."""
    name, device_key = check_device_name(body.get("device_name", "device")), body.get(
        "device_key")
    try:
        load_public(device_key)  # type: ignore[arg-type]  # checked right here
    except (ValueError, TypeError) as e:
        raise InvalidRequest("device_key must be a base64url Ed25519 public key") from e
    device_code = new_secret(DEVICE_CODE_PREFIX)
    user_code = "".join(secrets.choice(USER_CODE_ALPHABET) for _ in range(USER_CODE_LEN))

    def txn(conn: Any) -> None:
        insert_device_code_txn(conn, id=new_id(now), device_code_hash=secret_hash(device_code),
                               user_code_hash=secret_hash(user_code), device_name=name,
                               device_key=device_key, created_at=now,
                               expires_at=now + settings.device_code_ttl * 1000,
                               requested_from=(client or "")[:64] or None)

    store.run_write(txn)
    return {"device_code": device_code, "user_code": shown_user_code(user_code),
            "verification_uri": settings.url.rstrip("/") + "/v1/device",
            "expires_in": settings.device_code_ttl, "interval": settings.device_code_interval}


def _pending_txn(conn: Any, p: Principal, body: dict[str, Any], now: int) -> Any:
    """The pending device login a user code names, for a signed-in (not delegated) device."""
    if p.delegation_id is not None:
        raise Forbidden("delegated credentials cannot approve device logins",
                        {"reason": "delegated"})
    user_code = normalize_user_code(body.get("user_code"))
    row = device_code_by_txn(conn, user_code_hash=secret_hash(user_code))
    if row is None or row.expires_at <= now:
        raise Forbidden("no pending device login with this code (expired or mistyped)",
                        {"reason": "unknown_user_code"})
    if row.approved_at is not None:
        raise Forbidden("this code was already approved", {"reason": "code_used"})
    return row, user_code


def _described(row: Any, user_code: str, name: str, like: str | None) -> dict[str, Any]:
    return {"user_code": shown_user_code(user_code), "requested_name": row.device_name,
            "device_name": name, "renamed": like is not None, "like": like,
            "requested_from": row.requested_from, "requested_at": row.created_at,
            "expires_at": row.expires_at, "jkt": jwk_thumbprint(row.device_key)}


def preview_device(store: Store, p: Principal, body: dict[str, Any], now: int
                   ) -> dict[str, Any]:
    """What approving this code would do, shown before the approver confirms: the name as
    requested and as it will be (``renamed``, ``like``: the device it reads like), the
    address and time of the request, the code to compare. Changes nothing."""
    with store.read() as conn:
        row, user_code = _pending_txn(conn, p, body, now)
        name, like = distinct_name_txn(conn, p.user_id, row.device_name)
        return _described(row, user_code, name, like)


def approve_device(store: Store, p: Principal, body: dict[str, Any], now: int
                   ) -> dict[str, Any]:
    """A signed-in device of the member approves the user code shown on the new machine;
    the new device gets a name distinct from the member's active devices."""

    def txn(conn: Any) -> dict[str, Any]:
        row, user_code = _pending_txn(conn, p, body, now)
        name, like = distinct_name_txn(conn, p.user_id, row.device_name)
        if not approve_device_code_txn(conn, row.id, p.user_id, now):
            raise Forbidden("this code was already approved", {"reason": "code_used"})
        name_device_code_txn(conn, row.id, name)
        out = _described(row, user_code, name, like)
        audit.record_hub_txn(conn, at=now, action="device.approve", actor=p.actor(),
                             details={"code": row.id, "device_name": name,
                                      "requested_name": row.device_name,
                                      "requested_from": row.requested_from,
                                      "jkt": out["jkt"]})
        return dict(out, approved=True)

    return store.run_write(txn)


def redeem_device_code(store: Store, key: HubKey, settings: Settings, body: dict[str, Any],
                       proof_jkt: str, now: int) -> dict[str, Any]:
    code = body.get("device_code")
    if not (isinstance(code, str) and code.startswith(DEVICE_CODE_PREFIX) and len(code) < 200):
        raise InvalidRequest("device_code must be a device code ('qc_…')")

    def txn(conn: Any) -> dict[str, Any] | QuireError:
        row = device_code_by_txn(conn, device_code_hash=secret_hash(code))
        if row is None:
            return Unauthorized("device code not recognized", {"reason": "invalid_grant"})
        if jwk_thumbprint(row.device_key) != proof_jkt:
            return Unauthorized("the DPoP proof is not signed by the key that started this "
                                "login", {"reason": "dpop_key_mismatch"})
        if row.used_at is not None:
            return Unauthorized("this device code was already used", {"reason": "code_used"})
        if row.expires_at <= now:
            return Unauthorized("this device code expired; start again",
                                {"reason": "expired_token"})
        if row.approved_at is None:
            return AuthorizationPending("waiting for approval from a signed-in device",
                                        {"interval": settings.device_code_interval})
        device_id = new_id(now)
        if not use_device_code_txn(conn, row.id, device_id, now):
            return Unauthorized("this device code was already used", {"reason": "code_used"})
        insert_device_txn(conn, id=device_id, user_id=row.approved_by, name=row.device_name,
                          public_key=row.device_key, token_hash=None, created_at=now)
        actor = {"user": row.approved_by, "device": device_id, "agent": None}
        audit.record_hub_txn(conn, at=now, action="device.login", actor=actor,
                             details={"code": row.id, "device_name": row.device_name})
        out = issue_tokens_txn(conn, key, settings, user_id=row.approved_by,
                               device_id=device_id, device_key=row.device_key, now=now)
        return dict(out, user_id=row.approved_by, device_id=device_id,
                    device_name=row.device_name)

    out = store.run_write(txn)
    if isinstance(out, QuireError):
        raise out
    return out
