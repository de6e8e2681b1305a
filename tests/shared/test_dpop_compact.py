"""shared/dpop.py writes the DPoP proof's JWS by hand (D141): the same bytes joserfc makes,
and a proof the hub's joserfc verification accepts; a tampered one it refuses."""

from __future__ import annotations

import pytest
from joserfc import jws
from joserfc.errors import BadSignatureError
from joserfc.jwk import OKPKey

from shared.canonical import canonical_bytes
from shared.dpop import ALG, DPOP_TYP, ath, make_proof
from shared.signing import new_private_key, public_b64


def test_the_proof_is_joserfcs_compact_jws_byte_for_byte() -> None:
    key = new_private_key()
    proof = make_proof(key, "post", "https://Hub.example/v1/x?q=1", access_token="tok",
                       iat=1700000000, jti="j1", extra_header={"kid": "é"},
                       extra_claims={"n": 1})
    header = {"typ": DPOP_TYP, "alg": ALG,
              "jwk": {"kty": "OKP", "crv": "Ed25519", "x": public_b64(key)}, "kid": "é"}
    body = canonical_bytes({"jti": "j1", "htm": "POST", "htu": "https://hub.example/v1/x",
                            "iat": 1700000000,
                            "ath": ath("tok"), "n": 1})
    assert proof == jws.serialize_compact(header, body, OKPKey.import_key(key),
                                          algorithms=[ALG])
    got = jws.deserialize_compact(proof, OKPKey.import_key(key), algorithms=[ALG])
    assert got.headers()["jwk"]["x"] == public_b64(key) and got.payload == body


def test_a_tampered_proof_does_not_verify() -> None:
    key = new_private_key()
    head, claims, sig = make_proof(key, "GET", "https://hub.example/v1/x").split(".")
    other = make_proof(key, "GET", "https://hub.example/v1/y").split(".")[1]
    with pytest.raises(BadSignatureError):
        jws.deserialize_compact(f"{head}.{other}.{sig}", OKPKey.import_key(key),
                                algorithms=[ALG])
