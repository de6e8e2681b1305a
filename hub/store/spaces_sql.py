"""SQL for the space row (hub/spaces.py, the guard): find, list, create, and the head,
rules version and audit tip a publication advances. ``_txn`` functions run inside a
transaction opened by the store."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, func, insert, select, update
from sqlalchemy.engine import Connection

from hub.store.schema import entries, members, spaces
from hub.store.sql import Sql

SPACE_COLS = ("id, name, epoch, head_seq, head_digest, rules_version, audit_seq, audit_digest,"
               " deleted_at, kinds")


_GET_SPACE = Sql(f"SELECT {SPACE_COLS} FROM spaces WHERE id = :id")


_GET_SPACE_LOCKED = {"sqlite": _GET_SPACE,  # BEGIN IMMEDIATE already serializes writers
                     "postgresql": Sql(f"SELECT {SPACE_COLS} FROM spaces WHERE id = :id "
                                       "FOR UPDATE")}


_FIND_SPACE = Sql(f"SELECT {SPACE_COLS} FROM spaces WHERE id = :ref OR name = :ref")


@dataclass(frozen=True)
class SpaceRow:
    id: str
    name: str
    epoch: str
    head_seq: int
    head_digest: str
    rules_version: int
    audit_seq: int
    audit_digest: str
    deleted_at: int | None = None  # soft-deleted (hub/space_delete.py)
    kinds: str | None = None  # the folder mapping, JSON (``folders``); NULL: the default

    @property
    def folders(self) -> dict[str, str]:
        """The space's folder mapping (shared/kinds.py ``folder_kind``): folder -> kind."""
        return {} if self.kinds is None else dict(json.loads(self.kinds))


def _space_t(row: Any) -> SpaceRow | None:
    return None if row is None else SpaceRow(*row)


def get_space_txn(conn: Connection, space_id: str, *, lock: bool = False) -> SpaceRow | None:
    stmt = _GET_SPACE_LOCKED.get(conn.dialect.name, _GET_SPACE) if lock else _GET_SPACE
    return _space_t(stmt.one(conn, {"id": space_id}))


def deleted_statement_txn(conn: Connection, space_id: str) -> str | None:
    """The hub-signed deletion statement of a deleted space (canonical JSON), else None."""
    return conn.execute(select(spaces.c.deleted_statement).where(
        spaces.c.id == space_id)).scalar()


def find_space_txn(conn: Connection, ref: str) -> SpaceRow | None:
    """A space by id or by name."""
    return _space_t(_FIND_SPACE.one(conn, {"ref": ref}))


def list_spaces_txn(conn: Connection, user_id: str | None) -> list[dict[str, Any]]:
    """Spaces of a user with their role; ``user_id=None`` lists all (for owners)."""
    if user_id is None:
        rows = conn.execute(select(spaces).order_by(spaces.c.name)).all()
        return [{"id": r.id, "name": r.name, "epoch": r.epoch, "seq": r.head_seq, "role": None}
                for r in rows]
    rows = conn.execute(
        select(spaces, members.c.role).join(members, members.c.space_id == spaces.c.id)
        .where(members.c.user_id == user_id).order_by(spaces.c.name)).all()
    return [{"id": r.id, "name": r.name, "epoch": r.epoch, "seq": r.head_seq, "role": r.role}
            for r in rows]


def insert_space_txn(conn: Connection, **values: Any) -> None:
    conn.execute(insert(spaces).values(**values))


_ADVANCE = Sql("UPDATE spaces SET head_seq = :seq, head_digest = :digest, audit_seq = :an, "
               "audit_digest = :ad WHERE id = :id")


def advance_head_and_audit_txn(conn: Connection, space_id: str, seq: int, digest: str,
                               audit_tip: tuple[int, str]) -> None:
    """A publication's one update of the space row: the new head and the audit chain tip."""
    _ADVANCE.run(conn, {"seq": seq, "digest": digest, "an": audit_tip[0], "ad": audit_tip[1],
                        "id": space_id})


_RAISE_PROTOCOL = Sql("UPDATE spaces SET protocol = :p WHERE id = :id AND protocol < :p")
_PROTOCOL = Sql("SELECT protocol FROM spaces WHERE id = :ref OR name = :ref")


def raise_protocol_txn(conn: Connection, space_id: str, protocol: int) -> None:
    """The space now holds what replicas older than ``protocol`` cannot read; never lowered.
    Plain SQL: it runs in the publication's pipeline."""
    _RAISE_PROTOCOL.run(conn, {"p": protocol, "id": space_id})


def space_protocol_txn(conn: Connection, ref: str) -> int | None:
    """The protocol a space (by id or name) requires of its replicas; None: no such space."""
    row = _PROTOCOL.one(conn, {"ref": ref})
    return None if row is None else int(row[0])


def set_head_txn(conn: Connection, space_id: str, seq: int, digest: str,
                 epoch: str | None = None) -> None:
    values: dict[str, Any] = {"head_seq": seq, "head_digest": digest}
    if epoch is not None:
        values["epoch"] = epoch
    conn.execute(update(spaces).where(spaces.c.id == space_id).values(**values))


def set_kinds_txn(conn: Connection, space_id: str, folders: dict[str, str]) -> None:
    """Store the space's folder mapping (empty: back to the default layout)."""
    conn.execute(update(spaces).where(spaces.c.id == space_id).values(
        kinds=json.dumps(folders, sort_keys=True) if folders else None))


def bump_rules_version_txn(conn: Connection, space_id: str) -> None:
    conn.execute(update(spaces).where(spaces.c.id == space_id)
                 .values(rules_version=spaces.c.rules_version + 1))


def live_under_txn(conn: Connection, space_id: str, prefix: str) -> list[tuple[str, str]]:
    """``(entry_id, content)`` of the space's live entries whose id starts with ``prefix``
    (a folder and its ``/``), compared byte for byte (not ``LIKE``, which ignores case)."""
    q = select(entries.c.entry_id, entries.c.content).where(and_(
        entries.c.space_id == space_id, entries.c.deleted.is_(False),
        func.substr(entries.c.entry_id, 1, len(prefix)) == prefix))
    return [(r[0], r[1]) for r in conn.execute(q)]
