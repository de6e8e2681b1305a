"""An agent's page work over the replica (docs/agents.md, "Pages, history and links"): what
the page tools of ``quire mcp`` (replica/mcp/page_tools.py) read and change, with the
agent's own unpublished writes over the replica as everywhere else
(replica/app/agent_session.py).

    current()        one entry as the agent sees it: its own write, else the vault file,
                     else the store's local version
    view()           every live entry as the agent sees it (lists, links, batch reads)
    readable()       inside the agent's read scope (its head's read rules, kept by its
                     sync or its session's first call: ``scope_txn``)? Both of the above,
                     search, bootstrap and history leave out what is not (absent to it)
    put_judged()     a change (an edit, a restored version, a delete) recorded in the
                     agent's overlay only when the rules its own head carries allow it:
                     a refused change is refused at the call and nothing is recorded
    delete()         a tombstone in the overlay; an own create never published is dropped
    revert()         the agent's unpublished changes dropped (the replica is left as it is)
    history_rows()   the store's record of applied batches, newest first: works offline,
                     since this replica joined (earlier: the hub's history)
    people()         display names behind user ids, from the hub (``GET …/people``),
                     remembered in the store for offline answers
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from replica.app.agent_session import view_txn, write_change
from replica.engine.agent_push import access_key
from replica.engine.push import Publisher
from replica.machine.home import SpaceConfig
from replica.store import overlay
from replica.store import store as st
from replica.store.overlay import AgentChange
from replica.store.records import Conflict, EntryState
from replica.vault import markdown as md
from shared.entry import Entry, EntryError, tombstone
from shared.errors import LocalError, NotFound, PolicyDenied, QuireError
from shared.readscope import ReadRule, ReadScope, may_read, may_read_entry, scope_of_head
from shared.wire import Op

PEOPLE_KEY = "agent_people"  # store meta: {user_id: display name} last read from the hub


def local_time(ms: int | None) -> str | None:
    """A hub time (ms since the epoch) in this machine's time zone, to the second."""
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000).astimezone().isoformat(timespec="seconds")


# ---------------------------------------------------------------- what the agent sees


@dataclass
class Current:
    entry: Entry | None  # None: absent (or deleted) for this agent
    state: EntryState
    mine: AgentChange | None
    conflict: Conflict | None


# What an agent reads before the hub has ever told this replica its read rules: nothing. A
# missing answer never grants more (the member's whole view would be a read rule skipped).
UNKNOWN_SCOPE = ReadScope((ReadRule("unknown", "deny", "agents", "*"),))


def scope_txn(conn: Any, agent: str) -> ReadScope:
    """The agent's read scope: the read rules the hub's head gave its delegation, as its
    sync or its session's first call kept them (``access_key``); none kept yet (the hub
    never reached for this agent): ``UNKNOWN_SCOPE``, nothing, until a call reaches it."""
    access = st.get_meta_txn(conn, access_key(agent), None)
    if not isinstance(access, dict):
        return UNKNOWN_SCOPE
    kinds = access.get("kinds")  # the space's folder mapping (headaccess.py, D152)
    return scope_of_head(access.get("rules") or [], (),
                         kinds if isinstance(kinds, dict) else None)


def readable(scope: ReadScope, entry_id: str, *versions: Entry | None) -> bool:
    """May the agent of ``scope`` read ``entry_id``, judged by each live version at hand
    (the hub's and the one it would be shown; every one must be readable)? None at hand:
    by its id."""
    if scope.unrestricted:
        return True
    live = [e for e in versions if e is not None and not e.deleted]
    if not live:
        return may_read(scope, entry_id)
    return all(may_read_entry(scope, entry_id, e.to_dict()) for e in live)


def visible_ids(space: SpaceConfig, agent: str, ids: list[str]) -> list[str]:
    """``ids`` the agent may read (history and activity rows name no other)."""
    store = st.Store(space.store_path)
    try:
        with store.engine.connect() as conn:
            scope = scope_txn(conn, agent)
            if scope.unrestricted:
                return ids
            out = []
            for eid in ids:
                s = st.get_state_txn(conn, eid)
                if readable(scope, eid, s.synced, s.local):
                    out.append(eid)
            return out
    finally:
        store.close()


def current(space: SpaceConfig, agent: str, entry_id: str) -> Current:
    """``entry_id`` as the agent's ``read`` shows it (module docstring); outside its read
    scope, absent."""
    store = st.Store(space.store_path)
    try:
        with store.tx() as conn:
            s, mine = view_txn(conn, agent, entry_id)
            c = st.get_conflict_txn(conn, entry_id)
            scope = scope_txn(conn, agent)
    finally:
        store.close()
    if not readable(scope, entry_id, s.synced, s.local, mine.entry if mine else None):
        return Current(None, EntryState(entry_id, None, None), None, None)
    entry: Entry | None = None
    if mine is not None:
        entry = None if mine.entry.deleted else mine.entry
    else:
        path = md.entry_path(space.vault, entry_id)
        if path.is_file() and not path.is_symlink():
            try:
                entry = md.read_entry(space.vault, entry_id, path.read_bytes())[0]
            except EntryError as e:
                raise LocalError(f"the vault file of {entry_id} is not valid: {e}",
                                 {"line": e.line}) from None
        elif s.local is not None and not s.local.deleted:
            entry = s.local
    return Current(entry, s, mine, c)


