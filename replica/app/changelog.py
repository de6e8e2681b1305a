"""The space's changes for people: ``quire log``, and the lines ``quire sync`` (and the
watcher) print for what they pulled and pushed.

    store.history (one row per applied batch, its detail: replica/engine/changes.py)
        ──► read(): newest first, filtered by entry, time or seq, author, agent
    SyncReport.changes (what one sync applied) ─┐
                                                ├─► line(): local time, who, what, provenance
    names: the members' display names ──────────┘   ("2026-12-03 14:02 CET  Bob for agent
        (meta "people", asked of the hub only        scout  edited page/deploy (+1 -0 lines)")
         when an author is not known yet)

Works offline from what this replica pulled and pushed; history from before its first
snapshot (its join, or a new epoch) is the hub's (``quire read ID --remote --history``).
Human lines carry names and local times, never ids; ``to_json`` keeps the ids and UTC
milliseconds for ``--json``.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

from replica.machine.home import Home, SpaceConfig
from replica.store import store as st
from replica.store.store import Store
from shared.errors import InvalidRequest, QuireError
from shared.humanize import stamp

PEOPLE = "people"  # store meta: {user_id: display name}, as the hub's people read said
NAMES_TIMEOUT = 5.0  # s: names are a nicety; an offline log does not wait for them
MAX_ROWS = 100_000  # history rows looked at by one log (newest first)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


# ---------------------------------------------------------------- names


def names(store: Store) -> dict[str, str]:
    got = store.get_meta(PEOPLE)
    return dict(got) if isinstance(got, dict) else {}


def refresh_names(home: Home, space: SpaceConfig, store: Store) -> dict[str, str]:
    """Ask the hub for the members' display names (``GET …/people``) and keep them; the
    names kept before when the hub cannot be asked (offline: the log still works)."""
    from urllib.parse import quote

    from replica.app import service

    hub = home.hub(space.hub_id)
    if hub is None:
        return names(store)
    try:
        with service.open_client(hub, timeout=NAMES_TIMEOUT) as c:
            doc = c.admin_get(f"/v1/spaces/{quote(space.space_id, safe='')}/people")
    except (QuireError, OSError):
        return names(store)
    fresh = {p["user_id"]: _CONTROL.sub("", str(p["name"]))[:100]
             for p in doc.get("people") or [] if isinstance(p, dict) and p.get("user_id")}
    kept = dict(names(store), **fresh)  # a former member keeps the name known before
    if kept != names(store):
        store.set_meta(PEOPLE, kept)
    return kept


def names_for(home: Home, space: SpaceConfig, changes: list[dict[str, Any]]
              ) -> dict[str, str]:
    """The names to show ``changes`` with: the kept ones, refreshed from the hub only when
    an author is not among them."""
    mine = me(home, space)
    store = Store(space.store_path)
    try:
        known = names(store)
        users = {(c.get("author") or {}).get("user") or (mine if c.get("own") else None)
                 for c in changes} - {None}
        if users - set(known):
            known = refresh_names(home, space, store)
        return known
    finally:
        store.close()


def me(home: Home, space: SpaceConfig) -> str | None:
    hub = home.hub(space.hub_id)
    return hub.user_id if hub else None


# ---------------------------------------------------------------- reading


def _row_change(row: dict[str, Any], replica_id: str) -> dict[str, Any] | None:
    from replica.engine.changes import change

    if row["kind"] not in ("batch", "push") and not row["detail"]:
        return None  # a snapshot: no change of its own (one after a purge says what went)
    own = row["replica_id"] == replica_id
    detail = row["detail"] or {"ops": [{"id": e, "action": "changed"}
                                       for e in row["entries"] or []]}
    return change("pushed" if own else "pulled", epoch=row["epoch"], seq=row["seq"],
                  at=row["accepted_at"], author=row["author"], own=own, detail=detail)


def parse_since(text: str, now: datetime | None = None) -> tuple[int | None, int | None]:
    """``--since``: a seq (``12``), a duration back (``30m``, ``2h``, ``3d``), a local date
    (``2026-12-03``) or date and time (``2026-12-03 14:00``, ``2026-12-03T14:00``).
    (seq, Unix ms): one of them set."""
    t = text.strip()
    if t.isdigit():
        return int(t), None
    m = re.fullmatch(r"(\d+)\s*([smhdw])", t)
    now = now or datetime.now().astimezone()
    if m:
        unit = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
        back = timedelta(**{unit[m.group(2)]: int(m.group(1))})
        return None, int((now - back).timestamp() * 1000)
    try:
        when = datetime.fromisoformat(t.replace(" ", "T", 1))
    except ValueError as e:
        raise InvalidRequest(f"--since takes a seq, a duration (30m, 2h, 3d) or a local "
                             f"date and time (2026-12-03 14:00); not {text!r}",
                             {"reason": "bad_since"}) from e
    if when.tzinfo is None:
        when = when.astimezone()  # local time
    return None, int(when.timestamp() * 1000)


def read(space: SpaceConfig, store: Store, *, entries: list[str] | None = None,
         since: str | None = None, author: str | None = None, agent: str | None = None,
         names: dict[str, str] | None = None, me: str | None = None,
         limit: int = 50) -> tuple[list[dict[str, Any]], bool]:
    """The space's changes, newest first, as this replica applied them; (changes, more):
    ``more`` when older ones matched beyond ``limit``. ``entries``: ids, or prefixes ending
    in ``/``; ``author``: a display name (``me`` for this member); ``agent``: an agent name."""
    since_seq, since_ms = parse_since(since) if since else (None, None)
    head = store.head()
    known = names or {}
    out: list[dict[str, Any]] = []
    before: int | None = None
    looked = 0
    with store.snapshot() as conn:
        while looked < MAX_ROWS:
            rows = st.history_page_txn(conn, before_n=before, limit=500)
            if not rows:
                break
            looked += len(rows)
            before = rows[-1]["n"]
            for row in rows:
                if since_seq is not None and head is not None and (
                        row["epoch"] != head.epoch or row["seq"] < since_seq):
                    return out, False
                if since_ms is not None and row["accepted_at"] is not None and (
                        row["accepted_at"] < since_ms):
                    return out, False
                c = _row_change(row, space.replica_id)
                if c is None or not _matches(c, entries, author, agent, known, me):
                    continue
                if entries:
                    c["ops"] = [o for o in c["ops"] if _op_matches(o, entries)]
                if len(out) == limit:
                    return out, True
                out.append(c)
    return out, False


def _op_matches(op: dict[str, Any], entries: list[str]) -> bool:
    ids = {op["id"], op.get("from")} - {None}
    return any(i == e or (e.endswith("/") and i.startswith(e)) for i in ids for e in entries)


def _agent(c: dict[str, Any]) -> str | None:
    a = (c.get("author") or {}).get("agent") or (c.get("provenance") or {}).get("agent")
    return str(a) if a else None


def _matches(c: dict[str, Any], entries: list[str] | None, author: str | None,
             agent: str | None, known: dict[str, str], me: str | None) -> bool:
    if entries and not any(_op_matches(o, entries) for o in c["ops"]):
        return False
    if author is not None:
        user = (c.get("author") or {}).get("user") or (me if c["own"] else None)
        want = author.casefold()
        if want in ("me", "you"):
            if not (c["own"] or (user is not None and user == me)):
                return False
        elif (known.get(user or "") or "").casefold() != want:
            return False
    if agent is not None and (_agent(c) or "").casefold() != agent.casefold():
        return False
    return True


# ---------------------------------------------------------------- lines for people


def who(c: dict[str, Any], names: dict[str, str], me: str | None) -> str:
    """The member's display name (``you`` for this member when the hub has not said it),
    with the agent that wrote it on their behalf."""
    user = (c.get("author") or {}).get("user")
    if user is None and not c.get("own") and any(o.get("action") == "purged"
                                                 for o in c.get("ops") or []):
        return "an admin"  # a purge: the epoch statement names no member
    if c.get("own") or (user is not None and user == me):
        name = names.get(user or me or "") or "you"
    else:
        name = names.get(user or "") or "a member"
    agent = _agent(c)
    return f"{name} for agent {_CONTROL.sub('', agent)[:64]}" if agent else name


def _lines(n: int) -> str:
    return f"{n} line" if n == 1 else f"{n} lines"


def what(op: dict[str, Any]) -> str:
    """``edited page/deploy (+1 -0 lines; title)``, ``renamed page/a to page/b``, …"""
    action, eid = op.get("action"), op["id"]
    if action == "reverted":
        how = {"deleted": "deleted again", "created": "brought back"}.get(op.get("how", ""),
                                                                         "restored")
        return f"reverted {eid} ({how})"
    if action == "created":
        return f"created {eid} ({_lines(op.get('added', 0))})"
    if action == "deleted":
        return f"deleted {eid}"
    if action == "renamed":
        return f"renamed {op.get('from')} to {eid}"
    if action == "purged":
        return f"purged {eid}"
    if action == "edited":
        parts = []
        if op.get("added") or op.get("removed"):
            parts.append(f"+{op.get('added', 0)} -{op.get('removed', 0)} lines")
        if op.get("fields"):
            parts.append(", ".join(op["fields"]))
        return f"edited {eid}" + (f" ({'; '.join(parts)})" if parts else " (no change)")
    return f"changed {eid}"


def provenance(c: dict[str, Any]) -> str:
    """The batch's provenance for people: tool, client, model and note (never a session
    id); empty when there is none."""
    p = c.get("provenance") or {}
    parts = [f"{k} {_CONTROL.sub('', str(p[k]))[:80]}" for k in ("tool", "client", "model")
             if p.get(k)]
    if p.get("note"):
        parts.append(repr(_CONTROL.sub("", str(p["note"]))[:120]))
    return f"  [{'; '.join(parts)}]" if parts else ""


def when(c: dict[str, Any]) -> str:
    at = c.get("at")
    return stamp(at) if isinstance(at, int) else "(time unknown)"


def line(c: dict[str, Any], names: dict[str, str], me: str | None) -> str:
    """One line per batch: local time, who, what it did to each page, provenance."""
    ops = ", ".join(what(o) for o in c["ops"]) or "no change"
    return f"{when(c)}  {who(c, names, me)}  {ops}{provenance(c)}"


def lines(changes: list[dict[str, Any]], names: dict[str, str], me: str | None, *,
          prefix: str = "") -> list[str]:
    """What a sync (or the watcher) pulled and pushed, one line per batch, oldest first,
    each starting with ``pulled`` or ``pushed``: the shared formatter of the front ends."""
    return [f"{prefix}{c['direction']}: {line(c, names, me)}" for c in changes]


def to_json(c: dict[str, Any], names: dict[str, str], me: str | None) -> dict[str, Any]:
    """``--json``: ids kept, the author's name beside them, ``at`` in UTC milliseconds."""
    user = (c.get("author") or {}).get("user") or (me if c.get("own") else None)
    return dict(c, author=dict(c.get("author") or {}, user=user, agent=_agent(c),
                               name=names.get(user or "")))
