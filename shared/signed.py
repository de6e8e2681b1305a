"""What the hub key signs for replicas, and how a replica checks it (docs/architecture.md,
"Trust"; docs/protocol.md, "Signed state").

    signed head        {space, epoch, seq, digest, state, at[, nonce]    HEAD_DOMAIN
                        [, audit_seq, audit_digest, hub_audit_seq, hub_audit_digest]
                        [, checkpoint: the log's signed note, shared/tlog.py]
                        [, tree: the folder tree root, shared/foldertree.py]}
    device attestation {device, user, public_key, valid_from, revoked_at, at}  DEVICE_DOMAIN
    epoch statement    {space, epoch, previous, previous_seq, previous_digest, reason, at
                        [, purged: entry ids a purge removed]}
                                                                          EPOCH_DOMAIN
    space deletion     {space, name, deleted_at, purge_after, nonce?}    DELETION_DOMAIN

Each is a JSON object with a ``signature`` member over the canonical JSON of the others,
under its own domain (a signature of one kind never verifies as another). Parsers here are
strict and pure: a wrong type, a missing field or a bad signature raises ``HubUnverified``
naming what did not verify. Nothing here trusts the transport.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from shared.canonical import CanonicalError, canonical_bytes
from shared.digest import is_digest
from shared.errors import HubUnverified
from shared.ids import is_entry_id, is_id
from shared.signing import HEAD_DOMAIN, sign, verify

DEVICE_DOMAIN = b"quire-device-v1:"
EPOCH_DOMAIN = b"quire-epoch-v1:"
DELETION_DOMAIN = b"quire-space-deleted-v1:"
MAX_NONCE = 64


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**53


def sign_statement(key: Ed25519PrivateKey, domain: bytes, body: dict[str, Any]
                   ) -> dict[str, Any]:
    return dict(body, signature=sign(key, domain, canonical_bytes(body)))


# One pinned key, or several: the keys of the pinned rotation chain (shared/hubkeys.py),
# for what was signed earlier and kept (receipts, epoch statements, stored heads). A head
# pulled now is checked with the newest key alone.
Keys = str | tuple[str, ...] | list[str]


def verify_any(keys: Keys, domain: bytes, message: bytes, signature: Any) -> bool:
    """Does ``signature`` verify under one of ``keys``?"""
    if not isinstance(signature, str):
        return False
    return any(verify(k, domain, message, signature)
               for k in ((keys,) if isinstance(keys, str) else keys))


def verified_body(hub_key: Keys, domain: bytes, obj: Any, fields: set[str],
                  optional: set[str], what: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise HubUnverified(f"{what} is not an object")
    body = {k: v for k, v in obj.items() if k != "signature"}
    missing = fields - set(body)
    unknown = set(body) - fields - optional
    if missing or unknown:
        raise HubUnverified(f"{what} has missing or unknown fields",
                            {"missing": sorted(missing), "unknown": sorted(unknown)[:10]})
    sig = obj.get("signature")
    try:
        ok = verify_any(hub_key, domain, canonical_bytes(body), sig)
    except CanonicalError:
        ok = False
    if not ok:
        raise HubUnverified(f"{what} signature does not verify with the pinned hub key",
                            {"reason": "bad_signature"})
    return body


# ---------------------------------------------------------------- heads


@dataclass(frozen=True)
class SignedHead:
    space: str
    epoch: str
    seq: int
    digest: str
    state: str
    at: int
    nonce: str | None
    wire: dict[str, Any]  # as received (body and signature): kept, shown by ``quire verify``
    audit: tuple[int, str] | None = None  # the space's audit chain tip when signed
    hub_audit: tuple[int, str] | None = None  # the hub chain's tip when signed
    # the space log's checkpoint at this head, as a signed note (shared/tlog.py); None
    # from a hub before the log (docs/decisions.md, D140)
    checkpoint: str | None = None
    # the folder tree root at this head (shared/foldertree.py); None from a hub before it,
    # and on a head that was not the space's current one when signed (a page's end)
    tree: str | None = None


HEAD_FIELDS = {"space", "epoch", "seq", "digest", "state", "at"}
# Optional (heads signed before they existed still verify): the tips (n, digest) of the
# space's audit chain and of the hub chain as the hub read them with the head. A replica
# keeps the newest it saw, so a hub whose audit log was cut short or rewritten after that
# is caught (replica/trust/audit_tips.py; docs/security.md, "The audit log").
AUDIT_FIELDS = {"audit_seq", "audit_digest", "hub_audit_seq", "hub_audit_digest"}
CHECKPOINT = "checkpoint"  # optional too: heads from hubs before the log lack it
TREE = "tree"  # optional: heads from hubs before the folder tree lack it (decisions.md D143)


def head_body(*, space: str, epoch: str, seq: int, digest: str, state: str, at: int,
              nonce: str | None = None, audit: tuple[int, str] | None = None,
              hub_audit: tuple[int, str] | None = None, checkpoint: str | None = None,
              tree: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"space": space, "epoch": epoch, "seq": seq, "digest": digest,
                            "state": state, "at": at}
    if checkpoint is not None:
        body[CHECKPOINT] = checkpoint
    if tree is not None:
        body[TREE] = tree
    if nonce is not None:
        body["nonce"] = nonce
    if audit is not None:
        body["audit_seq"], body["audit_digest"] = audit
    if hub_audit is not None:
        body["hub_audit_seq"], body["hub_audit_digest"] = hub_audit
    return body


def _tip(body: dict[str, Any], seq: str, digest: str) -> tuple[int, str] | None:
    if seq not in body and digest not in body:
        return None
    if not (_int(body.get(seq)) and is_digest(body.get(digest))):
        raise HubUnverified("signed head has an audit tip of the wrong form")
    return body[seq], body[digest]


def sign_head(key: Ed25519PrivateKey, body: dict[str, Any]) -> dict[str, Any]:
    """The head as served: its body with ``signature``."""
    return sign_statement(key, HEAD_DOMAIN, body)


def parse_head(hub_key: Keys, obj: Any, *, space: str, nonce: str | None = None
               ) -> SignedHead:
    """A head the pinned key signed, for ``space`` (and over ``nonce`` when given)."""
    if isinstance(obj, dict):  # the head endpoint adds unsigned context (role, rules…)
        keep = HEAD_FIELDS | AUDIT_FIELDS | {"nonce", "signature", CHECKPOINT, TREE}
        obj = {k: v for k, v in obj.items() if k in keep}
    body = verified_body(hub_key, HEAD_DOMAIN, obj, HEAD_FIELDS,
                         {"nonce", CHECKPOINT, TREE} | AUDIT_FIELDS, "head")
    if not (is_id(body["space"]) and is_id(body["epoch"]) and _int(body["seq"])
            and is_digest(body["digest"]) and is_digest(body["state"]) and _int(body["at"])):
        raise HubUnverified("signed head has a field of the wrong form")
    checkpoint = body.get(CHECKPOINT)
    if checkpoint is not None and not (isinstance(checkpoint, str) and len(checkpoint) < 8192):
        raise HubUnverified("signed head has a checkpoint of the wrong form")
    tree = body.get(TREE)
    if tree is not None and not is_digest(tree):
        raise HubUnverified("signed head has a tree root of the wrong form")
    if body["space"] != space:
        raise HubUnverified("signed head is for another space", {"space": body["space"]})
    got = body.get("nonce")
    if nonce is not None and got != nonce:
        raise HubUnverified("signed head is not over our nonce (replayed?)",
                            {"reason": "nonce"})
    return SignedHead(body["space"], body["epoch"], body["seq"], body["digest"],
                      body["state"], body["at"], got, dict(obj),
                      _tip(body, "audit_seq", "audit_digest"),
                      _tip(body, "hub_audit_seq", "hub_audit_digest"), checkpoint, tree)


# ---------------------------------------------------------------- device attestations


@dataclass(frozen=True)
class Attestation:
    device: str
    user: str
    public_key: str
    valid_from: int
    revoked_at: int | None
    at: int


DEVICE_FIELDS = {"device", "user", "public_key", "valid_from", "revoked_at", "at"}


def device_body(*, device: str, user: str, public_key: str, valid_from: int,
                revoked_at: int | None, at: int) -> dict[str, Any]:
    return {"device": device, "user": user, "public_key": public_key,
            "valid_from": valid_from, "revoked_at": revoked_at, "at": at}


def parse_attestation(hub_key: Keys, obj: Any) -> Attestation:
    body = verified_body(hub_key, DEVICE_DOMAIN, obj, DEVICE_FIELDS, set(),
                          "device attestation")
    if not (is_id(body["device"]) and is_id(body["user"])
            and isinstance(body["public_key"], str) and _int(body["valid_from"])
            and (body["revoked_at"] is None or _int(body["revoked_at"]))
            and _int(body["at"])):
        raise HubUnverified("device attestation has a field of the wrong form")
    return Attestation(body["device"], body["user"], body["public_key"], body["valid_from"],
                       body["revoked_at"], body["at"])


def attested_at(att: Attestation, when: int) -> bool:
    """Was the device valid at hub time ``when`` (a batch accepted then)?"""
    return att.valid_from <= when and (att.revoked_at is None or when < att.revoked_at)


# ---------------------------------------------------------------- epoch statements


@dataclass(frozen=True)
class EpochStatement:
    space: str
    epoch: str
    previous: str
    previous_seq: int
    previous_digest: str
    reason: str
    at: int
    # restore from backup (hub/restore.py): the head of the space in the backup, the point
    # the restored content is at; replicas republish what they hold from after it
    restored_from: tuple[str, int, str] | None = None
    # entry ids a purge removed from all history (docs/security.md, Purge); () for a bump
    purged: tuple[str, ...] = ()
    # a fork recovery (hub/spaces.py ``bump_epoch`` with ``fork``): the two hub-signed
    # checkpoints that prove the hub showed two histories; this epoch's log is the one that
    # survives, and replicas republish what they hold from the other (replica/engine/forked.py)
    # (note, note) or (note, note, {"root", "proof"}) for notes of different sizes, as
    # tlog.equivocation takes them
    forked: tuple[Any, ...] | None = None


EPOCH_FIELDS = {"space", "epoch", "previous", "previous_seq", "previous_digest", "reason",
                "at"}
MAX_PURGED = 1000  # entry ids one purge statement may name


def epoch_body(*, space: str, epoch: str, previous: str, previous_seq: int,
               previous_digest: str, reason: str, at: int,
               restored_from: dict[str, Any] | None = None,
               purged: list[str] | None = None,
               forked: list[Any] | None = None) -> dict[str, Any]:
    body = {"space": space, "epoch": epoch, "previous": previous,
            "previous_seq": previous_seq, "previous_digest": previous_digest,
            "reason": reason, "at": at}
    if restored_from is not None:  # {epoch, seq, digest}: the backup's head of the space
        body["restored_from"] = restored_from
    if purged is not None:  # absent on a plain bump: its statement signs as before
        body["purged"] = sorted(purged)
    if forked is not None:  # absent unless a fork recovery: other statements sign as before
        body["forked"] = list(forked)
    return body


def _restored_from(raw: Any) -> tuple[str, int, str] | None:
    if raw is None:
        return None
    if not (isinstance(raw, dict) and set(raw) == {"epoch", "seq", "digest"}
            and is_id(raw["epoch"]) and _int(raw["seq"]) and is_digest(raw["digest"])):
        raise HubUnverified("epoch statement has a restored_from of the wrong form")
    return raw["epoch"], raw["seq"], raw["digest"]


def parse_epoch_statement(hub_key: Keys, obj: Any, *, space: str) -> EpochStatement:
    body = verified_body(hub_key, EPOCH_DOMAIN, obj, EPOCH_FIELDS,
                         {"restored_from", "purged", "forked"}, "epoch statement")
    purged = body.get("purged", [])
    forked = body.get("forked")
    if not (forked is None or (isinstance(forked, list) and len(forked) in (2, 3)
                               and all(isinstance(n, str) and len(n) < 8192
                                       for n in forked[:2])
                               and (len(forked) == 2 or isinstance(forked[2], dict)))):
        raise HubUnverified("epoch statement has a forked field of the wrong form")
    if not (is_id(body["epoch"]) and is_id(body["previous"]) and _int(body["previous_seq"])
            and is_digest(body["previous_digest"]) and isinstance(body["reason"], str)
            and _int(body["at"]) and isinstance(purged, list) and len(purged) <= MAX_PURGED
            and all(isinstance(e, str) and is_entry_id(e) for e in purged)):
        raise HubUnverified("epoch statement has a field of the wrong form")
    if body["space"] != space:
        raise HubUnverified("epoch statement is for another space")
    return EpochStatement(body["space"], body["epoch"], body["previous"],
                          body["previous_seq"], body["previous_digest"], body["reason"],
                          body["at"], _restored_from(body.get("restored_from")),
                          tuple(purged), None if forked is None else tuple(forked))


def epoch_path(statements: list[EpochStatement], start: str, end: str
               ) -> list[EpochStatement]:
    """The signed statements leading from epoch ``start`` to ``end`` (raises when none do).
    Epochs are random ids, so the path is a simple walk by ``previous``."""
    by_prev = {s.previous: s for s in statements}
    path: list[EpochStatement] = []
    cur = start
    while cur != end:
        s = by_prev.get(cur)
        if s is None or len(path) > len(statements):
            raise HubUnverified("no hub-signed epoch statement leads from this replica's "
                                "epoch to the hub's", {"reason": "epoch_unsigned",
                                                       "from": start, "to": end})
        path.append(s)
        cur = s.epoch
    return path


# ---------------------------------------------------------------- space deletion


@dataclass(frozen=True)
class DeletionStatement:
    """The hub's word that a space was deleted (``quire admin space delete``): a replica
    stops syncing it only on this, verified, never on an unsigned refusal."""

    space: str
    name: str
    deleted_at: int
    purge_after: int
    nonce: str | None = None  # signed over a caller's nonce: fresh, not a replay


DELETION_FIELDS = {"space", "name", "deleted_at", "purge_after"}


def deletion_body(*, space: str, name: str, deleted_at: int, purge_after: int,
                  nonce: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"space": space, "name": name, "deleted_at": deleted_at,
                            "purge_after": purge_after}
    if nonce is not None:
        body["nonce"] = nonce
    return body


def parse_deletion_statement(hub_key: Keys, obj: Any, *, space: str,
                             nonce: str | None = None) -> DeletionStatement:
    """A deletion statement for ``space``; with ``nonce``, one signed over exactly that
    nonce (a statement captured earlier and replayed after a restore is not fresh:
    ``HubUnverified``, reason ``stale``)."""
    body = verified_body(hub_key, DELETION_DOMAIN, obj, DELETION_FIELDS, {"nonce"},
                         "space deletion statement")
    if not (isinstance(body["name"], str) and _int(body["deleted_at"])
            and _int(body["purge_after"])):
        raise HubUnverified("space deletion statement has a field of the wrong form")
    if body["space"] != space:
        raise HubUnverified("space deletion statement is for another space")
    if nonce is not None and body.get("nonce") != nonce:
        raise HubUnverified("space deletion statement is not signed over our nonce: it may "
                            "be a replay of an old one", {"reason": "stale"})
    return DeletionStatement(body["space"], body["name"], body["deleted_at"],
                             body["purge_after"], body.get("nonce"))