def folders(space: SpaceConfig) -> dict[str, str]:
    """The space's folder mapping the last head gave (replica/engine/headaccess.py): the
    kinds the tools filter by are computed under it (D152)."""
    from replica.engine.headaccess import folders_txn

    store = st.Store(space.store_path)
    try:
        with store.engine.connect() as conn:
            return folders_txn(conn)
    finally:
        store.close()


def view(space: SpaceConfig, agent: str) -> dict[str, Entry]:
    """Every live entry, by id, as the agent sees it: the store's local versions (the
    caller folds vault edits in first) with the agent's own writes and deletes over them."""
    store = st.Store(space.store_path)
    try:
        with store.engine.connect() as conn:
            states = st.states_txn(conn)
            mine = overlay.changes_txn(conn, agent) if overlay.present_txn(conn) else {}
            scope = scope_txn(conn, agent)
    finally:
        store.close()
    out = {eid: s.local for eid, s in states.items()
           if s.local is not None and not s.local.deleted}
    for eid, c in mine.items():
        if c.entry.deleted:
            out.pop(eid, None)
        else:
            out[eid] = c.entry
    if not scope.unrestricted:  # outside the agent's read scope: absent to it
        out = {eid: e for eid, e in out.items()
               if readable(scope, eid, states[eid].synced if eid in states else None, e)}
    return out


def backlinks(space: SpaceConfig, agent: str, entry_id: str, view: dict[str, Entry]
              ) -> dict[str, str]:
    """``{id: via}`` of the entries of ``view`` (this agent's) that link to ``entry_id``:
    the store's links index (replica/store/links.py) for the store's entries, and the
    agent's own unpublished writes read where they differ from it."""
    from replica.app.page_text import links_of
    from replica.store import links as index
    from shared.links import Names

    store = st.Store(space.store_path)
    try:
        with store.tx() as conn:
            found = {b["id"]: b["via"]
                     for b in index.backlinks_txn(conn, entry_id, Names(set(view)))}
            mine = overlay.changes_txn(conn, agent) if overlay.present_txn(conn) else {}
    finally:
        store.close()
    for eid in mine:
        found.pop(eid, None)
        e = view.get(eid)
        if e is not None and eid != entry_id:
            via = next((t["via"] for t in links_of(e, set(view)) if t["id"] == entry_id), None)
            if via is not None:
                found[eid] = via
    return found


# ---------------------------------------------------------------- changes, judged at the call


def judge(space: SpaceConfig, agent: str, entry: Entry, default_role: str
          ) -> dict[str, Any] | None:
    """Would this agent's sync keep ``entry`` back? The same check its publication runs
    (replica/engine/agent_push.py): the role and rules the hub gave this agent's head,
    else ``default_role`` (its delegation's scope); the hub still judges again."""
    store = st.Store(space.store_path)
    try:
        access = store.get_meta(access_key(agent)) or {"role": default_role}
        with store.engine.connect() as conn:
            s = st.get_state_txn(conn, entry.id)
        base = s.synced.version if s.synced is not None else None
        return Publisher.local_denial(access, EntryState(entry.id, s.synced, entry),
                                      Op(entry, base), store.synced_guardrails)
    finally:
        store.close()


def _refuse(refusal: dict[str, Any], what: str) -> PolicyDenied:
    from replica.app.proposals import PROPOSE_HINT

    return PolicyDenied(f"{what} refused by the space rules for this agent: "
                        f"{refusal.get('reason') or refusal.get('message')}; nothing was "
                        f"recorded. Instead: {PROPOSE_HINT}",
                        {"denied": [refusal], "next": PROPOSE_HINT})


def put_judged(space: SpaceConfig, agent: str, entry: Entry, *, expected: str | None,
               default_role: str, session: str | None, tool: str, what: str
               ) -> tuple[bool, AgentChange]:
    """Record ``entry`` as the agent's change (``write_change``) when its rules allow it;
    ``PolicyDenied`` (nothing recorded) when they do not."""
    refusal = judge(space, agent, entry, default_role)
    if refusal is not None:
        raise _refuse(refusal, what)
    return write_change(space, agent, entry, expected=expected, session=session, tool=tool,
                        now=int(time.time() * 1000))


