"""Holding the hub to one history: the space log's checkpoint in every fresh head, checked
against the last one this replica accepted, and co-signed by the space's witnesses
(docs/architecture.md, "The log and its witnesses"; shared/tlog.py; decisions.md D140).

    fresh head (signed over our nonce) ── its checkpoint, a note the hub key signed
      │  none: a hub before the log; refused (log_missing) once we accepted one
      ▼
    kept checkpoint (store meta ``log_checkpoint``)
      │  smaller size than kept                                  → log_rollback
      ▼
    GET …/log/consistency?first=kept&second=fresh (once the size moved)
      │  the proof from kept to fresh                            → log_inconsistent
      │  the last leaf names this very head (epoch, seq, digest) → log_head_mismatch
      ▼
    witness policy: the kept one, and the one the checkpoint names if it changed (hub-signed
      │  statements, GET …/witnesses; a checkpoint may not drop a policy: witness_policy)
      ▼
    every listed witness asked to co-sign (hubclient/witness.py), whatever the quorum (that
      │  is the gossip: a witness that saw another history refuses)
      │  fewer than the quorum of the kept policy, or of the new one → witness_quorum
      ▼
    accepted: the note with its co-signatures, the head and the policy are kept

Every refusal is ``HubUnverified`` before anything is applied (the pull stops there) and
carries both checkpoints where there are two: what the hub signed before and now.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from shared import merkle, tlog
from shared.errors import HubUnverified
from shared.signed import EpochStatement, SignedHead

KEPT = "log_checkpoint"  # store meta: {"note", "head", "policy"}


@dataclass
class Sources:
    """Where the check gets what the head does not carry (the hub, the witnesses)."""

    proof: Callable[[int, int], dict[str, Any]]  # GET …/log/consistency
    policies: Callable[[], list[Any]]  # GET …/witnesses
    # (witness, note text, size, guess, proof hashes m→n) -> co-signature lines
    cosign: Callable[[tlog.Witness, str, int, int, Callable[[int, int], list[bytes]]], str]
    # (witness, origin) -> what it holds {"note", "equivocation"?}: evidence only
    latest: Callable[[tlog.Witness, str], dict[str, Any] | None] = lambda _w, _o: None


class Unwitnessed(Exception):  # noqa: N818 - a condition, not an error: take a full sync
    """Changes that end past the last witnessed head, where the space has witnesses: only
    a full sync (which checks the log) may apply them (the watcher's fast path)."""


def _refuse(message: str, reason: str, **details: Any) -> HubUnverified:
    return HubUnverified(message, dict(details, reason=reason))


def parse_signed(text: Any, keys: tuple[str, ...], space: str
                 ) -> tuple[tlog.Note, tlog.Checkpoint]:
    """A checkpoint note for ``space``, signed by one of the pinned chain's ``keys``."""
    try:
        note = tlog.parse_note(text)
        cp = tlog.parse_checkpoint(note.body)
    except ValueError as e:
        raise _refuse(f"the head's checkpoint is malformed: {e}", "log_malformed") from None
    if cp.space != space or cp.hub_key not in keys or not tlog.hub_signed(note, cp.hub_key):
        raise _refuse("the head's checkpoint is not signed by the pinned hub key for this "
                      "space", "log_unsigned")
    return note, cp


def _hashes(raw: Any) -> list[bytes]:
    if not (isinstance(raw, list) and len(raw) <= 64
            and all(isinstance(h, str) and len(h) == 64 for h in raw)):
        raise ValueError("a proof is a list of at most 64 hashes")
    return [bytes.fromhex(h) for h in raw]


def _policy_of(wire: Any, keys: tuple[str, ...], space: str) -> tlog.Policy | None:
    return None if wire is None else tlog.parse_policy(keys, wire, space=space)


def check(fresh: SignedHead, kept: Any, keys: tuple[str, ...], src: Sources
          ) -> dict[str, Any] | None:
    """Check ``fresh`` against the ``kept`` meta value; return the value to keep (None: a
    hub before the log, nothing to keep). Raises ``HubUnverified``."""
    space = fresh.space
    kept = kept if isinstance(kept, dict) else None
    if fresh.checkpoint is None:
        if kept is not None:
            raise _refuse("the hub's head carries no checkpoint of its log, but this replica "
                          "accepted one before", "log_missing", kept=kept.get("note"))
        return None
    note, cp = parse_signed(fresh.checkpoint, keys, space)
    old: tuple[tlog.Note, tlog.Checkpoint] | None = None
    # a kept value without a note: a fork recovery's new line, the policy still kept
    if kept is not None and kept.get("note") is not None:
        old = parse_signed(kept.get("note"), keys, space)
    evidence = {"kept": None if old is None else old[0].text(), "fresh": note.text()}
    if old is not None and cp.size < old[1].size:
        raise _refuse(f"the hub's log has {cp.size} entries, fewer than the {old[1].size} it "
                      "signed before (rolled back?)", "log_rollback", **evidence)
    same = old is not None and (old[1].size, old[1].root) == (cp.size, cp.root)
    head = kept.get("head") if kept else None
    if same and not (isinstance(head, dict) and (head.get("epoch"), head.get("seq"),
                                                 head.get("digest"))
                     == (fresh.epoch, fresh.seq, fresh.digest)):
        same = False  # the same log at another head: prove the head again
    if not same:
        _prove(src, fresh, cp, old, evidence)
    kept_policy = _policy_of(kept.get("policy") if kept else None, keys, space)
    policy = kept_policy
    if cp.policy != (None if kept_policy is None else kept_policy.digest):
        policy = _new_policy(src, keys, space, cp, kept_policy)
    if same and old is not None and old[1].policy == cp.policy:
        note = tlog.Note(note.body, old[0].lines)  # co-signed already: the same checkpoint
    note = _witnessed(src, note, cp, old, [p for p in (kept_policy, policy) if p], evidence)
    return {"note": note.text(), "head": fresh.wire,
            "policy": None if policy is None else policy.wire}


def _prove(src: Sources, fresh: SignedHead, cp: tlog.Checkpoint,
           old: tuple[tlog.Note, tlog.Checkpoint] | None, evidence: dict[str, Any]) -> None:
    first = 0 if old is None else old[1].size
    doc = src.proof(first, cp.size)
    try:
        if not isinstance(doc, dict):
            raise ValueError("not an object")
        proof = _hashes(doc.get("proof", []))
        if old is not None:
            merkle.verify_consistency(first, cp.size, old[1].root, cp.root, proof)
    except (ValueError, merkle.ProofError) as e:
        raise _refuse(f"the hub's log is not an extension of the one it signed before "
                      f"({e}): it shows this replica another history", "log_inconsistent",
                      **evidence) from None
    if cp.size == 0:
        if fresh.seq != 0:
            raise _refuse("an empty log at a head past seq 0", "log_head_mismatch", **evidence)
        return
    last = doc.get("last")
    try:
        if not (isinstance(last, dict) and last.get("index") == cp.size - 1
                and tlog.leaf_at_head(last.get("data"), epoch=fresh.epoch, seq=fresh.seq,
                                      head=fresh.digest)):
            raise ValueError("the last leaf does not name this head")
        merkle.verify_inclusion(tlog.leaf_hash_of(last["data"]), cp.size - 1, cp.size,
                                _hashes(last.get("proof")), cp.root)
    except (ValueError, merkle.ProofError) as e:
        raise _refuse(f"the hub's checkpoint is not the log of the head it signed ({e})",
                      "log_head_mismatch", **evidence) from None


def _new_policy(src: Sources, keys: tuple[str, ...], space: str, cp: tlog.Checkpoint,
                kept: tlog.Policy | None) -> tlog.Policy:
    if cp.policy is None:
        raise _refuse("the hub's checkpoint drops the space's witness policy",
                      "witness_policy")
    for wire in src.policies() or []:
        p = tlog.parse_policy(keys, wire, space=space)
        if p.digest == cp.policy:
            if kept is not None and p.n <= kept.n:
                raise _refuse("the hub's checkpoint names an older witness policy",
                              "witness_policy")
            return p
    raise _refuse("the hub does not serve the witness policy its checkpoint names",
                  "witness_policy")


def _witnessed(src: Sources, note: tlog.Note, cp: tlog.Checkpoint,
               old: tuple[tlog.Note, tlog.Checkpoint] | None, policies: list[tlog.Policy],
               evidence: dict[str, Any]) -> tlog.Note:
    """Ask every witness of ``policies`` that has not co-signed ``note`` yet; require each
    policy's quorum."""
    def proof(m: int, n: int) -> list[bytes]:
        return _hashes(src.proof(m, n).get("proof", []))

    refusals: dict[str, str] = {}
    asked: set[str] = set()
    for policy in policies:
        for w in policy.witnesses:
            if w.key in asked or tlog.cosigned_by(note, w.name, w.key) is not None:
                continue
            asked.add(w.key)
            try:
                lines = src.cosign(w, note.text(), cp.size, 0 if old is None else old[1].size,
                                   proof)
                note = tlog.with_lines(note, lines)
            except Exception as e:  # noqa: BLE001 - a witness that fails is named, not fatal
                refusals[w.name] = str(e)[:300]
            if tlog.cosigned_by(note, w.name, w.key) is None and w.name not in refusals:
                refusals[w.name] = "no valid co-signature in its answer"
    if refusals:  # whatever the quorum: a witness that saw another history says so
        _equivocation(src, note, cp, policies, evidence)
    for policy in policies:
        ok, names = tlog.quorum_met(note, policy)
        if not ok:
            raise _refuse(f"the hub's checkpoint has {len(names)} of the {policy.quorum} "
                          f"witness co-signatures the space requires; nothing was applied",
                          "witness_quorum", quorum=policy.quorum, cosigned=names,
                          refused=refusals, **evidence)
    return note


def _equivocation(src: Sources, note: tlog.Note, cp: tlog.Checkpoint,
                  policies: list[tlog.Policy], evidence: dict[str, Any]) -> None:
    """A witness refused: if it holds a hub-signed checkpoint of this size with another root
    (or the pair it caught), or a smaller one that the hub's own consistency proof shows is
    not a prefix of this log (``first_root``: the root this log had at that size), the hub
    showed two histories: raise ``equivocation`` with both notes (and that proof), which
    ``quire verify --evidence`` checks offline."""
    seen: set[str] = set()
    for policy in policies:
        for w in policy.witnesses:
            if w.key in seen:
                continue
            seen.add(w.key)
            doc = src.latest(w, cp.origin) or {}
            pairs: list[tuple[Any, Any]] = [(doc.get("note"), note.text())]
            eq = doc.get("equivocation")
            if isinstance(eq, dict):
                pairs.insert(0, (eq.get("kept"), eq.get("other")))
            for a, b in pairs:
                try:
                    proven = tlog.equivocation(a, b)
                except (ValueError, TypeError):
                    continue
                _proven(proven, w, {"checkpoints": [a, b]}, evidence)
            prefix = _smaller(src, doc.get("note"), note, cp)
            if prefix is not None:
                _proven(prefix[0], w, prefix[1], evidence)


def _proven(proven: str, w: tlog.Witness, pair: dict[str, Any], evidence: dict[str, Any]
            ) -> None:
    raise _refuse(f"equivocation: {proven} (witness {w.name} holds the other); this "
                  "replica applies nothing more from this hub for the space and keeps its "
                  "local changes", "equivocation", witness=w.name, evidence=pair, **evidence)


def _smaller(src: Sources, held: Any, note: tlog.Note, cp: tlog.Checkpoint
             ) -> tuple[str, dict[str, Any]] | None:
    """A witness's smaller checkpoint of this log that this log does not extend, proven by
    the hub's own consistency proof from its size (what it proves, the evidence), or
    None."""
    try:
        other = tlog.parse_checkpoint(tlog.parse_note(held).body)
        if other.origin != cp.origin or other.size >= cp.size:
            return None
        doc = src.proof(other.size, cp.size)
        consistency = {"root": doc.get("first_root"), "proof": doc.get("proof")}
        pair = {"checkpoints": [held, note.text()], "consistency": consistency}
        return tlog.equivocation(held, note.text(), consistency), pair
    except Exception:  # noqa: BLE001 - no proof to be had: the refusal says the rest
        return None


def requires_witnesses(kept: Any) -> bool:
    """Does the kept checkpoint come with a policy that lists witnesses?"""
    pol = kept.get("policy") if isinstance(kept, dict) else None
    return isinstance(pol, dict) and bool(pol.get("witnesses"))


def check_witnessed(kept: Any, epoch: str, seq: int) -> None:
    """Changes up to head ``(epoch, seq)`` may be applied without a new check of the log:
    the space has no witnesses, or the head is not past the one last witnessed."""
    if not requires_witnesses(kept):
        return
    head = kept.get("head") or {}
    if head.get("epoch") != epoch or not isinstance(head.get("seq"), int) or seq > head["seq"]:
        raise Unwitnessed(f"changes up to seq {seq} are past the last witnessed head")


# ---------------------------------------------------------------- fork recovery (D146)


def fork_recovery(path: list[EpochStatement], keys: tuple[str, ...], space: str
                  ) -> EpochStatement | None:
    """The first statement on the epoch ``path`` that recovers this space from a fork: its
    ``forked`` pair proves, by itself, that a pinned key signed two histories of this
    space's log (``tlog.equivocation``). A statement whose pair proves nothing is no
    recovery (the refusal it would lift stands)."""
    for s in path:
        if s.forked is None:
            continue
        try:
            tlog.equivocation(*s.forked)
            cp = tlog.parse_checkpoint(tlog.parse_note(s.forked[0]).body)
        except (ValueError, TypeError):
            continue
        if cp.space == space and cp.hub_key in keys:
            return s
    return None


def leaf_of(doc: Any, kept: Any, *, epoch: str, seq: int) -> dict[str, Any]:
    """The batch leaf of head ``(epoch, seq)`` in the log of the ``kept`` checkpoint, from
    an answer of ``GET …/log/inclusion`` (its proof checked against the kept root).
    Raises ``HubUnverified`` (``log_inconsistent``)."""
    try:
        cp = tlog.parse_checkpoint(tlog.parse_note(kept.get("note")).body)
        data = doc.get("data") if isinstance(doc, dict) else None
        if not (isinstance(data, dict) and data.get("epoch") == epoch
                and data.get("seq") == seq and "batch" in data
                and isinstance(doc.get("index"), int)):
            raise ValueError("not the leaf of that head")
        merkle.verify_inclusion(tlog.leaf_hash_of(data), doc["index"], cp.size,
                                _hashes(doc.get("proof")), cp.root)
    except (ValueError, TypeError, AttributeError, merkle.ProofError) as e:
        raise _refuse(f"the hub's log does not show head {seq} of the epoch it ended ({e})",
                      "log_inconsistent") from None
    return data
