"""SQL for a space's access rules (hub/policy.py, hub/admin.py). ``_txn`` functions run
inside a transaction opened by the store; ``rules_read`` returns the statement for
``read_together`` (hub/store/sql.py)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_
from sqlalchemy.engine import Connection

from hub.store.schema import rules
from hub.store.sql import Read, Sql

_RULES = Sql("SELECT id, effect, who, actions, entries, kinds, tags FROM rules "
             "WHERE space_id = :s ORDER BY created_at, id")


def list_rules_txn(conn: Connection, space_id: str) -> list[dict[str, Any]]:
    return rules_of(_RULES.all(conn, {"s": space_id}))


def rules_read(space_id: str) -> Read:
    """The statement of ``list_rules_txn`` (its rows go to ``rules_of``)."""
    return _RULES, {"s": space_id}


def rules_of(rows: list[Any]) -> list[dict[str, Any]]:
    """Rule dicts as ``shared.policy.Rule.from_dict`` takes them; a read rule's ``kinds``
    and ``tags`` (0029) only when it has them."""
    out = []
    for r in rows:
        d = {"id": r[0], "effect": r[1], "who": r[2], "actions": r[3].split(","),
             "entries": r[4]}
        if r[5]:
            d["kinds"] = r[5].split(",")
        if r[6]:
            d["tags"] = r[6].split(",")
        out.append(d)
    return out


_INSERT = Sql("INSERT INTO rules (id, space_id, effect, who, actions, entries, created_at, "
              "kinds, tags) VALUES (:id, :space_id, :effect, :who, :actions, :entries, "
              ":created_at, :kinds, :tags)")


def insert_rule_txn(conn: Connection, **values: Any) -> None:
    """``kinds`` and ``tags`` (a read rule's, comma-separated) default to none."""
    _INSERT.run(conn, {"kinds": None, "tags": None, **values})


def delete_rule_txn(conn: Connection, space_id: str, rule_id: str) -> int:
    return conn.execute(rules.delete().where(and_(rules.c.space_id == space_id,
                                                  rules.c.id == rule_id))).rowcount
