"""Checking a scoped answer: what a replica whose read rules narrow its scope, or that holds
only part of a space (a partial replica: ``only``), verifies of what the hub left out
(docs/security.md, "Read rules"; decisions.md D142, D149). The hub's side is hub/feed.py.

    changes line with ``withheld``    parse_withheld: the ops left out (count), ``was``
                                      marks of versions they replaced, per-bucket lattice
                                      deltas; the batch is redacted (shared/wire.py
                                      ``parse_batch(redacted=True)``): its digest is the one
                                      the hub-signed receipt names (verify.check_authors) and
                                      the hash chain carries to the signed head
    end line ``scope``                check_scope: the fingerprint of the scope the answer was
                                      built under is the one this store holds
    snapshot ``scope``, ``withheld``  snapshot_withheld: the sums of everything left out
                 │
    check_answer_txn: the store's own entries + the withheld sums (withheld_buckets, kept by
    replica/engine/scoped.py) add up to the state root the hub signed. Every pull page and
    snapshot ends here, scoped or not: the one place a proof that the answer omitted
    nothing inside the scope is checked too (``answer``: the end line, where it travels)

What the sums prove and do not: an answer's entries, chained batches and sums add up to the
signed root, so nothing was added, altered or left unaccounted; they do not prove that an
entry of the scope was not moved into the withheld sums: that is the folder proof's job
(replica/trust/completeness.py, decisions.md D143), checked in ``check_answer_txn``.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass
from typing import Any

from replica.store import store as st
from replica.store.db import Conn
from replica.trust import completeness, verify
from shared import state
from shared.errors import HubUnverified
from shared.readscope import scope_of_head
from shared.signed import SignedHead
from shared.wire import DEFAULT_MAX_OPS

SCOPE = "scope"  # meta: the fingerprint of the scope this store's copy was built under
ACCESS = "access"  # meta: the role and rules the hub's head applies to us (engine/pull.py)
ONLY = "only"  # meta: the globs a partial replica holds (a list; absent: everything)
_MARK = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class Withheld:
    """What a scoped changes line says of the ops it left out."""

    ops: int
    was: frozenset[str]
    lattices: dict[int, bytes]


def _refuse(what: str) -> HubUnverified:
    return HubUnverified(f"a scoped answer does not verify: {what}", {"reason": "bad_withheld"})


def parse_lattices(obj: Any) -> dict[int, bytes]:
    """``{bucket: base64 lattice}`` as hub/feed.py writes it, bounded and checked."""
    if not isinstance(obj, dict) or len(obj) > state.BUCKETS:
        raise _refuse("lattices are not an object of buckets")
    out: dict[int, bytes] = {}
    for k, v in obj.items():
        if not (isinstance(k, str) and k.isdigit() and int(k) < state.BUCKETS
                and isinstance(v, str) and len(v) <= 4 * state.LATTICE_BYTES // 3 + 4):
            raise _refuse("a lattice bucket or value is malformed")
        try:
            lat = base64.b64decode(v, validate=True)
        except ValueError:
            raise _refuse("a lattice is not base64") from None
        if len(lat) != state.LATTICE_BYTES:
            raise _refuse("a lattice has the wrong size")
        out[int(k)] = lat
    return out


def parse_withheld(obj: Any) -> Withheld:
    """A changes line's ``withheld`` object, checked; ``HubUnverified`` otherwise."""
    if not isinstance(obj, dict) or set(obj) != {"ops", "was", "lattices"}:
        raise _refuse("withheld is not {ops, was, lattices}")
    ops, was = obj["ops"], obj["was"]
    if not (isinstance(ops, int) and not isinstance(ops, bool) and 0 < ops <= DEFAULT_MAX_OPS):
        raise _refuse("withheld.ops is not a count of ops")
    if not (isinstance(was, list) and len(was) <= ops
            and all(isinstance(m, str) and _MARK.match(m) for m in was)):
        raise _refuse("withheld.was is not a list of marks")
    return Withheld(ops, frozenset(was), parse_lattices(obj["lattices"]))


def snapshot_withheld(first: dict[str, Any], end: Any) -> dict[int, bytes] | None:
    """The sums a scoped snapshot left out (its end line's ``withheld``); None when the
    snapshot is of the whole space (no ``scope`` on its first line)."""
    if not first.get(SCOPE):
        return None
    w = end.get("withheld") if isinstance(end, dict) else None
    if not isinstance(w, dict) or set(w) != {"entries", "lattices"}:
        raise _refuse("a scoped snapshot ends without its withheld sums")
    return parse_lattices(w["lattices"])


def answer_scope(line: Any) -> str:
    """The scope fingerprint an answer says it was built under ("" for the whole space)."""
    got = line.get(SCOPE, "") if isinstance(line, dict) else ""
    if not isinstance(got, str) or len(got) > 64:
        raise _refuse("the scope fingerprint is malformed")
    return got


def check_scope(end: Any, held: str) -> None:
    """A changes answer must be built under the scope this store's copy holds (the hub
    sends a snapshot otherwise: ``snapshot_required``, ``reason: scope``)."""
    got = answer_scope(end)
    if got != held:
        raise HubUnverified("the changes were built under another read scope than this "
                            "replica holds", {"reason": "scope_mismatch", "held": held,
                                              "answer": got})


def check_answer_txn(conn: Conn, signed: SignedHead, what: str,
                     answer: dict[str, Any] | None = None) -> None:
    """The end of every pull page and snapshot: the store, as this transaction leaves it,
    plus the withheld sums, holds exactly the state the hub signed (``verify.check_root_txn``).
    ``answer``: the answer's end line; a partial replica of folders also checks that its
    store holds every entry of them (the end line's ``proof`` against the head's ``tree``,
    replica/trust/completeness.py) where the answer reaches the head."""
    verify.check_root_txn(conn, signed, what)
    only = st.get_meta_txn(conn, ONLY, None)
    if isinstance(only, list) and only:
        end = answer if isinstance(answer, dict) else None
        # read rules that narrow this replica may hide part of its folders: no proof then
        # (what is hidden cannot be told from what is withheld; docs/security.md)
        access = st.get_meta_txn(conn, ACCESS, None)
        rules = access.get("rules") if isinstance(access, dict) else None
        narrowed = not scope_of_head(rules if isinstance(rules, list) else []).unrestricted
        # a proof is due on every answer whose signed head is the current one (it carries
        # ``tree``), whatever ``more`` (unsigned) says; one ending earlier is proved with the
        # next answer that reaches the head
        last = end is not None and (signed.tree is not None or not end.get("more"))
        completeness.check_txn(conn, signed, only, None if end is None else end.get("proof"),
                               what, last=last, required=not narrowed)
