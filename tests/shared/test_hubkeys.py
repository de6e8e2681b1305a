"""Hub key rotation chains (shared/hubkeys.py, replica/trust/keypin.py): pure tables, no hub."""

from __future__ import annotations

from typing import Any

import pytest

from replica.trust.keypin import KeyPin
from shared.errors import HubKeyUnchained
from shared.hubkeys import chain_keys, follow_chain, rotation_body, sign_rotation
from shared.signing import new_private_key, public_b64

HUB = "01jabc00000000000000000000"
KEYS = [new_private_key() for _ in range(4)]
PUB = [public_b64(k) for k in KEYS]


def link(seq: int, old: int, new: int, signer: int | None = None, hub: str = HUB
         ) -> dict[str, Any]:
    body = rotation_body(hub=hub, seq=seq, previous_key=PUB[old], key=PUB[new], at=seq * 1000)
    return sign_rotation(KEYS[old if signer is None else signer], body)


CHAIN = [link(1, 0, 1), link(2, 1, 2)]


@pytest.mark.parametrize("pinned, links", [(0, [1, 2]), (1, [2]), (2, [])])
def test_chain_is_followed_from_any_pinned_key(pinned: int, links: list[int]) -> None:
    got = follow_chain(PUB[pinned], CHAIN, hub=HUB)
    assert [r.key for r in got] == [PUB[i] for i in links]


@pytest.mark.parametrize("chain, pinned, reason", [
    # the attack: a statement for the old key signed by the new key, not the old one
    ([link(1, 0, 3, signer=3)], 0, "bad_link"),
    ([link(1, 0, 1), link(2, 1, 3, signer=0)], 0, "bad_link"),
    ([link(1, 0, 1), link(3, 1, 2)], 0, "bad_link"),          # a seq skipped
    ([link(1, 0, 1, hub="01jdef00000000000000000000")], 0, "bad_link"),
    (CHAIN, 3, "not_in_chain"),                                 # pinned key never chained
])
def test_a_link_that_does_not_verify_is_refused(chain: list[dict[str, Any]], pinned: int,
                                                reason: str) -> None:
    with pytest.raises(HubKeyUnchained) as e:
        follow_chain(PUB[pinned], chain, hub=HUB)
    assert e.value.details["reason"] == reason
    assert "quire repin" in e.value.message


def test_pin_moves_to_the_newest_key_and_keeps_the_old_ones() -> None:
    seen: list[int] = []
    pin = KeyPin(PUB[0], HUB, on_change=lambda p, links: seen.append(len(links)))
    assert pin.follow({"hub_id": HUB, "public_key": PUB[2], "chain": CHAIN})
    assert pin.current == PUB[2] and pin.keys == (PUB[2], PUB[1], PUB[0]) and seen == [2]
    assert not pin.follow({"hub_id": HUB, "public_key": PUB[2], "chain": CHAIN})
    assert chain_keys(PUB[0], CHAIN) == (PUB[2], PUB[1], PUB[0])


def test_a_hub_key_the_chain_does_not_reach_is_refused() -> None:
    """A key file replaced by hand: the chain is unchanged, the hub signs with another key."""
    pin = KeyPin(PUB[0], HUB)
    with pytest.raises(HubKeyUnchained) as e:
        pin.follow({"hub_id": HUB, "public_key": PUB[3], "chain": CHAIN})
    assert e.value.details["reason"] == "unchained_key"
    assert pin.current == PUB[0]  # nothing changed
