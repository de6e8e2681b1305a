"""Serving history: changes after a seq and snapshots at one head, as NDJSON lines.

Both read inside one transaction that gives a consistent view (REPEATABLE READ on
PostgreSQL, one deferred read transaction on SQLite's WAL), stream rows with a server-side
cursor and never hold a whole space in memory. The last line (``end``) lets a client tell a
complete stream from a cut one, and carries the hub-signed head the stream reaches (with
its state root, hub/signed_state.py): a replica applies nothing it cannot tie to it. Each
change carries the batch's receipt, signed when the batch was accepted.

A reader whose read rules narrow its scope (hub/scope.py; decisions.md D142) gets the same
streams with what it may not read left out, judged in the stream's own transaction (a rule
committed before the stream began is in force for all of it):

    changes    a batch with ops outside the scope is sent with those ops removed and a
               ``withheld`` object: {"ops": n, "was": [withheld_mark(id, base)…],
               "lattices": {bucket: base64 lattice delta}}: what the removed ops add to the
               state root's buckets (old live element out, new one in), so a replica that
               keeps the sum of what it cannot read per bucket still recomputes the signed
               root; ``was`` marks the versions the ops replaced, which a replica that held
               one (the entry left its scope) removes
    snapshot   the entries outside the scope are left out; the first line's ``count`` is
               what is sent, and ``end.withheld`` holds their count and per-bucket lattices
    end lines  carry ``scope``: the fingerprint of the read rules the stream was built under
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from hub import completeness, signed_state
from hub import scope as scopes
from hub.access import Principal, space_access_txn
from hub.keys import HubKey
from hub.store import state_sql as ss
from hub.store.batches import (
    count_live_entries_txn,
    iter_changes_txn,
    iter_live_entries_txn,
    live_entries_txn,
)
from hub.store.db import Store
from hub.store.spaces_sql import SpaceRow
from shared import state as st
from shared.canonical import dumps
from shared.entry import make_entry, tombstone
from shared.errors import Forbidden, InvalidRequest, SnapshotRequired
from shared.ids import is_id
from shared.readscope import ReadScope, check_only, withheld_mark

CHUNK = 64  # lines per write: fewer, larger writes are much cheaper than one per line


@dataclass(frozen=True)
class Signer:
    """Signs the head a stream ends at (``enabled``: the ``state_root`` setting)."""

    key: HubKey
    now: int
    enabled: bool = True

    def root(self, conn: Any, space: SpaceRow, seq: int) -> str:
        root = signed_state.root_at_txn(conn, space, seq, self.enabled)
        if root is None:  # a batch accepted before the state root existed (0003)
            raise SnapshotRequired("history this old has no signed state; take a snapshot",
                                   {"epoch": space.epoch, "reason": "state"})
        return root

    def head(self, conn: Any, space: SpaceRow, seq: int, digest: str, root: str
             ) -> dict[str, Any]:
        return signed_state.signed_head(self.key, space=space.id, epoch=space.epoch, seq=seq,
                                        digest=digest, root=root, at=self.now,
                                        tips=signed_state.audit_tips_txn(conn, space, seq,
                                                                            self.enabled))


def parse_only(values: list[str]) -> tuple[str, ...]:
    """The ``only`` query parameter (repeated): a partial replica's globs."""
    try:
        return check_only(values)
    except ValueError as e:
        raise InvalidRequest(f"only: {e}") from e


def parse_changes_query(epoch: str | None, after: str | None, limit: str | None,
                        default: int, maximum: int) -> tuple[str | None, int, int]:
    if epoch is not None and not is_id(epoch):
        raise InvalidRequest("epoch must be an epoch id")
    try:
        after_n = int(after) if after is not None else 0
        limit_n = int(limit) if limit is not None else default
    except ValueError as e:
        raise InvalidRequest("after and limit must be integers") from e
    if after_n < 0 or not (1 <= limit_n <= maximum):
        raise InvalidRequest(f"after must be >= 0 and limit between 1 and {maximum}")
    return epoch, after_n, limit_n


def _lattices_b64(lattices: dict[int, bytes]) -> dict[str, str]:
    return {str(b): base64.b64encode(lat).decode("ascii") for b, lat in sorted(lattices.items())}


