"""SQL for a space's access rules (hub/policy.py, hub/admin.py). ``_txn`` functions run
inside a transaction opened by the store; ``rules_read`` returns the statement for
``read_together`` (hub/store/sql.py)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, insert
from sqlalchemy.engine import Connection

from hub.store.schema import rules
from hub.store.sql import Read, Sql

_RULES = Sql("SELECT id, effect, who, actions, entries FROM rules WHERE space_id = :s "
             "ORDER BY created_at, id")


def list_rules_txn(conn: Connection, space_id: str) -> list[dict[str, Any]]:
    return rules_of(_RULES.all(conn, {"s": space_id}))


def rules_read(space_id: str) -> Read:
    """The statement of ``list_rules_txn`` (its rows go to ``rules_of``)."""
    return _RULES, {"s": space_id}


def rules_of(rows: list[Any]) -> list[dict[str, Any]]:
    return [{"id": r[0], "effect": r[1], "who": r[2], "actions": r[3].split(","),
             "entries": r[4]} for r in rows]


def insert_rule_txn(conn: Connection, **values: Any) -> None:
    conn.execute(insert(rules).values(**values))


def delete_rule_txn(conn: Connection, space_id: str, rule_id: str) -> int:
    return conn.execute(rules.delete().where(and_(rules.c.space_id == space_id,
                                                  rules.c.id == rule_id))).rowcount
