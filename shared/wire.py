"""Wire models: batches, ops, receipts and heads, with strict validation.

Everything that is digested or signed goes through ``shared.canonical``. Parsing refuses
unknown fields, wrong types and out-of-range values with ``InvalidRequest`` so hub and
replica agree on what a valid message is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from shared.canonical import CanonicalError, canonical_bytes
from shared.digest import digest_of, is_digest
from shared.entry import DEFAULT_MAX_BODY, Entry, EntryError, make_entry, tombstone
from shared.errors import InvalidRequest, TooLarge
from shared.ids import entry_id_problem, is_id
from shared.signing import BATCH_DOMAIN, HEAD_DOMAIN, RECEIPT_DOMAIN, sign, verify

DEFAULT_MAX_OPS = 1000
PROVENANCE_KEYS = ("agent", "model", "client", "session", "tool", "note", *(
    # a hub-attested batch (hub/attested_publish.py): the guard refuses them on any other
    "attested", "proposed_by", "approved_by", "proposal"))
ATTESTED_PROVENANCE = ("attested", "proposed_by", "approved_by", "proposal")
MAX_PROVENANCE_VALUE = 200
# the header a replica names itself with on its pulls (head, changes, snapshot, events): the
# hub refuses a revoked replica's pulls (docs/protocol.md "Replica identity on pulls")
REPLICA_HEADER = "Quire-Replica"


@dataclass(frozen=True)
class Op:
    """One change: ``entry`` is the new content (a tombstone for a delete). ``moved_from``
    (a put only): the id this entry was renamed from; the same batch deletes that id, so
    for versions, the chain and the state root a move is a delete and a put, and the name
    is what history and the replicas follow (docs/protocol.md, "Renames")."""

    entry: Entry
    base: str | None
    moved_from: str | None = None

    @property
    def entry_id(self) -> str:
        return self.entry.id

    def to_wire(self) -> dict[str, Any]:
        if self.entry.deleted:
            return {"op": "delete", "id": self.entry.id, "base": self.base}
        if self.moved_from is not None:
            return {"op": "put", "entry": self.entry.to_dict(), "base": self.base,
                    "from": self.moved_from}
        return {"op": "put", "entry": self.entry.to_dict(), "base": self.base}


def op_entry_id(op: Any) -> str | None:
    """The entry id of an op in its wire (stored) form; None when it has none."""
    if not isinstance(op, dict):
        return None
    eid = (op.get("entry") or {}).get("id") if op.get("op") == "put" else op.get("id")
    return eid if isinstance(eid, str) else None


@dataclass(frozen=True)
class Batch:
    batch_id: str
    replica_id: str
    space: str
    epoch: str
    parent_seq: int
    parent_digest: str
    ops: tuple[Op, ...]
    provenance: dict[str, str] | None
    digest: str
    signature: str

    def unsigned(self) -> dict[str, Any]:
        return unsigned_body(self.batch_id, self.replica_id, self.space, self.epoch,
                             self.parent_seq, self.parent_digest, self.ops, self.provenance)

    def to_wire(self) -> dict[str, Any]:
        d = self.unsigned()
        d["digest"] = self.digest
        d["signature"] = self.signature
        return d

    def verify_signature(self, device_public: str) -> bool:
        return verify(device_public, BATCH_DOMAIN, self.digest.encode("ascii"), self.signature)


def unsigned_body(batch_id: str, replica_id: str, space: str, epoch: str, parent_seq: int,
                  parent_digest: str, ops: tuple[Op, ...] | list[Op],
                  provenance: dict[str, str] | None) -> dict[str, Any]:
    return {
        "batch_id": batch_id,
        "replica_id": replica_id,
        "space": space,
        "epoch": epoch,
        "parent": {"seq": parent_seq, "digest": parent_digest},
        "ops": [op.to_wire() for op in ops],
        "provenance": provenance,
    }


def build_batch(key: Ed25519PrivateKey, *, batch_id: str, replica_id: str, space: str,
                epoch: str, parent_seq: int, parent_digest: str, ops: list[Op],
                provenance: dict[str, str] | None = None) -> Batch:
    """Digest and sign a batch with the device key (client side)."""
    body = unsigned_body(batch_id, replica_id, space, epoch, parent_seq, parent_digest, ops,
                         provenance)
    digest = digest_of(body)
    signature = sign(key, BATCH_DOMAIN, digest.encode("ascii"))
    return Batch(batch_id, replica_id, space, epoch, parent_seq, parent_digest, tuple(ops),
                 provenance, digest, signature)


def _require(cond: bool, message: str, **details: Any) -> None:
    if not cond:
        raise InvalidRequest(message, details)


def _exact_keys(obj: Any, required: set[str], optional: set[str], where: str) -> None:
    _require(isinstance(obj, dict), f"{where} must be an object")
    keys = set(obj)
    unknown = keys - required - optional
    _require(not unknown, f"unknown fields in {where}: {', '.join(sorted(unknown))}",
             fields=sorted(unknown))
    missing = required - keys
    _require(not missing, f"missing fields in {where}: {', '.join(sorted(missing))}",
             fields=sorted(missing))


def parse_op(raw: Any, i: int, max_body: int) -> Op:
    where = f"ops[{i}]"
    _require(isinstance(raw, dict), f"{where} must be an object")
    kind = raw.get("op")
    moved_from = None
    if kind == "put":
        _exact_keys(raw, {"op", "entry", "base"}, {"from"}, where)
        try:
            entry = make_entry(raw["entry"], max_body=max_body)
        except EntryError as e:
            if "larger than" in str(e) and "body" in str(e):
                raise TooLarge(f"{where}: {e}", {"op": i}) from e
            raise InvalidRequest(f"{where}: {e}", {"op": i}) from e
        _require(not entry.deleted, f"{where}: use op 'delete' for deletions")
        if "from" in raw:
            moved_from = raw["from"]
            _require(isinstance(moved_from, str) and entry_id_problem(moved_from) is None,
                     f"{where}.from must be an entry id", op=i)
            _require(moved_from != entry.id, f"{where}.from must name another entry", op=i)
    elif kind == "delete":
        _exact_keys(raw, {"op", "id", "base"}, set(), where)
        problem = entry_id_problem(raw["id"])
        _require(problem is None, f"{where}: invalid entry id: {problem}", op=i)
        entry = tombstone(raw["id"])
        _require(raw["base"] is not None, f"{where}: a delete needs the base version it removes")
    else:
        raise InvalidRequest(f"{where}.op must be 'put' or 'delete'", {"op": i})
    base = raw["base"]
    _require(base is None or is_digest(base), f"{where}.base must be a version digest or null")
    return Op(entry=entry, base=base, moved_from=moved_from)


def _check_moves(ops: tuple[Op, ...]) -> None:
    """A put ``from`` X is a rename: the same batch must delete X (the base the guard
    checks), and one deleted id is renamed once."""
    deleted = {op.entry_id for op in ops if op.entry.deleted}
    sources = [op.moved_from for op in ops if op.moved_from is not None]
    for src in sources:
        _require(src in deleted, f"a rename from {src} needs the delete of {src} in the "
                                 "same batch", entry=src)
    _require(len(set(sources)) == len(sources), "an entry may be renamed only once per batch")


def parse_batch(raw: Any, *, max_ops: int = DEFAULT_MAX_OPS,
                max_body: int = DEFAULT_MAX_BODY, redacted: bool = False) -> Batch:
    """Validate a batch as received and recompute its digest (wrong digest → invalid).
    ``redacted``: a scoped pull's batch with ops left out (hub/feed.py): it may hold no op,
    and its digest cannot be recomputed (the hub-signed receipt and the chain bind it:
    replica/trust/scoped.py)."""
    _exact_keys(raw, {"batch_id", "replica_id", "space", "epoch", "parent", "ops", "digest",
                      "signature"}, {"provenance"}, "batch")
    _require(is_id(raw["batch_id"]), "batch_id must be a canonical id (26 base32 characters)")
    _require(is_id(raw["replica_id"]), "replica_id must be a canonical id")
    _require(is_id(raw["space"]), "space must be a space id")
    _require(is_id(raw["epoch"]), "epoch must be an epoch id")
    parent = raw["parent"]
    _exact_keys(parent, {"seq", "digest"}, set(), "parent")
    _require(isinstance(parent["seq"], int) and not isinstance(parent["seq"], bool)
             and 0 <= parent["seq"] < 2**53, "parent.seq must be a non-negative integer")
    _require(is_digest(parent["digest"]), "parent.digest must be a SHA-256 hex digest")
    ops_raw = raw["ops"]
    _require(isinstance(ops_raw, list) and (redacted or bool(ops_raw)),
             "ops must be a non-empty list")
    if len(ops_raw) > max_ops:
        raise TooLarge(f"a batch holds at most {max_ops} ops; split it", {"max_ops": max_ops})
    ops = tuple(parse_op(o, i, max_body) for i, o in enumerate(ops_raw))
    ids = [op.entry_id for op in ops]
    _require(len(set(ids)) == len(ids), "an entry may appear only once per batch")
    if not redacted:  # (a redacted batch may hold a rename's put without its delete)
        _check_moves(ops)
    prov = raw.get("provenance")
    if prov is not None:
        _require(isinstance(prov, dict), "provenance must be an object or null")
        unknown = set(prov) - set(PROVENANCE_KEYS)
        _require(not unknown, f"unknown provenance fields: {', '.join(sorted(unknown))}")
        for k, v in prov.items():
            _require(isinstance(v, str) and len(v) <= MAX_PROVENANCE_VALUE,
                     f"provenance.{k} must be a string of at most {MAX_PROVENANCE_VALUE}")
    _require(is_digest(raw["digest"]), "digest must be a SHA-256 hex digest")
    _require(isinstance(raw["signature"], str) and 0 < len(raw["signature"]) <= 200,
             "signature must be a base64url Ed25519 signature")
    batch = Batch(raw["batch_id"], raw["replica_id"], raw["space"], raw["epoch"],
                  parent["seq"], parent["digest"], ops, prov, raw["digest"], raw["signature"])
    if redacted:
        return batch
    try:
        actual = digest_of(batch.unsigned())
    except CanonicalError as e:
        raise InvalidRequest(f"batch has no canonical form: {e}") from e
    _require(actual == raw["digest"], "digest does not match the canonical batch",
             expected=actual)
    return batch


# ---------------------------------------------------------------- receipts and heads


def receipt_body(*, space: str, batch_id: str, replica_id: str, seq: int, head: str,
                 epoch: str, accepted_at: int, digest: str) -> dict[str, Any]:
    return {"space": space, "batch_id": batch_id, "replica_id": replica_id, "seq": seq,
            "head": head, "epoch": epoch, "accepted_at": accepted_at, "batch_digest": digest}


def sign_receipt(key: Ed25519PrivateKey, body: dict[str, Any]) -> dict[str, Any]:
    return dict(body, signature=sign(key, RECEIPT_DOMAIN, canonical_bytes(body)))


def verify_receipt(hub_public: str | tuple[str, ...] | list[str], receipt: dict[str, Any]
                   ) -> bool:
    """Signed by the hub key (or by one of the keys of its rotation chain, when given)."""
    body = {k: v for k, v in receipt.items() if k != "signature"}
    sig = receipt.get("signature")
    keys = (hub_public,) if isinstance(hub_public, str) else hub_public
    return isinstance(sig, str) and any(
        verify(k, RECEIPT_DOMAIN, canonical_bytes(body), sig) for k in keys)


def head_body(*, space: str, epoch: str, seq: int, digest: str, at: int) -> dict[str, Any]:
    return {"space": space, "epoch": epoch, "seq": seq, "digest": digest, "at": at}


def sign_head(key: Ed25519PrivateKey, body: dict[str, Any]) -> str:
    return sign(key, HEAD_DOMAIN, canonical_bytes(body))


def verify_head(hub_public: str, body: dict[str, Any], signature: str) -> bool:
    return verify(hub_public, HEAD_DOMAIN, canonical_bytes(body), signature)
