"""The hub key this machine trusts, and how it follows the hub's key rotations.

    a head (or receipt) does not verify with the pinned key
        │  HubClient.verified_head() / push receipt
        ▼
    GET /v1/hub/keys ──▶ KeyPin.follow(doc): shared.hubkeys.follow_chain from the pinned
        │                key, each link signed by the key before it; the hub's current
        │                key must be where the chain arrives
        ├─ new links: pin the newest key, keep the older ones (``history``: old signatures
        │             stay verifiable), persist (hub.json, via ``on_change``), retry once
        ├─ no new link, same key: the signature was simply bad (``hub_unverified``)
        └─ otherwise: ``hub_key_unchained``, nothing written (re-pin by hand: quire repin)

Heads are checked with the newest key alone (a retired key cannot sign a fresh head);
what the hub signed earlier and serves as it was (receipts, epoch statements, cached device
attestations, heads kept in the store) with any key of the chain (``keys``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from shared.errors import HubUnverified
from shared.hubkeys import Rotation, follow_chain, newest_key, unchained
from shared.signing import key_id


@dataclass
class KeyPin:
    current: str
    hub_id: str | None = None
    history: tuple[str, ...] = ()  # keys pinned before ``current``, newest first
    on_change: Callable[[KeyPin, list[Rotation]], None] | None = field(default=None,
                                                                        repr=False)

    @property
    def keys(self) -> tuple[str, ...]:
        return (self.current, *self.history)

    def follow(self, doc: Any) -> bool:
        """Walk the served chain (``GET /v1/hub/keys``) from the pinned key. True when a
        newer key is now pinned; False when the hub still signs with the pinned key."""
        if not isinstance(doc, dict):
            raise HubUnverified("the hub's key chain is not an object")
        hub = self.hub_id or doc.get("hub_id")
        if not isinstance(hub, str):
            raise HubUnverified("the hub's key chain names no hub")
        links = follow_chain(self.current, doc.get("chain"), hub=hub)
        newest = newest_key(self.current, links)
        offered = doc.get("public_key")
        if offered != newest:
            raise unchained("the hub signs with a key that no rotation statement chains to "
                             "this machine's pinned hub key", reason="unchained_key",
                             pinned=key_id(self.current), offered=key_id(offered)
                             if isinstance(offered, str) else None,
                             chain_ends=key_id(newest))
        if not links:
            return False
        olds = tuple(reversed([link.previous_key for link in links]))
        self.current, self.history = newest, olds + self.history
        if self.on_change is not None:
            self.on_change(self, links)
        return True