def delete(space: SpaceConfig, agent: str, entry_id: str, *, expected: str | None,
           default_role: str, session: str | None, tool: str) -> dict[str, Any]:
    """The agent deletes ``entry_id``: its own create that never reached the hub is simply
    dropped; anything else becomes a tombstone in its overlay, published by its sync.
    Refused at the call (nothing recorded) when the rules refuse the delete, when the
    entry is in conflict, absent, or not at ``expected``."""
    cur = current(space, agent, entry_id)
    if cur.entry is None:
        raise NotFound(f"no entry {entry_id} to delete (absent, or already deleted)")
    if expected is not None and expected != cur.entry.version:
        from shared.errors import InvalidRequest

        raise InvalidRequest(f"{entry_id} changed since you read it (expected_version does "
                             "not match)", {"current_version": cur.entry.version})
    synced = cur.state.synced
    if cur.mine is not None and (synced is None or synced.deleted):
        dropped = revert(space, agent, [entry_id])
        return {"id": entry_id, "deleted": True, "published": False,
                "how": "dropped your unpublished create (it never reached the hub)",
                "reverted": dropped["reverted"]}
    created, change = put_judged(space, agent, tombstone(entry_id), expected=None,
                                 default_role=default_role, session=session, tool=tool,
                                 what=f"deleting {entry_id}")
    return {"id": entry_id, "deleted": True, "published": False,
            "version": change.entry.version,
            "how": "a delete kept as your change; call sync to publish it"}


def revert(space: SpaceConfig, agent: str, entry_ids: list[str] | None) -> dict[str, Any]:
    """Drop the agent's unpublished changes of ``entry_ids`` (None: all of them). The
    replica and the vault are not touched: what the agent sees again is the replica's
    version. An entry with no change of this agent is listed in ``not_found``."""
    store = st.Store(space.store_path)
    try:
        overlay.ensure(store)
        with store.tx() as conn:
            mine = overlay.changes_txn(conn, agent)
            ids = sorted(mine) if entry_ids is None else list(dict.fromkeys(entry_ids))
            gone = []
            for eid in ids:
                c = mine.get(eid)
                if c is not None:
                    overlay.drop_change_txn(conn, agent, eid)
                    gone.append({"id": eid, "state": c.state, "version": c.entry.version,
                                 "was": "delete" if c.entry.deleted else (
                                     "create" if c.base is None else "edit")})
    finally:
        store.close()
    return {"reverted": gone, "not_found": [e for e in ids if e not in mine]}


# ---------------------------------------------------------------- history


def history_rows(space: SpaceConfig, *, entry_id: str | None, before: int | None,
                 limit: int) -> list[dict[str, Any]]:
    """Applied batches from the store, newest first (``n`` below ``before``), those that
    touched ``entry_id`` when given; snapshots too (their entries not listed)."""
    sql = ("SELECT n, epoch, seq, replica_id, author, accepted_at, kind, entries FROM history"
           " WHERE 1 = 1")
    params: list[Any] = []
    if before is not None:
        sql += " AND n < ?"
        params.append(before)
    if entry_id is not None:
        sql += " AND entries LIKE ?"
        params.append("%" + json.dumps(entry_id) + "%")
    # '_' in an id matches any one character: a few more rows, filtered exactly below
    sql += " ORDER BY n DESC LIMIT ?"
    params.append(limit + 50)
    out = []
    store = st.Store(space.store_path)
    try:
        with store.engine.connect() as conn:
            rows = conn.execute(sql, tuple(params)).fetchall()
    finally:
        store.close()
    for r in rows:
        ids = json.loads(r.entries)
        if entry_id is not None and entry_id not in ids:
            continue
        out.append({"n": r.n, "epoch": r.epoch, "seq": r.seq, "kind": r.kind,
                    "replica_id": r.replica_id, "accepted_at": r.accepted_at,
                    "author": json.loads(r.author) if r.author else None,
                    "entries": ids if r.kind != "snapshot" else [], "entry_count": len(ids)})
    return out[:limit]


def change_times(space: SpaceConfig) -> dict[str, int]:
    """When each entry last changed in a batch this replica applied (ms): the date range
    of a search. Entries seen only in a snapshot have no time here."""
    out: dict[str, int] = {}
    store = st.Store(space.store_path)
    try:
        with store.engine.connect() as conn:
            for r in conn.execute("SELECT entries, accepted_at FROM history WHERE kind !="
                                  " 'snapshot' AND accepted_at IS NOT NULL ORDER BY n"):
                for eid in json.loads(r.entries):
                    out[eid] = r.accepted_at
    finally:
        store.close()
    return out


def people(space: SpaceConfig, client: Any | None) -> dict[str, str]:
    """Display names by user id: asked of the hub with ``client`` (the session's, carrying
    its delegation) and remembered in the store; without a client, or when the hub does
    not answer, what was remembered."""
    store = st.Store(space.store_path)
    try:
        names: dict[str, str] = dict(store.get_meta(PEOPLE_KEY) or {})
        if client is None:
            return names
        from urllib.parse import quote

        try:
            with client:
                doc = client.admin_get(f"/v1/spaces/{quote(space.space_id, safe='')}/people",
                                       {})
        except (QuireError, OSError):
            return names
        fresh = {str(p.get("user_id") or p.get("user")): str(p["name"])
                 for p in doc.get("people") or [] if p.get("name")}
        if fresh and any(names.get(k) != v for k, v in fresh.items()):
            names.update(fresh)
            store.set_meta(PEOPLE_KEY, names)
        return names
    finally:
        store.close()
