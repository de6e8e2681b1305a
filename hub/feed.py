"""Serving history: changes after a seq and snapshots at one head, as NDJSON lines.

Both read inside one transaction that gives a consistent view (REPEATABLE READ on
PostgreSQL, one deferred read transaction on SQLite's WAL), stream rows with a server-side
cursor and never hold a whole space in memory. The last line (``end``) lets a client tell a
complete stream from a cut one, and carries the hub-signed head the stream reaches (with
its state root, hub/signed_state.py): a replica applies nothing it cannot tie to it. Each
change carries the batch's receipt, signed when the batch was accepted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from hub import signed_state
from hub.access import Principal, space_access_txn
from hub.keys import HubKey
from hub.store.batches import count_live_entries_txn, iter_changes_txn, iter_live_entries_txn
from hub.store.db import Store
from hub.store.spaces_sql import SpaceRow
from shared.canonical import dumps
from shared.errors import InvalidRequest, SnapshotRequired
from shared.ids import is_id

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
                                        tips=signed_state.audit_tips_txn(conn, space))


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


def changes(store: Store, p: Principal, space_ref: str, epoch: str | None, after: int,
            limit: int, signer: Signer | None = None) -> Iterator[bytes]:
    """Yields NDJSON chunks. Access and epoch are checked before the first chunk, so the
    caller pulls that chunk before sending headers and errors become proper responses.
    With ``signer`` the end line carries the signed head at the last seq sent."""
    with store.read(snapshot=True) as conn:
        space, _ = space_access_txn(conn, p, space_ref, "viewer")
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
        for row in iter_changes_txn(conn, space.id, space.epoch, after, limit):
            last, last_digest = row.seq, row.head_digest
            buf.append('{"batch":' + row.body + ',"seq":' + str(row.seq) + ',"head":"'
                       + row.head_digest + '","accepted_at":' + str(row.accepted_at)
                       + ',"author":' + dumps({"user": row.user_id, "device": row.device_id,
                                               "agent": row.agent})
                       + ',"receipt":' + row.receipt + "}\n")
            if len(buf) >= CHUNK:
                yield "".join(buf).encode()
                buf = []
        end: dict[str, Any] = {"seq": last, "head_seq": space.head_seq, "epoch": space.epoch,
                               "more": last < space.head_seq}
        if signer is not None and root is not None and last == end_seq and last_digest:
            end["head"] = signer.head(conn, space, last, last_digest, root)
        buf.append(dumps({"end": end}) + "\n")
        yield "".join(buf).encode()


def snapshot(store: Store, p: Principal, space_ref: str, signer: Signer | None = None
             ) -> Iterator[bytes]:
    """Yields NDJSON chunks: the head (signed, with the space's signed epoch statements,
    when ``signer``), every live entry at that head, then ``end``."""
    with store.read(snapshot=True) as conn:
        space, _ = space_access_txn(conn, p, space_ref, "viewer")
        head: dict[str, Any] = {"space": space.id, "epoch": space.epoch,
                                "seq": space.head_seq, "digest": space.head_digest}
        # the number of entries that follow: a replica shows progress against it
        first: dict[str, Any] = {"head": head,
                                 "count": count_live_entries_txn(conn, space.id)}
        if signer is not None:
            first["head"] = signer.head(conn, space, space.head_seq, space.head_digest,
                                        signer.root(conn, space, space.head_seq))
            first["epochs"] = [json.loads(t) for t in
                               signed_state.epoch_statements_txn(conn, space.id)]
        yield (dumps(first) + "\n").encode()
        buf: list[str] = []
        count = 0
        for row in iter_live_entries_txn(conn, space.id):
            count += 1
            buf.append('{"entry":' + row.content + ',"version":"' + row.version
                       + '","seq":' + str(row.seq) + "}\n")
            if len(buf) >= CHUNK:
                yield "".join(buf).encode()
                buf = []
        buf.append(dumps({"end": {"count": count}}) + "\n")
        yield "".join(buf).encode()
