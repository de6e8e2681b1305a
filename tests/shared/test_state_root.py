"""The state root (shared/state.py) and the hub-signed statements (shared/signed.py):
pure tables, no database, no socket."""

from __future__ import annotations

import hashlib
import random

import pytest

from shared import signed, state
from shared.errors import HubUnverified
from shared.signing import new_private_key, public_b64

V = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(8)]


def _entries(n: int) -> list[tuple[str, str]]:
    return [(f"page/p{i}", V[i % len(V)]) for i in range(n)]


def test_empty_set_has_the_empty_root():
    assert state.root_of_entries([]) == state.EMPTY_ROOT


def test_root_does_not_depend_on_order():
    es = _entries(50)
    shuffled = list(es)
    random.Random(1).shuffle(shuffled)
    assert state.root_of_entries(es) == state.root_of_entries(shuffled)


@pytest.mark.parametrize("change", [
    "rewrite one version", "drop one entry", "add one entry", "rename one entry",
    "swap two versions"])
def test_any_change_of_the_set_changes_the_root(change):
    es = _entries(40)
    other = list(es)
    if change == "rewrite one version":
        other[3] = (other[3][0], V[7] if other[3][1] != V[7] else V[6])
    elif change == "drop one entry":
        other.pop(5)
    elif change == "add one entry":
        other.append(("note/new", V[0]))
    elif change == "rename one entry":
        other[2] = ("page/renamed", other[2][1])
    else:
        other[0], other[1] = (other[0][0], other[1][1]), (other[1][0], other[0][1])
        assert other != es
    assert state.root_of_entries(other) != state.root_of_entries(es)


def test_incremental_update_equals_recomputation():
    """O(changed): a batch's (id, old, new) triples update only the touched buckets, and the
    result is the root a replica computes from scratch."""
    es = dict(_entries(300))
    lattices = state.lattices_of(es.items())
    digests = state.digests_with(state.EMPTY_DIGESTS, lattices)
    rng = random.Random(7)
    for _ in range(50):
        changes = []
        for _ in range(rng.randint(1, 5)):
            eid = f"page/p{rng.randint(0, 400)}"
            old = es.get(eid)
            new = None if rng.random() < 0.2 else V[rng.randint(0, 7)]
            if any(c[0] == eid for c in changes):
                continue
            changes.append((eid, old, new))
            if new is None:
                es.pop(eid, None)
            else:
                es[eid] = new
        touched = {state.bucket_of(c[0]) for c in changes}
        new_lat = state.apply_changes({b: lattices.get(b, state.ZERO) for b in touched},
                                      changes)
        assert set(new_lat) <= touched
        lattices.update(new_lat)
        digests = state.digests_with(digests, new_lat)
        assert state.root_of(digests) == state.root_of_entries(es.items())


def test_adding_then_removing_an_entry_restores_the_root():
    es = _entries(10)
    lat = state.lattices_of(es)
    b = state.bucket_of("skill/x")
    once = state.apply_changes(lat, [("skill/x", None, V[1])])
    back = state.apply_changes({b: once[b]}, [("skill/x", V[1], None)])
    assert back[b] == lat.get(b, state.ZERO)


