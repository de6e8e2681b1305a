"""Hub key rotation: a chain of statements, each signed by the key it replaces
(docs/security.md, "Hub key rotation").

    key 0 (pinned at join) ──signs──▶ {hub, seq 1, previous, previous_key, key 1, key_id, at}
    key 1                  ──signs──▶ {hub, seq 2, previous, previous_key, key 2, key_id, at}
    …                                                     HUBKEY_DOMAIN

``quire hub key rotate`` appends one statement (hub/keyrotation.py); the hub serves the whole
chain (``GET /v1/hub/keys``). A replica whose pinned key no longer verifies what the hub
signs walks the chain from its pinned key (``follow_chain``): every link must be signed by
the key before it, in unbroken seq order, for this hub. It then pins the newest key and
keeps the chain (replica/trust/keypin.py). A key no verified link leads to raises
``HubKeyUnchained``: a hub key replaced by hand, or a statement signed by the wrong key,
is refused; nothing is written.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from shared.errors import HubKeyUnchained, HubUnverified
from shared.ids import is_id
from shared.signed import sign_statement, verified_body
from shared.signing import key_id, load_public

HUBKEY_DOMAIN = b"quire-hubkey-v1:"
ROTATION_FIELDS = {"hub", "seq", "previous", "previous_key", "key", "key_id", "at"}
MAX_CHAIN = 10_000


@dataclass(frozen=True)
class Rotation:
    hub: str
    seq: int
    previous: str  # key id of the key replaced (which signed this statement)
    previous_key: str
    key: str  # the new public key (base64url raw Ed25519)
    key_id: str
    at: int
    wire: dict[str, Any]


def rotation_body(*, hub: str, seq: int, previous_key: str, key: str, at: int
                  ) -> dict[str, Any]:
    return {"hub": hub, "seq": seq, "previous": key_id(previous_key),
            "previous_key": previous_key, "key": key, "key_id": key_id(key), "at": at}


def sign_rotation(old: Ed25519PrivateKey, body: dict[str, Any]) -> dict[str, Any]:
    """The statement as served: signed by the key it replaces."""
    return sign_statement(old, HUBKEY_DOMAIN, body)


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**53


def unchained(message: str, **details: Any) -> HubKeyUnchained:
    return HubKeyUnchained(message + "; if the hub's old key was lost, re-pin by hand "
                           "after checking the new key id with the hub's admin: quire repin "
                           "URL --hub-key KEY_ID (docs/operations.md)", details)


def parse_rotation(signer: str, obj: Any) -> Rotation:
    """A statement ``signer`` signed (raises ``HubUnverified`` otherwise)."""
    body = verified_body(signer, HUBKEY_DOMAIN, obj, ROTATION_FIELDS, set(),
                         "hub key rotation statement")
    ok = (is_id(body["hub"]) and _int(body["seq"]) and body["seq"] >= 1 and _int(body["at"])
          and body["previous_key"] == signer and isinstance(body["key"], str)
          and body["previous"] == key_id(signer))
    if ok:
        try:
            load_public(body["key"])
        except ValueError:
            ok = False
    if not ok or body["key_id"] != key_id(body["key"]):
        raise HubUnverified("hub key rotation statement has a field of the wrong form")
    return Rotation(body["hub"], body["seq"], body["previous"], body["previous_key"],
                    body["key"], body["key_id"], body["at"], dict(obj))


def follow_chain(pinned: str, chain: Any, *, hub: str) -> list[Rotation]:
    """The verified links from ``pinned`` to the newest key of ``chain`` (``[]`` when the
    pinned key is the newest). Raises ``HubKeyUnchained`` when a link after the pinned key
    does not verify with the key before it, breaks the seq order, names another hub, or
    when the chain holds statements but none starts from the pinned key."""
    if not isinstance(chain, list) or len(chain) > MAX_CHAIN:
        raise HubUnverified("the hub key chain is not a list")
    if not chain:
        return []
    start = next((i for i, s in enumerate(chain)
                  if isinstance(s, dict) and s.get("previous_key") == pinned), None)
    if start is None:
        if isinstance(chain[-1], dict) and chain[-1].get("key") == pinned:
            return []  # pinned after the last rotation (joined since)
        raise unchained("no hub key rotation statement starts from this machine's pinned "
                         "hub key", reason="not_in_chain", pinned=key_id(pinned))
    links: list[Rotation] = []
    cur = pinned
    for obj in chain[start:]:
        try:
            link = parse_rotation(cur, obj)
        except HubUnverified as e:
            raise unchained(f"a hub key rotation statement is not signed by the key it "
                             f"replaces ({e.message})", reason="bad_link",
                             after=key_id(cur)) from None
        want_seq = links[-1].seq + 1 if links else link.seq
        if link.hub != hub or link.seq != want_seq:
            raise unchained("the hub key rotation chain is out of order or for another hub",
                             reason="bad_link", after=key_id(cur))
        links.append(link)
        cur = link.key
    return links


def newest_key(pinned: str, links: list[Rotation]) -> str:
    return links[-1].key if links else pinned


def chain_keys(original: str, links: list[Any]) -> tuple[str, ...]:
    """Every key of a kept chain, newest first (old signatures stay verifiable)."""
    keys = [original] + [(s.key if isinstance(s, Rotation) else s["key"]) for s in links]
    return tuple(reversed(keys))
