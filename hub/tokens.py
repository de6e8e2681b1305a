"""Access tokens: JWTs signed by the hub key (joserfc), bound to a device key.

    header  {"alg": "Ed25519", "typ": "at+jwt", "kid": <hub key id>}
    claims  {"iss", "aud": <hub URL>, "sub": <user>, "did": <device>, "iat", "nbf", "exp",
             "jti", "cnf": {"jkt": <device key thumbprint>},
             delegated only: "act": {"sub": <agent>}, "dlg": <delegation id>,
                             "space": <space id>, "scope": "read"|"write"}

Pure functions over values (no database): ``verify_access_token`` checks the signature,
the algorithm (only ``Ed25519``: ``none``, HMAC and anything else are refused before any key
is used), ``typ``, ``kid``, ``aud`` and the time claims; the caller then checks the device
behind ``did`` and, with the DPoP proof, that the caller holds the key named by ``cnf``.
Every refusal is ``Unauthorized`` with ``details.reason`` so a client knows whether a
refresh can help (``token_expired``) or not.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import OKPKey

from hub.keys import HubKey
from shared import jsonlimits
from shared.errors import Unauthorized
from shared.ids import new_id
from shared.signing import b64u_decode

ALG = "Ed25519"  # RFC 9864 fully-specified EdDSA (decision in docs/decisions.md)
ACCESS_TYP = "at+jwt"
MAX_TOKEN = 4096
LEEWAY_S = 30  # clock skew tolerated on nbf/iat between hub processes


@dataclass(frozen=True)
class AccessClaims:
    user_id: str
    device_id: str
    jkt: str
    exp: int
    delegation_id: str | None = None
    agent: str | None = None
    space_id: str | None = None
    scope: str | None = None


def hub_jwk(key: HubKey) -> OKPKey:
    return OKPKey.import_key(key.private)


def issue_access_token(key: HubKey, *, aud: str, user_id: str, device_id: str, jkt: str,
                       now_ms: int, ttl_s: int, delegation: dict[str, Any] | None = None
                       ) -> tuple[str, int]:
    """Sign an access token; returns ``(token, exp)`` (exp in Unix seconds)."""
    now = now_ms // 1000
    claims: dict[str, Any] = {"iss": aud, "aud": aud, "sub": user_id, "did": device_id,
                              "iat": now, "nbf": now, "exp": now + ttl_s, "jti": new_id(now_ms),
                              "cnf": {"jkt": jkt}}
    if delegation is not None:
        claims.update({"act": {"sub": delegation["agent"]}, "dlg": delegation["id"],
                       "space": delegation["space_id"], "scope": delegation["scope"]})
    header = {"alg": ALG, "typ": ACCESS_TYP, "kid": key.kid}
    token = jwt.encode(header, claims, hub_jwk(key), algorithms=[ALG])
    return token, claims["exp"]


def _bad(message: str, reason: str = "invalid_token") -> Unauthorized:
    return Unauthorized(message, {"reason": reason})


def unverified_header(token: str) -> dict[str, Any]:
    """The JOSE header, parsed strictly, before any signature work (to refuse early)."""
    if not isinstance(token, str) or not token or len(token) > MAX_TOKEN:
        raise _bad("access token missing or too long")
    parts = token.split(".")
    if len(parts) != 3:
        raise _bad("access token is not a compact JWS")
    try:
        header = jsonlimits.loads(b64u_decode(parts[0]))
    except (ValueError, UnicodeDecodeError) as e:
        raise _bad("access token header is not base64url JSON") from e
    if not isinstance(header, dict):
        raise _bad("access token header is not a JSON object")
    return header


def verify_access_token(token: str, key: HubKey, *, aud: str, now_ms: int) -> AccessClaims:
    header = unverified_header(token)
    if header.get("alg") != ALG:
        raise _bad(f"access token alg must be {ALG}", "bad_alg")
    if header.get("typ") != ACCESS_TYP:
        raise _bad(f"access token typ must be {ACCESS_TYP}", "bad_typ")
    if header.get("kid") != key.kid:
        raise _bad("access token was not signed by this hub's key", "unknown_kid")
    try:
        tok = jwt.decode(token, OKPKey.import_key(key.private.public_key()), algorithms=[ALG])
    except (JoseError, ValueError, TypeError) as e:
        raise _bad("access token signature does not verify", "bad_signature") from e
    c = tok.claims
    now = now_ms // 1000
    if c.get("aud") != aud:
        raise _bad("access token is for another hub (aud)", "wrong_audience")
    for name in ("exp", "nbf", "iat"):
        if not isinstance(c.get(name), int) or isinstance(c.get(name), bool):
            raise _bad(f"access token claim {name} missing")
    if c["exp"] <= now:
        raise _bad("access token expired; refresh it", "token_expired")
    if c["nbf"] > now + LEEWAY_S or c["iat"] > now + LEEWAY_S:
        raise _bad("access token is not valid yet", "token_not_yet_valid")
    cnf = c.get("cnf")
    jkt = cnf.get("jkt") if isinstance(cnf, dict) else None
    if not (isinstance(c.get("sub"), str) and isinstance(c.get("did"), str)
            and isinstance(jkt, str)):
        raise _bad("access token lacks sub, did or cnf.jkt")
    if "dlg" in c:
        act = c.get("act")
        agent = act.get("sub") if isinstance(act, dict) else None
        if not (isinstance(c["dlg"], str) and isinstance(agent, str)
                and isinstance(c.get("space"), str) and c.get("scope") in ("read", "write")):
            raise _bad("delegated token lacks act, space or scope")
        return AccessClaims(c["sub"], c["did"], jkt, c["exp"], c["dlg"], agent, c["space"],
                            c["scope"])
    return AccessClaims(c["sub"], c["did"], jkt, c["exp"])


class TokenCache:
    """Access tokens this process has verified, keyed by SHA-256 of the token (and the hub
    key and audience), kept until the token's ``exp``, at most ``max_items``.

    A hit skips only what is a pure function of the token's bytes and this hub's key: the
    signature, the header and the claim shapes. Expiry is compared with the clock on every
    hit; the DPoP proof (signature, method, URL, ``iat``, ``jti``, ``ath`` binding to this
    token) and the device, user and delegation state are checked on every request as
    before, so a revocation is as effective as without the cache. Refusals are not cached.
    """

    def __init__(self, max_items: int = 10_000):
        self.max_items = max_items
        self._items: OrderedDict[bytes, AccessClaims] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def _key(token: str, key: HubKey, aud: str) -> bytes:
        return hashlib.sha256(f"{key.kid}\n{aud}\n{token}".encode()).digest()

    def verify(self, token: str, key: HubKey, *, aud: str, now_ms: int) -> AccessClaims:
        k = self._key(token, key, aud)
        with self._lock:
            hit = self._items.get(k)
        if hit is not None:
            if hit.exp <= now_ms // 1000:
                with self._lock:
                    self._items.pop(k, None)
                raise _bad("access token expired; refresh it", "token_expired")
            return hit
        claims = verify_access_token(token, key, aud=aud, now_ms=now_ms)
        with self._lock:
            self._items[k] = claims
            while len(self._items) > self.max_items:
                self._items.popitem(last=False)
        return claims
