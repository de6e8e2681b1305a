"""A replica's scope (``quire scope show|add|remove|set``, ``quire join --only``;
docs/replica.md, "Scoped and partial replicas"): the globs of entry ids a partial replica holds, kept
in its store (``only``, replica/trust/scoped.py), and what it shows of its read scope.

    set_only ── the globs checked (shared/readscope.py ``check_only``), written under the
             │  space lock
             └─ the next sync: the scope's fingerprint changed → a snapshot of the new scope
                (replica/engine/pull.py): widening brings what is new to the replica,
                narrowing removes files (an unpublished edit outside it held, reported)

The hub intersects the globs with the member's read scope; the replica verifies the
answers against the signed state root as a scoped reader does (replica/engine/scoped.py).
"""

from __future__ import annotations

from typing import Any

from replica.machine.home import SpaceConfig, space_lock
from shared.errors import InvalidRequest

VERBS = ("add", "remove", "set")


def _open(space: SpaceConfig) -> Any:
    from replica.store.store import Store

    return Store(space.store_path)


def current(space: SpaceConfig) -> tuple[str, ...]:
    """The globs the replica holds now (empty: everything it may read)."""
    from replica.engine.scoped import only_of

    store = _open(space)
    try:
        return only_of(store)
    finally:
        store.close()


def changed(now: tuple[str, ...], verb: str, patterns: list[str]) -> tuple[str, ...]:
    """Pure: the globs after ``verb`` (add, remove, set) with ``patterns``; refuses what
    would do nothing or could not be meant (``InvalidRequest``)."""
    from shared.readscope import check_only

    if verb == "add":
        if not now:
            raise InvalidRequest("this replica holds everything you may read already; to "
                                 "hold only part of it: quire scope set PATTERN…",
                                 {"reason": "whole"})
        new = set(now) | set(patterns)
    elif verb == "remove":
        missing = sorted(set(patterns) - set(now))
        if missing:
            raise InvalidRequest(f"not in this replica's scope: {', '.join(missing)}",
                                 {"reason": "not_in_scope", "only": list(now)})
        new = set(now) - set(patterns)
        if not new:
            raise InvalidRequest("that would leave nothing; to hold everything you may read "
                                 "again: quire scope set --all", {"reason": "empty"})
    else:
        new = set(patterns)
    try:
        return check_only(new)
    except ValueError as e:
        raise InvalidRequest(str(e), {"reason": "bad_pattern"}) from None


def set_only(space: SpaceConfig, only: tuple[str, ...]) -> None:
    """Write the replica's globs (empty: everything), under the space lock."""
    from replica.trust.scoped import ONLY

    with space_lock(space, wait=True):
        store = _open(space)
        try:
            store.set_meta(ONLY, list(only) if only else None)
        finally:
            store.close()


def show(space: SpaceConfig) -> dict[str, Any]:
    """What this replica holds: its globs, the read rules the hub applies to this member
    (as its last sync's head said), how many entries it holds, and the edits held because
    they left the scope."""
    from replica.engine.scoped import UNREADABLE, held_scope, only_of
    from shared.readscope import scope_of_head

    store = _open(space)
    try:
        only = only_of(store)
        access = store.get_meta("access") or {}
        rules = scope_of_head(access.get("rules") or [])
        held = sum(1 for s in store.states().values()
                   if s.synced is not None and not s.synced.deleted)
        left = sorted(c.entry_id for c in store.conflicts() if UNREADABLE in c.fields)
        fingerprint = held_scope(store)
    finally:
        store.close()
    return {"space": {"id": space.space_id, "name": space.name}, "only": list(only),
            "read_rules": rules.describe(), "entries": held, "held_outside": left,
            "scope": fingerprint}


def human(doc: dict[str, Any]) -> str:
    lines = [f"scope of {doc['space']['name']}:"]
    lines.append("  holds: " + (", ".join(doc["only"]) if doc["only"]
                                else "everything you may read"))
    lines.append("  read rules for you: " + ("; ".join(doc["read_rules"])
                                             if doc["read_rules"] else "none (you read all)"))
    lines.append(f"  entries here: {doc['entries']}")
    for eid in doc["held_outside"]:
        lines.append(f"  held (outside the scope, your unpublished edit): {eid}")
    return "\n".join(lines)
