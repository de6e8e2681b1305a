"""A space's log as others check it, pure: the leaves, the checkpoint the hub signs, the
witnesses' co-signatures and the witness policy (docs/architecture.md, "The log and its
witnesses"; decisions.md D140).

    leaf data       canonical JSON, one per thing the space's history decided:
                      a batch       {epoch, seq, head, batch}     (seq ≥ 1, head = chain digest)
                      a new epoch   {epoch, seq: 0, head: genesis, statement}
                      a policy      {epoch, seq, head, witnesses} (the head it was set at)
    checkpoint      C2SP tlog-checkpoint text        quire.log/<hub key>/<space>\\n
                                                     <size>\\n<root, base64>\\n
                                                     [witnesses <policy digest>\\n]
    signed note     C2SP signed-note: the checkpoint, a blank line, "— <origin> <sig>"
                    lines; the hub's Ed25519 signature (key name = origin), then
                    co-signatures
    co-signature    C2SP tlog-cosignature (cosignature/v1): a witness's Ed25519 signature
                    over "cosignature/v1\\ntime <t>\\n" + the checkpoint
    witness policy  {space, n, quorum, witnesses: [{name, key, url}], previous, at, by},
                    signed by the hub key (WITNESSES_DOMAIN); its digest in the checkpoint

The origin carries the hub's public key, so a checkpoint is self-certifying: a witness
checks the hub's signature with the key the origin names and keeps one line of history
per origin, i.e. per (hub key, space). A co-signature covers the origin, so one made for
another space's or another hub's checkpoint verifies for no other. The hub's note key never
signs anything else: no other message of ours starts with ``quire.log/`` (the other
domains are ``quire-…-v1:`` prefixes).
"""

from __future__ import annotations

import base64
import hashlib
import struct
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from shared.canonical import CanonicalError, canonical_bytes
from shared.digest import digest_of, is_digest
from shared.errors import HubUnverified
from shared.ids import is_id
from shared.signing import b64u_decode, load_public, public_b64

ORIGIN_PREFIX = "quire.log/"
WITNESSES_DOMAIN = b"quire-witnesses-v1:"
COSIG_HEADER = "cosignature/v1"
MAX_NOTE = 8192  # bytes: a checkpoint with a few dozen signatures
MAX_WITNESSES = 16
SIG_ED25519 = 0x01
SIG_COSIG = 0x04


# ---------------------------------------------------------------- leaves


def batch_leaf(*, epoch: str, seq: int, head: str, batch: str) -> dict[str, Any]:
    return {"epoch": epoch, "seq": seq, "head": head, "batch": batch}


def epoch_leaf(*, epoch: str, head: str, statement: dict[str, Any]) -> dict[str, Any]:
    return {"epoch": epoch, "seq": 0, "head": head, "statement": digest_of(statement)}


def policy_leaf(*, epoch: str, seq: int, head: str, policy: dict[str, Any]) -> dict[str, Any]:
    return {"epoch": epoch, "seq": seq, "head": head, "witnesses": digest_of(policy)}


def leaf_hash_of(data: dict[str, Any]) -> bytes:
    from shared.merkle import leaf_hash

    return leaf_hash(canonical_bytes(data))


def leaf_at_head(data: Any, *, epoch: str, seq: int, head: str) -> bool:
    """Is ``data`` a leaf the head ``(epoch, seq, head)`` is right after?"""
    return (isinstance(data, dict) and data.get("epoch") == epoch and data.get("seq") == seq
            and data.get("head") == head and len(data) == 4
            and any(is_digest(data.get(k)) for k in ("batch", "statement", "witnesses")))


# ---------------------------------------------------------------- checkpoints


def origin_of(hub_public: str, space: str) -> str:
    return f"{ORIGIN_PREFIX}{hub_public}/{space}"


@dataclass(frozen=True)
class Checkpoint:
    origin: str
    size: int
    root: bytes
    policy: str | None  # digest of the witness policy in force, None: none ever set

    @property
    def hub_key(self) -> str:
        return self.origin[len(ORIGIN_PREFIX):].split("/")[0]

    @property
    def space(self) -> str:
        return self.origin[len(ORIGIN_PREFIX):].split("/")[1]

    def body(self) -> str:
        ext = f"witnesses {self.policy}\n" if self.policy else ""
        return (f"{self.origin}\n{self.size}\n{base64.b64encode(self.root).decode()}\n{ext}")


