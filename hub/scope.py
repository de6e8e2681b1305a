"""Read scopes on the hub (docs/security.md, "Read rules"; decisions.md D142): the scope of
a reader, read in the very transaction that builds its answer, and which entries it may
see. The decision itself is ``shared/readscope.py`` (``may_read``); this module only
gathers what it needs: the space's rules and the entries' tags and kinds at the answer's
head.

    scope_txn(conn, p, space, role)          the reader's ReadScope, from the rules read in
                                             this transaction: a rule committed before the
                                             answer's snapshot began is in force for it
    visible_txn(conn, space_id, scope, ids)  the ids of ``ids`` it may read; tags are read
                                             only for the ids a tag rule could decide
    Filter                                   the same, for a stream of pages (pulls)

Who calls it: hub/reads.py (list, get, history, diff, search, batch), hub/feed.py (changes
and snapshots), hub/api/events.py (through ``scope_txn``: a scoped reader's head events
carry no changes), hub/conflict_reports.py, hub/quotas.py (usage), hub/guard.py (a write to
an entry outside the writer's scope is refused). An entry is judged whole, by its id, kind
and tags at the head the answer is read at; a deleted entry by the tags of its last live
version, read from the read index; when those cannot be read the entry is not shown (a
scope fails closed).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from hub.access import space_access_txn
from hub.store import read_index as ri
from hub.store.batches import current_contents_txn, iter_live_entries_txn
from hub.store.principals import list_members_txn
from hub.store.rules import list_rules_txn
from shared.entry import MAX_TAG_LEN
from shared.errors import InvalidRequest, NotFound, PolicyDenied
from shared.ids import is_kind
from shared.policy import Actor
from shared.readscope import (
    EVERYTHING,
    READ,
    ReadScope,
    content_matters,
    is_read_rule,
    may_read,
    may_read_entry,
    read_scope,
)

__all__ = ["EVERYTHING", "READ", "ReadScope", "actor_of", "check_writes_txn", "entries_txn",
           "every_scope",
           "is_read_rule", "parse_conditions", "read_impact_txn", "readable_content",
           "scope_doc_txn", "scope_of_rules", "scope_txn", "show_scope", "show_scope_txn",
           "visible_txn"]

LAST_LIVE_LOOKBACK = 20  # history rows read to find a deleted entry's last live version


def actor_of(p: Any, role: str | None) -> Actor:
    """The reader as the rules see it: its user, its role here, its agent if delegated."""
    return Actor(p.user_id, role, p.agent)


def scope_of_rules(rules: list[dict[str, Any]], actor: Actor,
                   folders: dict[str, str] | None = None) -> ReadScope:
    """The scope the space's ``rules`` (as stored) give ``actor``, kinds judged under the
    space's folder mapping ``folders`` (its row: ``space.folders``, D152)."""
    return read_scope(rules, actor, folders)


@dataclass
class ScopeHooks:
    """Test seam: ``read(space_id)`` runs right after a reader's scope was read, inside the
    transaction that builds its answer (a test commits a rule change there)."""

    read: Callable[[str], None] | None = None


HOOKS = ScopeHooks()


def scope_txn(conn: Any, p: Any, space: Any, role: str | None, only: tuple[str, ...] = ()
              ) -> ReadScope:
    """The reader's scope in ``space``, from the rules as this transaction reads them and
    the folder mapping of ``space`` (its row, read in this same transaction: a remap
    committed before the answer's snapshot began is in force for it, as a rule is);
    ``only``: the globs a partial replica holds (pulls and events), intersected with it."""
    scope = scope_of_rules(list_rules_txn(conn, space.id), actor_of(p, role),
                           space.folders).narrowed(only)
    if HOOKS.read is not None:
        HOOKS.read(space.id)
    return scope


def _last_live_txn(conn: Any, space_id: str, entry_id: str) -> dict[str, Any] | None:
    """A deleted entry's last live version (the read index's history), or None when it
    cannot be read (not indexed yet, or purged)."""
    for row in ri.history_txn(conn, space_id, entry_id, LAST_LIVE_LOOKBACK):
        if row.deleted:
            continue
        return ri.put_in_batch_txn(conn, space_id, row.src_epoch, row.src_seq, entry_id)
    return None


def entries_txn(conn: Any, space_id: str, ids: Iterable[str],
                known: dict[str, dict[str, Any]] | None = None
                ) -> dict[str, dict[str, Any] | None]:
    """Each id's content at the head this transaction reads, as a read rule judges it (a
    deleted entry: its last live version; ``known``: contents the caller already holds,
    e.g. live ones it read); None: not known (treated as out of scope)."""
    out: dict[str, dict[str, Any] | None] = dict(known or {})
    need = [i for i in ids if i not in out]
    if not need:
        return out
    live = current_contents_txn(conn, space_id, need)
    for eid in need:
        out[eid] = json.loads(live[eid]) if eid in live else _last_live_txn(conn, space_id,
                                                                             eid)
    return out


