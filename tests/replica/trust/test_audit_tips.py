"""Audit tips in signed heads (shared/signed.py, replica/trust/audit_tips.py) and the bounded
refusal counter (hub/refusals.py): the pure parts. End to end: tests/replica/trust/test_audit_e2e.py."""

from __future__ import annotations

import pytest

from hub.refusals import Refusals
from replica.trust import audit_tips as auditcheck
from shared.errors import AuditRewritten, AuditTruncated, HubUnverified
from shared.signed import head_body, parse_head, sign_head
from shared.signing import new_private_key, public_b64

KEY = new_private_key()
PUB = public_b64(KEY)
SPACE, EPOCH, EPOCH2 = "01" + "a" * 24, "01" + "b" * 24, "01" + "c" * 24


def _head(audit: tuple[int, str] | None, hub: tuple[int, str] | None, epoch: str = EPOCH
          ) -> dict:
    return sign_head(KEY, head_body(space=SPACE, epoch=epoch, seq=3, digest="d" * 64,
                                    state="e" * 64, at=1, audit=audit, hub_audit=hub))


def test_a_head_signed_before_audit_tips_existed_still_verifies() -> None:
    h = parse_head(PUB, _head(None, None), space=SPACE)
    assert h.audit is None and h.hub_audit is None and h.seq == 3


def test_the_tips_are_signed_an_edited_tip_does_not_verify() -> None:
    wire = _head((5, "a" * 64), (9, "b" * 64))
    h = parse_head(PUB, wire, space=SPACE)
    assert h.audit == (5, "a" * 64) and h.hub_audit == (9, "b" * 64)
    with pytest.raises(HubUnverified, match="signature"):
        parse_head(PUB, dict(wire, audit_seq=4), space=SPACE)
    with pytest.raises(HubUnverified, match="signature"):  # dropping them is an edit too
        parse_head(PUB, {k: v for k, v in wire.items() if not k.startswith("audit")},
                   space=SPACE)


def test_a_replica_keeps_the_newest_tips_and_refuses_an_older_log() -> None:
    first = parse_head(PUB, _head((5, "a" * 64), (9, "b" * 64)), space=SPACE)
    kept = auditcheck.keep(None, first)
    assert kept is not None and kept["space"] == [5, "a" * 64]
    older = parse_head(PUB, _head((4, "c" * 64), (9, "b" * 64)), space=SPACE)
    assert auditcheck.keep(kept, older) is None  # never moves back
    with pytest.raises(HubUnverified) as e:
        auditcheck.check_fresh(kept, older)
    assert e.value.details["reason"] == "audit_rollback"
    rewritten = parse_head(PUB, _head((5, "f" * 64), (9, "b" * 64)), space=SPACE)
    with pytest.raises(HubUnverified):
        auditcheck.check_fresh(kept, rewritten)
    newer = parse_head(PUB, _head((6, "f" * 64), (10, "b" * 64)), space=SPACE)
    auditcheck.check_fresh(kept, newer)
    assert auditcheck.keep(kept, newer)["space"] == [6, "f" * 64]
    # a new epoch (a hub-signed statement leads there) starts over from its own tips
    bumped = parse_head(PUB, _head((1, "9" * 64), (2, "8" * 64), EPOCH2), space=SPACE)
    auditcheck.check_fresh(kept, bumped)
    assert auditcheck.keep(kept, bumped)["epoch"] == EPOCH2


def test_check_events_names_truncation_and_rewriting() -> None:
    events = [{"chain": SPACE, "n": n, "digest": str(n) * 64} for n in (1, 2, 3)]
    tip = auditcheck.Tip(SPACE, 3, "3" * 64, "test")
    assert auditcheck.check_events(events, [tip], None) == 1
    with pytest.raises(AuditTruncated):
        auditcheck.check_events(events[:2], [tip], None)
    with pytest.raises(AuditRewritten):
        auditcheck.check_events(events[:2] + [dict(events[2], digest="0" * 64)], [tip], None)
    assert auditcheck.check_events(events[:2], [tip], {"hub"}) == 0  # another chain's tip


def test_refusals_are_counted_per_key_and_bounded() -> None:
    r = Refusals(max_keys=3)
    for _ in range(1000):
        r.note({"client": "10.0.0.1"}, "unauthorized", "/v1/spaces", None, 1)
    for i in range(50):
        r.note({"client": f"10.0.1.{i}"}, "unauthorized", "/v1/spaces", None, 2)
    r.note({"user": "u"}, "not_found", "/v1/spaces", None, 3)  # not a refusal we audit
    counts, overflow, since = r._take()
    assert len(counts) == 3 and since == 1
    assert sorted(c.count for c in counts.values()) == [1, 1, 1000]
    assert overflow is not None and overflow.count == 48
    assert r.pending() == 0