def parse_checkpoint(body: str) -> Checkpoint:
    """A checkpoint body (the note's text, up to the blank line); ValueError otherwise."""
    lines = body.split("\n")
    if len(lines) < 4 or lines[-1] != "" or len(lines) > 5:
        raise ValueError("a checkpoint is three lines and at most one extension")
    origin, size, root = lines[0], lines[1], lines[2]
    parts = origin[len(ORIGIN_PREFIX):].split("/")
    if not (origin.startswith(ORIGIN_PREFIX) and len(parts) == 2 and is_id(parts[1])
            and 0 < len(parts[0]) <= 64):
        raise ValueError("not a quire log origin")
    if not (size.isdigit() and (size == "0" or not size.startswith("0")) and len(size) < 16):
        raise ValueError("the size is not a number")
    try:
        raw = base64.b64decode(root, validate=True)
    except ValueError as e:
        raise ValueError("the root is not base64") from e
    if len(raw) != 32:
        raise ValueError("the root is not 32 bytes")
    policy = None
    if len(lines) == 5:
        ext = lines[3].split(" ")
        if not (len(ext) == 2 and ext[0] == "witnesses" and is_digest(ext[1])):
            raise ValueError("unknown checkpoint extension")
        policy = ext[1]
    cp = Checkpoint(origin, int(size), raw, policy)
    if cp.body() != body:
        raise ValueError("the checkpoint is not in its canonical form")
    return cp


# ---------------------------------------------------------------- signed notes


def _key_hash(name: str, kind: int, public: str) -> bytes:
    return hashlib.sha256(name.encode() + b"\n" + bytes([kind]) + b64u_decode(public)).digest()[:4]


def _ok(public: str, sig: bytes, message: bytes) -> bool:
    try:
        load_public(public).verify(sig, message)
        return True
    except (InvalidSignature, ValueError):
        return False


def sign_note(key: Ed25519PrivateKey, body: str) -> str:
    """The hub's signed note over a checkpoint body: its key name is the origin."""
    name = body.split("\n", 1)[0]
    sig = _key_hash(name, SIG_ED25519, public_b64(key)) + key.sign(body.encode())
    return f"{body}\n— {name} {base64.b64encode(sig).decode()}\n"


def cosign(key: Ed25519PrivateKey, name: str, body: str, at: int) -> str:
    """A witness's co-signature line over a checkpoint body at unix time ``at`` (seconds)."""
    msg = f"{COSIG_HEADER}\ntime {at}\n{body}".encode()
    sig = _key_hash(name, SIG_COSIG, public_b64(key)) + struct.pack(">Q", at) + key.sign(msg)
    return f"— {name} {base64.b64encode(sig).decode()}\n"


@dataclass(frozen=True)
class Note:
    body: str
    lines: tuple[tuple[str, bytes], ...]  # (key name, signature bytes), in order

    def text(self) -> str:
        return self.body + "\n" + "".join(
            f"— {n} {base64.b64encode(s).decode()}\n" for n, s in self.lines)


def parse_note(text: Any) -> Note:
    """A signed note's body and signature lines (nothing verified yet); ValueError."""
    if not isinstance(text, str) or len(text) > MAX_NOTE or not text.endswith("\n"):
        raise ValueError("not a signed note")
    body, sep, sigs = text.partition("\n\n")
    if not sep:
        raise ValueError("a signed note has a blank line before its signatures")
    out = []
    for line in sigs[:-1].split("\n"):
        parts = line.split(" ")
        if len(parts) != 3 or parts[0] != "—" or not parts[1]:
            raise ValueError("a signature line is '— name base64'")
        try:
            out.append((parts[1], base64.b64decode(parts[2], validate=True)))
        except ValueError as e:
            raise ValueError("a signature is not base64") from e
    return Note(body + "\n", tuple(out))


def hub_signed(note: Note, hub_public: str) -> bool:
    """Does the note carry the hub's signature (key name = origin) by ``hub_public``?"""
    name = note.body.split("\n", 1)[0]
    want = _key_hash(name, SIG_ED25519, hub_public)
    return any(n == name and s[:4] == want and len(s) == 68
               and _ok(hub_public, s[4:], note.body.encode()) for n, s in note.lines)


def cosigned_by(note: Note, name: str, public: str) -> int | None:
    """The time of a valid co-signature by witness ``(name, public)``, else None."""
    want = _key_hash(name, SIG_COSIG, public)
    for n, s in note.lines:
        if n == name and len(s) == 76 and s[:4] == want:
            (at,) = struct.unpack(">Q", s[4:12])
            if _ok(public, s[12:], f"{COSIG_HEADER}\ntime {at}\n{note.body}".encode()):
                return int(at)
    return None


def with_lines(note: Note, lines: str) -> Note:
    """``note`` with the signature lines of ``lines`` (text: "— name b64\\n"…) added."""
    extra = parse_note(note.body + "\n" + lines).lines
    have = set(note.lines)
    return Note(note.body, note.lines + tuple(x for x in extra if x not in have))


# ---------------------------------------------------------------- witness policy


@dataclass(frozen=True)
class Witness:
    name: str
    key: str  # Ed25519 public key, base64url
    url: str


@dataclass(frozen=True)
class Policy:
    space: str
    n: int
    quorum: int
    witnesses: tuple[Witness, ...]
    previous: str | None
    at: int
    by: str
    wire: dict[str, Any]

    @property
    def digest(self) -> str:
        return digest_of(self.wire)


def policy_body(*, space: str, n: int, quorum: int, witnesses: list[dict[str, str]],
                previous: str | None, at: int, by: str) -> dict[str, Any]:
    return {"space": space, "n": n, "quorum": quorum, "witnesses": witnesses,
            "previous": previous, "at": at, "by": by}