def _redact(batch: dict[str, Any], seen: set[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``batch`` without the ops on entries not in ``seen``, and what stands for them."""
    kept, marks, moves = [], [], []
    for op in batch["ops"]:
        eid = op["entry"]["id"] if op["op"] == "put" else op["id"]
        if eid in seen:
            # a rename from an entry the reader may not read: its name is not told either
            hidden_from = op["op"] == "put" and "from" in op and op["from"] not in seen
            kept.append({k: v for k, v in op.items() if k != "from"} if hidden_from else op)
            continue
        base = op.get("base")
        old = None if base is None or base == tombstone(eid).version else base
        new = None if op["op"] != "put" else _version(op["entry"])
        if old is not None:
            marks.append(withheld_mark(eid, old))
        moves.append((eid, old, new))
    withheld = {"ops": len(batch["ops"]) - len(kept), "was": sorted(marks),
                "lattices": _lattices_b64(st.apply_changes({}, moves))}
    return dict(batch, ops=kept), withheld


def _version(entry: dict[str, Any]) -> str:
    return make_entry(entry).version


def _op_ids(body: str) -> list[str]:
    return [op["entry"]["id"] if op["op"] == "put" else op["id"]
            for op in json.loads(body)["ops"]]


def _line(row: Any, batch: str, withheld: dict[str, Any] | None) -> str:
    return ('{"batch":' + batch + ',"seq":' + str(row.seq) + ',"head":"' + row.head_digest
            + '","accepted_at":' + str(row.accepted_at) + ',"author":'
            + dumps({"user": row.user_id, "device": row.device_id, "agent": row.agent})
            + ',"receipt":' + row.receipt
            + ("" if withheld is None else ',"withheld":' + dumps(withheld)) + "}\n")


def changes(store: Store, p: Principal, space_ref: str, epoch: str | None, after: int,
            limit: int, signer: Signer | None = None, *, whole: bool = False,
            held_scope: str | None = None, only: tuple[str, ...] = ()) -> Iterator[bytes]:
    """Yields NDJSON chunks. Access and epoch are checked before the first chunk, so the
    caller pulls that chunk before sending headers and errors become proper responses.
    With ``signer`` the end line carries the signed head at the last seq sent. ``whole``:
    only whole batches (lines shared between readers, hub/api/events.py): a reader whose
    scope is narrowed is refused instead. ``held_scope``: the fingerprint of the read rules
    the caller's copy was built under ("" none; None: not said); when its scope is another
    now (a rule narrowed or widened it), changes after its head would not make its copy
    the scope's, so it is sent to a snapshot (``reason: scope``). ``only``: a partial
    replica's globs, intersected with the scope (shared/readscope.py)."""
    with store.read(snapshot=True) as conn:
        space, role = space_access_txn(conn, p, space_ref, "viewer")
        scope = scopes.scope_txn(conn, p, space, role, only)
        if whole and not scope.unrestricted:
            raise Forbidden("whole batches are not served to a reader with read rules")
        if held_scope is not None and held_scope != scope.fingerprint:
            raise SnapshotRequired("the read rules changed what you may read; take a "
                                   "snapshot", {"epoch": space.epoch, "reason": "scope",
                                                "scope": scope.fingerprint})
        if epoch is not None and epoch != space.epoch:
            raise SnapshotRequired("the space is in another epoch; take a snapshot",
                                   {"epoch": space.epoch, "reason": "epoch"})
        if after > space.head_seq:
            raise SnapshotRequired("you are ahead of the hub (was it restored?); take a "
                                   "snapshot", {"epoch": space.epoch, "reason": "ahead"})
        last, last_digest = after, space.head_digest if after == space.head_seq else None
        # the page ends at end_seq (history is contiguous): its root is looked up before the
        # first line, so a page that cannot be signed is refused as a proper response
        end_seq = min(after + limit, space.head_seq)
        root = signer.root(conn, space, end_seq) if signer is not None else None
        buf: list[str] = []
        rows: list[Any] = []

        def flush() -> list[str]:
            """The lines of the rows held, judged together (one read of their tags)."""
            if scope.unrestricted:
                out = [_line(r, r.body, None) for r in rows]
            else:
                seen = scopes.visible_txn(conn, space.id, scope,
                                          [i for r in rows for i in _op_ids(r.body)])
                out = []
                for r in rows:
                    b = json.loads(r.body)
                    if all(i in seen for i in _op_ids(r.body)):
                        out.append(_line(r, r.body, None))
                    else:
                        kept, withheld = _redact(b, seen)
                        out.append(_line(r, dumps(kept), withheld))
            rows.clear()
            return out

        for row in iter_changes_txn(conn, space.id, space.epoch, after, limit):
            last, last_digest = row.seq, row.head_digest
            rows.append(row)
            if len(rows) >= CHUNK:
                buf += flush()
                yield "".join(buf).encode()
                buf = []
        buf += flush()
        end: dict[str, Any] = {"seq": last, "head_seq": space.head_seq, "epoch": space.epoch,
                               "more": last < space.head_seq}
        if not scope.unrestricted:
            end["scope"] = scope.fingerprint
        if signer is not None and root is not None and last == end_seq and last_digest:
            end["head"] = signer.head(conn, space, last, last_digest, root)
            _prove_txn(conn, space.id, scope, only, end["head"], end)
        buf.append(dumps({"end": end}) + "\n")
        yield "".join(buf).encode()


def snapshot(store: Store, p: Principal, space_ref: str, signer: Signer | None = None,
             only: tuple[str, ...] = ()) -> Iterator[bytes]:
    """Yields NDJSON chunks: the head (signed, with the space's signed epoch statements,
    when ``signer``), every live entry at that head in the reader's scope (narrowed by a
    partial replica's ``only``), then ``end``."""
    with store.read(snapshot=True) as conn:
        space, role = space_access_txn(conn, p, space_ref, "viewer")
        scope = scopes.scope_txn(conn, p, space, role, only)
        head: dict[str, Any] = {"space": space.id, "epoch": space.epoch,
                                "seq": space.head_seq, "digest": space.head_digest}
        # the number of entries that follow: a replica shows progress against it
        hidden = None if scope.unrestricted else _hidden_txn(conn, space.id, scope)
        first: dict[str, Any] = {"head": head,
                                 "count": count_live_entries_txn(conn, space.id)
                                 - (0 if hidden is None else hidden[0])}
        if hidden is not None:
            first["scope"] = scope.fingerprint
        if signer is not None:
            first["head"] = signer.head(conn, space, space.head_seq, space.head_digest,
                                        signer.root(conn, space, space.head_seq))
            first["epochs"] = [json.loads(t) for t in
                               signed_state.epoch_statements_txn(conn, space.id)]
        yield (dumps(first) + "\n").encode()
        buf: list[str] = []
        count = 0
        for row in (iter_live_entries_txn(conn, space.id) if hidden is None
                    else _rows_of_txn(conn, space.id, hidden[1])):
            count += 1
            buf.append('{"entry":' + row.content + ',"version":"' + row.version
                       + '","seq":' + str(row.seq) + "}\n")
            if len(buf) >= CHUNK:
                yield "".join(buf).encode()
                buf = []
        end: dict[str, Any] = {"count": count}
        if hidden is not None:
            end["withheld"] = {"entries": hidden[0], "lattices": _lattices_b64(hidden[2])}
        _prove_txn(conn, space.id, scope, only, first["head"], end)
        buf.append(dumps({"end": end}) + "\n")
        yield "".join(buf).encode()


def _prove_txn(conn: Any, space_id: str, scope: ReadScope, only: tuple[str, ...],
               head: dict[str, Any], end: dict[str, Any]) -> None:
    """A partial replica's answer ending at the current head (its signed head carries
    ``tree``) carries the proof that its folders are whole (hub/completeness.py)."""
    if only:
        proof = completeness.answer_proof_txn(conn, space_id, scope, only, head.get("tree"))
        if proof is not None:
            end["proof"] = proof


def _hidden_txn(conn: Any, space_id: str, scope: ReadScope
                ) -> tuple[int, list[str], dict[int, bytes]]:
    """The live entries outside ``scope`` at this transaction's head: how many, the ids
    of those inside it (sorted: the stream reads only these, ``_rows_of_txn``), and the
    lattices of the outside ones' (id, version) pairs by bucket. One pass over the live
    ids and versions, no content (``visible_txn`` reads the content of the few ids a rule
    with tags or kinds could decide). The lattices are the kept ones of the whole space
    minus what is sent when fewer are sent than left out (a partial replica of one folder:
    O(sent) element hashes and rows read, O(space) ids judged)."""
    hidden: list[tuple[str, str]] = []
    shown: list[tuple[str, str]] = []
    page: list[tuple[str, str]] = []

    def judge() -> None:
        seen = scopes.visible_txn(conn, space_id, scope, [eid for eid, _v in page])
        for pair in page:
            (shown if pair[0] in seen else hidden).append(pair)
        page.clear()

    for eid, version in ss.iter_live_versions_txn(conn, space_id):
        page.append((eid, version))
        if len(page) >= 500:
            judge()
    judge()
    ids = sorted(eid for eid, _v in shown)
    kept = signed_state.kept_lattices_txn(conn, space_id) if len(shown) < len(hidden) \
        else None
    if kept is None:
        return len(hidden), ids, st.lattices_of(hidden)
    less = st.apply_changes(kept, [(i, v, None) for i, v in shown])
    return len(hidden), ids, {b: lat for b, lat in {**kept, **less}.items() if lat != st.ZERO}


def _rows_of_txn(conn: Any, space_id: str, ids: list[str]) -> Iterator[Any]:
    """The live rows of ``ids`` (sorted), in pages of 500: the stream in id order."""
    for lo in range(0, len(ids), 500):
        yield from live_entries_txn(conn, space_id, ids[lo:lo + 500])