def visible_txn(conn: Any, space_id: str, scope: ReadScope, ids: Iterable[str],
                known: dict[str, dict[str, Any]] | None = None) -> set[str]:
    """The ids of ``ids`` the reader of ``scope`` may read at this transaction's head.
    ``known``: contents of some of them at that head, already read (live ones). Content is
    read only for the ids a rule with tags or kinds could decide."""
    wanted = list(dict.fromkeys(ids))
    if scope.unrestricted:
        return set(wanted)
    out = set()
    by_content = []
    for eid in wanted:
        if content_matters(scope, eid):
            by_content.append(eid)
        elif may_read(scope, eid):
            out.add(eid)
    if by_content:
        got = entries_txn(conn, space_id, by_content, known)
        out |= {eid for eid in by_content
                if (e := got.get(eid)) is not None and may_read_entry(scope, eid, e)}
    return out


def readable_content(scope: ReadScope, entry_id: str, content: str) -> bool:
    """``may_read`` of a live entry whose canonical JSON is at hand."""
    return scope.unrestricted or may_read_entry(scope, entry_id, json.loads(content))


def check_writes_txn(conn: Any, space_id: str, ops: Any, current: dict[str, tuple[str, bool]],
                     rules: list[dict[str, Any]], p: Any, role: str | None,
                     folders: dict[str, str] | None = None) -> None:
    """Refuse a batch that writes an entry outside the writer's read scope (the guard, while
    preparing; at commit the rules version, the role and every base are compared again, so
    a scope that changed since is seen there): the entry as it would be after the op, and
    the entry the hub holds now, must both be in scope. Nothing of a hidden entry is said
    but its id, which the writer named."""
    scope = scope_of_rules(rules, actor_of(p, role), folders)
    if scope.unrestricted:
        return
    held = visible_txn(conn, space_id, scope, [op.entry_id for op in ops
                                               if op.entry_id in current])
    denied = []
    for op in ops:
        eid = op.entry_id
        now_ok = eid not in current or eid in held
        after_ok = now_ok if op.entry.deleted else may_read_entry(scope, eid,
                                                                  op.entry.to_dict())
        if not (now_ok and after_ok):
            denied.append({"id": eid, "action": "delete" if op.entry.deleted else "put",
                           "reason": f"{eid} is outside what the space rules let you read, "
                                     "and you write only what you may read"})
    if denied:
        raise PolicyDenied(f"{len(denied)} op(s) write outside your read scope; the whole "
                           f"batch was refused: {denied[0]['reason']}",
                           {"denied": denied, "reason": "read_scope"})


RULE_LIST_MAX = 240  # rules.kinds and rules.tags (0029): comma-separated, this many characters


def parse_conditions(body: dict[str, Any], actions: list[str]) -> dict[str, list[str]]:
    """A rule's ``kinds`` and ``tags`` (hub/admin.py ``parse_rule``): lists of kind words
    and of tags, for a read rule only (its actions are exactly ``read``)."""
    out: dict[str, list[str]] = {}
    for field, ok in (("kinds", is_kind), ("tags", _is_tag)):
        v = body.get(field)
        if v is None or v == []:
            continue
        if actions != [READ]:
            raise InvalidRequest(f"{field} are for read rules only (actions: [read])")
        if not (isinstance(v, list) and all(isinstance(x, str) and ok(x) for x in v)
                and len(set(v)) == len(v) and len(",".join(v)) <= RULE_LIST_MAX):
            raise InvalidRequest(f"{field} must be a list of distinct "
                                 + ("kind words" if field == "kinds" else "tags")
                                 + f", at most {RULE_LIST_MAX} characters together")
        out[field] = list(v)
    if READ in actions and actions != [READ]:
        raise InvalidRequest("a read rule names only read (write actions in a rule of their "
                             "own)")
    return out


_TAG = re.compile(r"^[^\s,\[\]{}#][^\s,\[\]{}]*$")  # as an entry's tags (shared/entry.py)


def _is_tag(s: str) -> bool:
    return len(s) <= MAX_TAG_LEN and bool(_TAG.match(s))


# ---------------------------------------------------------------- what a reader may read

ANY_AGENT = "*"  # a preview's stand-in for any agent of a member that no rule names
SAMPLE = 20  # ids an answer names of what is readable or hidden (the counts are whole)
PREVIEW_ENTRIES = 20_000  # live entries a preview judges (larger spaces: the first these)


