"""shared/signing.py keeps the signatures that verified (D141): a second check of the same
signed bytes costs a hash. The attack: anything not exactly what verified before (another
message, signature, key or domain) must still be verified, and refused when it is wrong."""

from __future__ import annotations

import pytest

from shared import signing


def test_a_verified_signature_is_remembered_only_for_exactly_what_it_signed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(signing, "VERIFIED_MAX", 40)
    key, other = signing.new_private_key(), signing.new_private_key()
    pub, other_pub = signing.public_b64(key), signing.public_b64(other)
    msg = b'{"seq":1}'
    sig = signing.sign(key, signing.HEAD_DOMAIN, msg)
    assert signing.verify(pub, signing.HEAD_DOMAIN, msg, sig)
    assert signing.verify(pub, signing.HEAD_DOMAIN, msg, sig)  # remembered
    # what differs from the remembered success is verified, and fails
    assert not signing.verify(pub, signing.HEAD_DOMAIN, b'{"seq":2}', sig)
    assert not signing.verify(other_pub, signing.HEAD_DOMAIN, msg, sig)
    assert not signing.verify(pub, signing.BATCH_DOMAIN, msg, sig)
    forged = signing.sign(other, signing.HEAD_DOMAIN, msg)
    assert not signing.verify(pub, signing.HEAD_DOMAIN, msg, forged)
    flipped = sig[:10] + ("B" if sig[10] == "A" else "A") + sig[11:]  # a byte changed
    assert not signing.verify(pub, signing.HEAD_DOMAIN, msg, flipped)
    # a failure is never remembered as a success, and the cache stays bounded
    assert not signing.verify(pub, signing.HEAD_DOMAIN, b'{"seq":2}', sig)
    for i in range(signing.VERIFIED_MAX + 10):
        m = b"%d" % i
        assert signing.verify(pub, signing.RECEIPT_DOMAIN, m,
                              signing.sign(key, signing.RECEIPT_DOMAIN, m))
    assert len(signing._VERIFIED) <= signing.VERIFIED_MAX
    assert signing.verify(pub, signing.HEAD_DOMAIN, msg, sig)
