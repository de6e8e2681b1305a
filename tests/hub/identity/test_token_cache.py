"""The per-process cache of verified access tokens skips only the pure token checks."""

from __future__ import annotations

import pytest

from hub.keys import HubKey
from hub.tokens import TokenCache, issue_access_token
from shared.errors import Unauthorized
from shared.signing import key_id, new_private_key, public_b64

AUD = "http://hub.test"


def _key() -> HubKey:
    priv = new_private_key()
    pub = public_b64(priv)
    return HubKey(priv, pub, key_id(pub))


def _token(key: HubKey, now_ms: int, ttl_s: int = 600) -> str:
    return issue_access_token(key, aud=AUD, user_id="U" * 26, device_id="D" * 26,
                              jkt="j" * 43, now_ms=now_ms, ttl_s=ttl_s)[0]


def test_cached_token_still_expires_on_time() -> None:
    key, cache, now = _key(), TokenCache(), 1_800_000_000_000
    tok = _token(key, now, ttl_s=60)
    assert cache.verify(tok, key, aud=AUD, now_ms=now).device_id == "D" * 26
    assert cache.verify(tok, key, aud=AUD, now_ms=now + 59_000).user_id == "U" * 26  # a hit
    with pytest.raises(Unauthorized) as e:
        cache.verify(tok, key, aud=AUD, now_ms=now + 60_000)
    assert e.value.details["reason"] == "token_expired"


def test_cache_never_accepts_a_token_it_did_not_verify_for_this_key_and_audience() -> None:
    key, other, cache, now = _key(), _key(), TokenCache(), 1_800_000_000_000
    tok = _token(key, now)
    cache.verify(tok, key, aud=AUD, now_ms=now)
    for bad_key, aud in ((other, AUD), (key, "http://other.test")):
        with pytest.raises(Unauthorized):
            cache.verify(tok, bad_key, aud=aud, now_ms=now)
    forged = tok[:-4] + ("AAAA" if not tok.endswith("AAAA") else "BBBB")
    with pytest.raises(Unauthorized):
        cache.verify(forged, key, aud=AUD, now_ms=now)


def test_cache_is_bounded() -> None:
    key, cache, now = _key(), TokenCache(max_items=3), 1_800_000_000_000
    for i in range(10):
        cache.verify(_token(key, now + i), key, aud=AUD, now_ms=now + i)
    assert len(cache._items) == 3
