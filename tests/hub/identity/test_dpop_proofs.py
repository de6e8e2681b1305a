"""DPoP proofs are verified without the JOSE library's general machinery (hub/dpop.py):
anything but an exact Ed25519 compact JWS over the bytes as sent is refused."""

from __future__ import annotations

import base64
import json
import time

import pytest

from hub.dpop import JtiCache, verify_proof
from shared.dpop import make_proof
from shared.errors import Unauthorized
from shared.signing import new_private_key

URL = "http://hub.test/v1/spaces/s/batches"


def _verify(proof: str) -> str:
    cache = JtiCache(60, 1000, lambda: int(time.time() * 1000))
    return verify_proof(proof, method="POST", url=URL, access_token="tok",
                        now_ms=int(time.time() * 1000), window_s=60, cache=cache)


def _b64(doc: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(doc).encode()).rstrip(b"=").decode()


def test_a_good_proof_verifies() -> None:
    assert _verify(make_proof(new_private_key(), "POST", URL, access_token="tok"))


@pytest.mark.parametrize("tamper", ["payload", "signature", "header_crit", "header_b64",
                                    "not_base64url", "other_key_signature", "short_signature"])
def test_a_tampered_proof_is_refused(tamper: str) -> None:
    key = new_private_key()
    proof = make_proof(key, "POST", URL, access_token="tok")
    h, p, s = proof.split(".")
    header, claims = (json.loads(base64.urlsafe_b64decode(x + "=" * (-len(x) % 4)))
                      for x in (h, p))
    if tamper == "payload":
        proof = f"{h}.{_b64(dict(claims, htm='POST', jti=claims['jti'] + 'x'))}.{s}"
    elif tamper == "signature":
        proof = f"{h}.{p}.{s[:-2]}{'AA' if not s.endswith('AA') else 'BA'}"
    elif tamper == "header_crit":
        proof = f"{_b64(dict(header, crit=['exp']))}.{p}.{s}"
    elif tamper == "header_b64":
        proof = f"{_b64(dict(header, b64=False))}.{p}.{s}"
    elif tamper == "not_base64url":
        proof = f"{h}.{p}.{s[:10]}+/{s[12:]}"
    elif tamper == "other_key_signature":
        other = make_proof(new_private_key(), "POST", URL, access_token="tok")
        proof = f"{h}.{p}.{other.split('.')[2]}"
    elif tamper == "short_signature":
        proof = f"{h}.{p}.{s[:20]}"
    with pytest.raises(Unauthorized) as e:
        _verify(proof)
    assert e.value.details["reason"] == "dpop_invalid"
