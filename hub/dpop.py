"""DPoP proof verification (RFC 9449) and the ``jti`` replay cache.

``verify_proof`` is pure apart from the cache: it parses the proof, refuses anything but
``typ: dpop+jwt`` with ``alg: Ed25519`` and an embedded public OKP key (and headers with
``crit`` or ``b64``), verifies the Ed25519 signature over the compact serialization's
``header.payload`` with that key (cryptography, directly: the JOSE library's general
machinery cost more than the signature check itself), then checks ``htm``, ``htu``
(against the hub's public URL, never the Host header a proxy may rewrite), ``iat`` within
the freshness window, ``ath`` against the access token, and finally records ``jti`` (a
replay inside the window is refused).
It returns the proof key's thumbprint; the caller compares it with the token's ``cnf.jkt``.

The cache here is per process; on PostgreSQL ``hub.sharedlimits.SharedJti`` extends it with
a table every hub process shares, so a replay to another process is refused too.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from functools import lru_cache

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from shared import jsonlimits
from shared.dpop import ALG, DPOP_TYP, ath, htu_of
from shared.errors import Unauthorized
from shared.signing import b64u_decode, jwk_thumbprint, load_public

MAX_PROOF = 4096


class JtiCache:
    """Seen ``jti`` values, each kept for the freshness window, at most ``max_items``.

    When full, the oldest entries are dropped; an entry is only dropped early if the cache
    holds ``max_items`` proofs younger than the window, which the rate limits make unlikely,
    and the ``iat`` window still bounds what a replay could achieve."""

    def __init__(self, window_s: int, max_items: int, clock: Callable[[], int]):
        self.window_ms = window_s * 1000 * 2  # iat may be early or late by the window
        self.max_items = max_items
        self.clock = clock
        self._seen: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, jti: str) -> bool:
        """Record ``jti``; False when it was already seen inside the window."""
        now = self.clock()
        with self._lock:
            while self._seen:
                oldest, at = next(iter(self._seen.items()))
                if now - at < self.window_ms and len(self._seen) < self.max_items:
                    break
                self._seen.popitem(last=False)
            if jti in self._seen:
                return False
            self._seen[jti] = now
            return True


_B64URL = re.compile(r"[A-Za-z0-9_-]+")


@lru_cache(maxsize=4096)
def _public_key(x: str) -> Ed25519PublicKey:
    """Device keys seen in proofs, parsed once per process (a key is a pure value)."""
    return load_public(x)


def _bad(message: str, reason: str) -> Unauthorized:
    return Unauthorized(message, {"reason": reason})


def verify_proof(proof: str | None, *, method: str, url: str, access_token: str | None,
                 now_ms: int, window_s: int, cache: JtiCache) -> str:
    """Check a DPoP proof for this request; return the thumbprint of its key."""
    if not proof:
        raise _bad("a DPoP proof is required (header 'DPoP')", "dpop_missing")
    if len(proof) > MAX_PROOF or proof.count(".") != 2:
        raise _bad("DPoP proof is not a compact JWS", "dpop_invalid")
    try:
        header = jsonlimits.loads(b64u_decode(proof.split(".")[0]))
    except (ValueError, UnicodeDecodeError) as e:
        raise _bad("DPoP proof header is not base64url JSON", "dpop_invalid") from e
    if not isinstance(header, dict) or header.get("typ") != DPOP_TYP:
        raise _bad(f"DPoP proof typ must be {DPOP_TYP}", "dpop_invalid")
    if header.get("alg") != ALG:
        raise _bad(f"DPoP proof alg must be {ALG}", "dpop_invalid")
    jwk = header.get("jwk")
    if not (isinstance(jwk, dict) and jwk.get("kty") == "OKP" and jwk.get("crv") == "Ed25519"
            and isinstance(jwk.get("x"), str) and "d" not in jwk):
        raise _bad("DPoP proof must embed the public Ed25519 device key", "dpop_invalid")
    if "crit" in header or "b64" in header:
        raise _bad("DPoP proof header has parameters this hub does not process", "dpop_invalid")
    h64, p64, s64 = proof.split(".")
    if not (_B64URL.fullmatch(h64) and _B64URL.fullmatch(p64) and _B64URL.fullmatch(s64)):
        raise _bad("DPoP proof is not base64url", "dpop_invalid")
    try:
        # RFC 7515 compact JWS, alg Ed25519 (checked above): the signature is over the
        # ASCII bytes "header.payload" exactly as sent
        _public_key(jwk["x"]).verify(b64u_decode(s64), f"{h64}.{p64}".encode("ascii"))
        claims = jsonlimits.loads(b64u_decode(p64))
    except (InvalidSignature, ValueError, TypeError) as e:
        raise _bad("DPoP proof signature does not verify", "dpop_invalid") from e
    if not isinstance(claims, dict):
        raise _bad("DPoP proof claims are not a JSON object", "dpop_invalid")
    if claims.get("htm") != method.upper():
        raise _bad("DPoP proof is for another HTTP method", "dpop_wrong_method")
    if not isinstance(claims.get("htu"), str) or htu_of(claims["htu"]) != htu_of(url):
        raise _bad("DPoP proof is for another URL", "dpop_wrong_url")
    iat = claims.get("iat")
    if not isinstance(iat, int) or isinstance(iat, bool) \
            or abs(iat - now_ms // 1000) > window_s:
        raise _bad("DPoP proof iat is outside the freshness window; check the clock",
                   "dpop_stale")
    if access_token is not None:
        if claims.get("ath") != ath(access_token):
            raise _bad("DPoP proof ath does not match the access token", "dpop_invalid")
    elif "ath" in claims:
        raise _bad("DPoP proof carries ath without an access token", "dpop_invalid")
    jti = claims.get("jti")
    if not isinstance(jti, str) or not 8 <= len(jti) <= 128:
        raise _bad("DPoP proof jti missing", "dpop_invalid")
    if not cache.add(jti):
        raise _bad("DPoP proof was already used (replayed jti)", "dpop_replayed")
    return jwk_thumbprint(jwk["x"])
