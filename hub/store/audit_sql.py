"""SQL for the audit chains (hub/audit.py): appending an event, moving a chain's tip (the
hub's in ``hub_state``, a space's on its row) and reading events back.
``_txn`` functions run inside a transaction opened by the store."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.engine import Connection

from hub.store.schema import audit, hub_state, spaces
from hub.store.sql import Sql


def advance_audit_tip_txn(conn: Connection, chain: str, n: int, digest: str) -> None:
    if chain == "hub":
        conn.execute(update(hub_state).where(hub_state.c.id == 1)
                     .values(audit_seq=n, audit_digest=digest))
    else:
        conn.execute(update(spaces).where(spaces.c.id == chain)
                     .values(audit_seq=n, audit_digest=digest))


_AUDIT_COLS = ("chain", "n", "at", "action", "actor", "details", "prev", "digest")


_INSERT_AUDIT = Sql(f"INSERT INTO audit ({', '.join(_AUDIT_COLS)}) "
                    f"VALUES ({', '.join(':' + c for c in _AUDIT_COLS)})")


def insert_audit_txn(conn: Connection, **values: Any) -> None:
    _INSERT_AUDIT.run(conn, values)


def iter_audit_txn(conn: Connection, since: int = 0, chain: str | None = None) -> Iterator[Any]:
    q = select(audit).where(audit.c.at >= since)
    if chain is not None:
        q = q.where(audit.c.chain == chain)
    yield from conn.execution_options(yield_per=500).execute(q.order_by(audit.c.chain,
                                                                        audit.c.n))