def test_lattices_of_parts_sum_to_the_lattices_of_the_whole():
    """What a clone's rebuild relies on when it spreads the sums over processes
    (replica/engine/clone_writers.py ``Forked.lattices_of``)."""
    es = _entries(300)
    whole = state.lattices_of(es)
    for cut in ([], [0], [1, 299], [100, 200], [7, 8, 9]):
        bounds = [0, *cut, len(es)]
        parts = [state.lattices_of(es[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)]
        assert state.sum_lattices(parts) == whole
    assert state.sum_lattices([]) == {}


def test_lanes_wrap_modulo_2_16():
    a = state.to_int(b"\xff\xff" * state.LANES)
    one = state.to_int(b"\x01\x00" * state.LANES)
    assert state._add(a, one) == 0
    assert state._add(one, state._neg(one)) == 0


def test_id_and_version_cannot_be_shifted_into_each_other():
    assert state.element("page/a", V[0]) != state.element("page/a" + V[0][:1], V[0][1:] + "0")


def test_digest_packing_round_trips():
    ds = list(state.EMPTY_DIGESTS)
    assert state.unpack_digests(state.pack_digests(ds)) == ds
    with pytest.raises(ValueError):
        state.unpack_digests(b"x" * 31)


# ---------------------------------------------------------------- signed statements

KEY = new_private_key()
PUB = public_b64(KEY)
SPACE = "0" * 26
EPOCH = "1" * 26


def _head(**kw):
    body = signed.head_body(space=SPACE, epoch=EPOCH, seq=3, digest="a" * 64,
                            state=state.EMPTY_ROOT, at=1000, **kw)
    return signed.sign_head(KEY, body)


def test_a_signed_head_parses():
    h = signed.parse_head(PUB, dict(_head(), role="editor"), space=SPACE)
    assert (h.seq, h.state, h.nonce) == (3, state.EMPTY_ROOT, None)


@pytest.mark.parametrize("tamper", ["seq", "state", "digest", "at", "signature", "strip_state",
                                    "other_key", "other_space", "nonce"])
def test_a_tampered_head_is_refused(tamper):
    h = _head(nonce="n1")
    kwargs = {"space": SPACE, "nonce": "n1"}
    if tamper == "seq":
        h["seq"] = 4
    elif tamper == "state":
        h["state"] = "b" * 64
    elif tamper == "digest":
        h["digest"] = "b" * 64
    elif tamper == "at":
        h["at"] = 2000
    elif tamper == "signature":
        h["signature"] = h["signature"][:-4] + "AAAA"
    elif tamper == "strip_state":
        del h["state"]
    elif tamper == "other_key":
        h = signed.sign_head(new_private_key(), {k: v for k, v in h.items()
                                                 if k != "signature"})
    elif tamper == "other_space":
        kwargs["space"] = "2" * 26
    else:
        kwargs["nonce"] = "n2"
    with pytest.raises(HubUnverified):
        signed.parse_head(PUB, h, **kwargs)


def test_a_head_signature_is_not_an_attestation_signature():
    body = signed.device_body(device=SPACE, user=EPOCH, public_key=PUB, valid_from=1,
                              revoked_at=None, at=5)
    as_head = dict(body, signature=signed.sign_head(KEY, body)["signature"])
    with pytest.raises(HubUnverified):
        signed.parse_attestation(PUB, as_head)
    good = signed.sign_statement(KEY, signed.DEVICE_DOMAIN, body)
    att = signed.parse_attestation(PUB, good)
    assert signed.attested_at(att, 1) and signed.attested_at(att, 10**12)


def test_a_revoked_device_is_attested_only_before_its_revocation():
    body = signed.device_body(device=SPACE, user=EPOCH, public_key=PUB, valid_from=10,
                              revoked_at=20, at=30)
    att = signed.parse_attestation(PUB, signed.sign_statement(KEY, signed.DEVICE_DOMAIN, body))
    assert [signed.attested_at(att, t) for t in (9, 10, 19, 20, 25)] == [
        False, True, True, False, False]


def _epoch(prev: str, new: str) -> signed.EpochStatement:
    body = signed.epoch_body(space=SPACE, epoch=new, previous=prev, previous_seq=1,
                             previous_digest="c" * 64, reason="purge", at=5)
    return signed.parse_epoch_statement(PUB, signed.sign_statement(KEY, signed.EPOCH_DOMAIN,
                                                                   body), space=SPACE)


def test_epoch_path_follows_signed_statements_only():
    a, b, c = "0" * 25 + "a", "0" * 25 + "b", "0" * 25 + "c"
    sts = [_epoch(a, b), _epoch(b, c)]
    assert [s.epoch for s in signed.epoch_path(sts, a, c)] == [b, c]
    assert signed.epoch_path(sts, c, c) == []
    with pytest.raises(HubUnverified):
        signed.epoch_path(sts, c, a)


def test_a_restore_statement_carries_its_signed_restore_point():
    a, b = "0" * 25 + "a", "0" * 25 + "b"
    point = {"epoch": a, "seq": 7, "digest": "d" * 64}
    body = signed.epoch_body(space=SPACE, epoch=b, previous=a, previous_seq=9,
                             previous_digest="c" * 64, reason="restore from backup", at=5,
                             restored_from=point)
    st = signed.sign_statement(KEY, signed.EPOCH_DOMAIN, body)
    assert signed.parse_epoch_statement(PUB, st, space=SPACE).restored_from == (a, 7, "d" * 64)
    assert _epoch(a, b).restored_from is None  # a plain bump or purge: nothing republished
    # added to a plain bump's statement after signing: the signature no longer verifies
    plain = signed.sign_statement(KEY, signed.EPOCH_DOMAIN, {
        k: v for k, v in body.items() if k != "restored_from"})
    with pytest.raises(HubUnverified):
        signed.parse_epoch_statement(PUB, dict(plain, restored_from=point), space=SPACE)
    bad = signed.sign_statement(KEY, signed.EPOCH_DOMAIN, dict(body, restored_from={"seq": 1}))
    with pytest.raises(HubUnverified):
        signed.parse_epoch_statement(PUB, bad, space=SPACE)