def check_witnesses(witnesses: Any, quorum: Any) -> tuple[Witness, ...]:
    """The witness list and quorum of a policy, checked (ValueError saying what is wrong)."""
    if not isinstance(witnesses, list) or len(witnesses) > MAX_WITNESSES:
        raise ValueError(f"witnesses is a list of at most {MAX_WITNESSES}")
    out = []
    for w in witnesses:
        if not (isinstance(w, dict) and set(w) == {"name", "key", "url"}
                and all(isinstance(w[k], str) for k in w)):
            raise ValueError("each witness is {name, key, url}")
        if not (0 < len(w["name"]) <= 100 and " " not in w["name"] and "\n" not in w["name"]
                and "+" not in w["name"]):
            raise ValueError("a witness name is 1-100 characters, no space, newline or +")
        try:
            load_public(w["key"])
        except (ValueError, TypeError) as e:
            raise ValueError("a witness key is an Ed25519 public key (base64url)") from e
        if not (w["url"].startswith(("http://", "https://")) and len(w["url"]) <= 300):
            raise ValueError("a witness url is http(s)")
        out.append(Witness(w["name"], w["key"], w["url"]))
    if len({w.name for w in out}) != len(out) or len({w.key for w in out}) != len(out):
        raise ValueError("each witness is listed once")
    if not (isinstance(quorum, int) and not isinstance(quorum, bool)
            and 0 <= quorum <= len(out)):
        raise ValueError("quorum is between 0 and the number of witnesses")
    return tuple(out)


def parse_policy(hub_keys: Any, obj: Any, *, space: str) -> Policy:
    """A witness policy the hub key signed, for ``space``."""
    from shared.signed import verified_body

    body = verified_body(hub_keys, WITNESSES_DOMAIN, obj,
                         {"space", "n", "quorum", "witnesses", "previous", "at", "by"}, set(),
                         "witness policy")
    try:
        ws = check_witnesses(body["witnesses"], body["quorum"])
        canonical_bytes(body)
    except (ValueError, CanonicalError) as e:
        raise HubUnverified(f"witness policy: {e}") from None
    if not (body["space"] == space and isinstance(body["n"], int) and body["n"] >= 1
            and (body["previous"] is None or is_digest(body["previous"]))
            and isinstance(body["at"], int) and isinstance(body["by"], str)):
        raise HubUnverified("witness policy has a field of the wrong form or another space")
    return Policy(space, body["n"], body["quorum"], ws, body["previous"], body["at"],
                  body["by"], dict(obj))


def quorum_met(note: Note, policy: Policy | None) -> tuple[bool, list[str]]:
    """Does ``note`` carry ``policy.quorum`` valid co-signatures of its witnesses? And the
    names of those that co-signed."""
    if policy is None:
        return True, []
    names = [w.name for w in policy.witnesses if cosigned_by(note, w.name, w.key) is not None]
    return len(names) >= policy.quorum, names


# ---------------------------------------------------------------- evidence


def equivocation(a: Any, b: Any, consistency: Any = None) -> str:
    """Two signed notes that prove the hub key signed two histories of one log: the same
    origin, each signed by the key the origin names, and either the same size and different
    roots, or different sizes and ``consistency`` = ``{"root", "proof"}`` (hex): a
    consistency proof that the larger log's first leaves, as many as the smaller has, have
    ``root``, another root than the smaller's (the proof pins that root to the larger
    root: two roots for one prefix would be a hash collision). Returns what they prove;
    ValueError saying why they do not."""
    from shared.merkle import ProofError, verify_consistency

    notes = [parse_note(x) for x in (a, b)]
    cps = [parse_checkpoint(n.body) for n in notes]
    if cps[0].origin != cps[1].origin:
        raise ValueError("the two checkpoints are of different logs")
    for n, cp in zip(notes, cps, strict=True):
        if not hub_signed(n, cp.hub_key):
            raise ValueError("a checkpoint is not signed by the hub key its origin names")
    small, large = sorted(cps, key=lambda c: c.size)
    if small.size != large.size:
        if not (isinstance(consistency, dict) and isinstance(consistency.get("root"), str)
                and isinstance(consistency.get("proof"), list)
                and len(consistency["proof"]) <= 64):
            raise ValueError("checkpoints of different sizes prove nothing without a "
                             "consistency proof of the larger's prefix")
        prefix = bytes.fromhex(consistency["root"])
        try:
            verify_consistency(small.size, large.size, prefix, large.root,
                               [bytes.fromhex(h) for h in consistency["proof"]])
        except ProofError as e:
            raise ValueError(f"the consistency proof does not verify: {e}") from None
        if prefix == small.root:
            raise ValueError("the larger log extends the smaller: one history")
        return (f"the hub key {small.hub_key} signed a log of {small.size} entries for space "
                f"{small.space} and one of {large.size} that does not extend it")
    if cps[0].root == cps[1].root:
        raise ValueError("the two checkpoints are the same log")
    return (f"the hub key {cps[0].hub_key} signed two different logs of {cps[0].size} "
            f"entries for space {cps[0].space}")
