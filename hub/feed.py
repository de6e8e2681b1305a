"""Serving history: changes after a seq and snapshots at one head, as NDJSON lines.

Both read inside one transaction that gives a consistent view (REPEATABLE READ on
PostgreSQL, one deferred read transaction on SQLite's WAL), stream rows with a server-side
cursor and never hold a whole space in memory. The last line (``end``) lets a client tell a
complete stream from a cut one.
"""

from __future__ import annotations

from collections.abc import Iterator

from hub.access import Principal, space_access_txn
from hub.store import queries as q
from hub.store.db import Store
from shared.canonical import dumps
from shared.errors import InvalidRequest, SnapshotRequired
from shared.ids import is_id

CHUNK = 64  # lines per write: fewer, larger writes are much cheaper than one per line


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
            limit: int) -> Iterator[bytes]:
    """Yields NDJSON chunks. Access and epoch are checked before the first chunk, so the
    caller pulls that chunk before sending headers and errors become proper responses."""
    with store.read(snapshot=True) as conn:
        space, _ = space_access_txn(conn, p, space_ref, "viewer")
        if epoch is not None and epoch != space.epoch:
            raise SnapshotRequired("the space is in another epoch; take a snapshot",
                                   {"epoch": space.epoch, "reason": "epoch"})
        if after > space.head_seq:
            raise SnapshotRequired("you are ahead of the hub (was it restored?); take a "
                                   "snapshot", {"epoch": space.epoch, "reason": "ahead"})
        last = after
        buf: list[str] = []
        for row in q.iter_changes_txn(conn, space.id, space.epoch, after, limit):
            last = row.seq
            buf.append('{"batch":' + row.body + ',"seq":' + str(row.seq) + ',"head":"'
                       + row.head_digest + '","accepted_at":' + str(row.accepted_at)
                       + ',"author":' + dumps({"user": row.user_id, "device": row.device_id,
                                               "agent": row.agent}) + "}\n")
            if len(buf) >= CHUNK:
                yield "".join(buf).encode()
                buf = []
        buf.append(dumps({"end": {"seq": last, "head_seq": space.head_seq,
                                  "epoch": space.epoch,
                                  "more": last < space.head_seq}}) + "\n")
        yield "".join(buf).encode()


def snapshot(store: Store, p: Principal, space_ref: str) -> Iterator[bytes]:
    """Yields NDJSON chunks: the head, every live entry at that head, then ``end``."""
    with store.read(snapshot=True) as conn:
        space, _ = space_access_txn(conn, p, space_ref, "viewer")
        head = {"space": space.id, "epoch": space.epoch, "seq": space.head_seq,
                "digest": space.head_digest}
        yield (dumps({"head": head}) + "\n").encode()
        buf: list[str] = []
        count = 0
        for row in q.iter_live_entries_txn(conn, space.id):
            count += 1
            buf.append('{"entry":' + row.content + ',"version":"' + row.version
                       + '","seq":' + str(row.seq) + "}\n")
            if len(buf) >= CHUNK:
                yield "".join(buf).encode()
                buf = []
        buf.append(dumps({"end": {"count": count}}) + "\n")
        yield "".join(buf).encode()