def _live_txn(conn: Any, space_id: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for row in iter_live_entries_txn(conn, space_id):
        e = json.loads(row.content)
        out.append((row.entry_id, {"tags": e.get("tags", []), "meta": e.get("meta", {})}))
        if len(out) >= PREVIEW_ENTRIES:
            break
    return out


def _judge(scope: ReadScope, live: list[tuple[str, dict[str, Any]]]) -> set[str]:
    return {eid for eid, e in live if may_read_entry(scope, eid, e)}


def scope_doc_txn(conn: Any, space: Any, user: dict[str, Any], agent: str | None,
                  rules: list[dict[str, Any]], live: list[tuple[str, dict[str, Any]]]
                  ) -> dict[str, Any]:
    """What ``user`` (a member row: user_id, name, role), or its agent ``agent``, may read
    under ``rules``: the read rules that apply, and the live entries in and out of scope."""
    role = user["role"]
    if agent is not None and role == "admin":
        role = "editor"  # an agent acts as an editor at most (hub/access.py)
    scope = read_scope(rules, Actor(user["user_id"], role, agent), space.folders)
    seen = _judge(scope, live)
    hidden = sorted(eid for eid, _ in live if eid not in seen)
    return {"user_id": user["user_id"], "name": user["name"], "role": role, "agent": agent,
            "rules": scope.describe(), "unrestricted": scope.unrestricted,
            "readable": len(seen), "hidden": len(hidden),
            "readable_sample": sorted(seen)[:SAMPLE], "hidden_sample": hidden[:SAMPLE],
            "judged": len(live)}


def read_impact_txn(conn: Any, space: Any, before: list[dict[str, Any]],
                    after: list[dict[str, Any]], folders: dict[str, str] | None = None
                    ) -> list[dict[str, Any]]:
    """A rule change's preview: for each member (and each agent a read rule names, under
    each member), the live entries it would stop and start reading. Only who changes.
    ``folders``: the folder mapping after the change (a remap's preview, the rules the
    same; default: the space's own)."""
    now = space.folders
    will_map = now if folders is None else folders
    live = _live_txn(conn, space.id)
    reads = [r for r in [*before, *after] if is_read_rule(r)]
    agents = sorted({r["who"][len("agent:"):] for r in reads
                     if str(r["who"]).startswith("agent:")})
    if any(r["who"] == "agents" for r in reads):
        agents.append(ANY_AGENT)  # every agent a rule does not name, under each member
    out = []
    for m in list_members_txn(conn, space.id):
        for agent in [None, *agents]:
            role = m["role"] if agent is None or m["role"] != "admin" else "editor"
            actor = Actor(m["user_id"], role, agent)
            was = _judge(read_scope(before, actor, now), live)
            will = _judge(read_scope(after, actor, will_map), live)
            loses, gains = sorted(was - will), sorted(will - was)
            if loses or gains:
                out.append({"user_id": m["user_id"], "name": m["name"], "role": role,
                            "agent": agent, "loses": len(loses), "gains": len(gains),
                            "loses_sample": loses[:SAMPLE], "gains_sample": gains[:SAMPLE]})
    return out


def show_scope_txn(conn: Any, space: Any, who: str, as_user: str | None,
                   entry: str | None = None) -> dict[str, Any]:
    """``quire admin scope show``: what a member (``who``: a user id) or an agent
    (``who``: ``agent:NAME``, acting for ``as_user``) may read now; with ``entry``, also
    whether it may read that one (``entry_readable``: the console's rules page)."""
    members = {m["user_id"]: m for m in list_members_txn(conn, space.id)}
    agent = who[len("agent:"):] if who.startswith("agent:") else None
    user_id = as_user if agent is not None else who
    if user_id is None:
        raise InvalidRequest("an agent reads for a member: name them (as)")
    m = members.get(user_id)
    if m is None:
        raise NotFound("no such member of this space", {"user": user_id})
    rules = list_rules_txn(conn, space.id)
    doc = dict(scope_doc_txn(conn, space, m, agent, rules, _live_txn(conn, space.id)),
               space=space.id)
    if entry is not None:
        scope = read_scope(rules, Actor(m["user_id"], doc["role"], agent), space.folders)
        doc["entry_readable"] = entry in visible_txn(conn, space.id, scope, [entry])
    return doc


def every_scope(store: Any, p: Any, space_ref: str) -> dict[str, Any]:
    """The console's scope page (admins): each member's ``scope_doc_txn``, the space's
    rules and live entries read once, in one snapshot."""
    with store.read(snapshot=True) as conn:
        space, _ = space_access_txn(conn, p, space_ref, "admin")
        rules = list_rules_txn(conn, space.id)
        live = _live_txn(conn, space.id)
        return {"space": space.id, "scopes": [
            scope_doc_txn(conn, space, m, None, rules, live)
            for m in list_members_txn(conn, space.id)]}


def show_scope(store: Any, p: Any, space_ref: str, who: str | None, as_user: str | None,
               entry: str | None = None) -> dict[str, Any]:
    """``GET /v1/spaces/{space}/scope?who=&as=``: a member asks for their own scope (``who``
    absent or ``me``); an admin for any member's, or an agent's (``agent:NAME`` acting
    for the member ``as``)."""
    with store.read(snapshot=True) as conn:
        own = who in (None, "", "me", p.user_id)
        space, role = space_access_txn(conn, p, space_ref, "viewer" if own else "admin")
        if not own:
            return show_scope_txn(conn, space, str(who), as_user, entry)
        # a caller's own scope as it reads now (an agent's as the agent); what it may not
        # read it is not told, not even how much, unless it manages the space
        doc = show_scope_txn(conn, space, f"agent:{p.agent}" if p.agent else p.user_id,
                             p.user_id, entry)
        if role != "admin" or p.agent is not None:
            doc.update(hidden=None, hidden_sample=[], judged=None)
        return doc
