"""DPoP proofs (RFC 9449), made with the device key: both the replica and the tests sign
them with this one function; the hub verifies them in ``hub/dpop.py``.

    header  {"typ": "dpop+jwt", "alg": "Ed25519", "jwk": {"kty": "OKP", "crv": "Ed25519", "x"}}
    claims  {"jti", "htm", "htu", "iat"[, "ath"]}

``htu`` is the hub's public URL plus the request path (no query, no fragment); ``ath`` is
base64url(SHA-256(access token)) when the proof accompanies an access token.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from shared.canonical import canonical_bytes
from shared.signing import b64u, public_b64

DPOP_TYP = "dpop+jwt"
ALG = "Ed25519"


def ath(access_token: str) -> str:
    return b64u(hashlib.sha256(access_token.encode("ascii")).digest())


def htu_of(url: str) -> str:
    """The URL a proof names: scheme, host and path; query and fragment dropped."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path or "/", "", ""))


def make_proof(key: Ed25519PrivateKey, method: str, url: str, *,
               access_token: str | None = None, iat: int | None = None,
               jti: str | None = None, extra_header: dict[str, Any] | None = None,
               extra_claims: dict[str, Any] | None = None) -> str:
    """A DPoP proof JWT for one request (``extra_*`` exist for hostile tests)."""
    claims: dict[str, Any] = {"jti": jti or secrets.token_urlsafe(16), "htm": method.upper(),
                              "htu": htu_of(url),
                              "iat": int(time.time()) if iat is None else iat}
    if access_token is not None:
        claims["ath"] = ath(access_token)
    claims.update(extra_claims or {})
    header = {"typ": DPOP_TYP, "alg": ALG,
              "jwk": {"kty": "OKP", "crv": "Ed25519", "x": public_b64(key)},
              **(extra_header or {})}
    # the JWS compact serialization (RFC 7515): base64url(header JSON) "." base64url(claims)
    # "." base64url(Ed25519 signature of the first two). Written here, not through joserfc
    # (which the hub verifies with): importing it cost every `quire` command ~35 ms, and the
    # bytes are the same as joserfc's (tests/shared/test_dpop_compact.py, D141)
    signing_input = (b64u(json.dumps(header, separators=(",", ":"))
                          .encode("utf-8")) + "." + b64u(canonical_bytes(claims)))
    return signing_input + "." + b64u(key.sign(signing_input.encode("ascii")))
