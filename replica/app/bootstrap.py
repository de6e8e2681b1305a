"""``bootstrap_world_model`` and ``quire bootstrap``: pick the space the caller named (never a
silent default), read its replica, and build the world-model bundle (replica/app/worldmodel.py).

    explicit space ref ──pick_space──► SpaceConfig ──► store states + history
                                                   └─► worldmodel.bundle(...) ──► JSON
"""

from __future__ import annotations

import json
import time
from typing import Any

from replica.app.worldmodel import DEFAULT_MAX_BYTES, bundle
from replica.engine.headaccess import folders_txn
from replica.machine.home import Home, SpaceConfig
from shared.entry import Entry, guardrail_rank
from shared.errors import InvalidRequest, SpaceAmbiguous, SpaceNotFound
from shared.kinds import GUARDRAIL, effective_kind

MIN_BYTES, MAX_BYTES = 1024, 1024 * 1024


def pick_space(spaces: list[SpaceConfig], ref: Any) -> SpaceConfig:
    """The joined space ``ref`` names (id, or a name matching exactly one space)."""
    candidates = [{"id": s.space_id, "name": s.name} for s in spaces]
    if not isinstance(ref, str) or not ref:
        raise SpaceNotFound("name the space explicitly (id or name); it is never chosen "
                            "for you", {"candidates": candidates})
    by_id = [s for s in spaces if s.space_id == ref]
    if by_id:
        return by_id[0]
    by_name = [s for s in spaces if s.name == ref]
    if len(by_name) == 1:
        return by_name[0]
    if by_name:
        raise SpaceAmbiguous(f"several joined spaces are named {ref!r}; name one by id",
                             {"candidates": [{"id": s.space_id, "name": s.name}
                                             for s in by_name]})
    raise SpaceNotFound(f"no joined space {ref!r}", {"candidates": candidates})


def _stricter(synced: Entry | None, local: Entry | None) -> Entry | None:
    """The synced guardrail, unless the local one is stricter (a local weakening never
    reaches the world model; a local raise does)."""
    s = synced if synced is not None and not synced.deleted else None
    lo = local if local is not None and not local.deleted else None
    if s is None or lo is None:
        return s or lo
    return lo if guardrail_rank(lo) > guardrail_rank(s) else s


def _recent_batches(store: Any, n: int = 50) -> list[dict[str, Any]]:
    with store.engine.connect() as conn:
        rows = conn.execute("SELECT seq, entries FROM history ORDER BY n DESC LIMIT ?",
                            (n,)).fetchall()
    return [{"seq": r.seq, "entries": json.loads(r.entries or "[]")} for r in rows]


def _readable(scope: Any, eid: str, synced: Entry | None, local: Entry | None) -> bool:
    from replica.app.agent_pages import readable

    return readable(scope, eid, synced, local)


def world_model(home: Home, space_ref: Any, *, persona: str | None = None,
                runtime_skills: list[dict[str, Any]] | None = None,
                runtime_guardrails: list[dict[str, Any]] | None = None,
                max_bytes: int = DEFAULT_MAX_BYTES,
                spaces: list[SpaceConfig] | None = None,
                overlay: dict[str, Entry] | None = None,
                role: str | None = None,
                answer_bound: int | None = None,
                agent: str | None = None) -> dict[str, Any]:
    """The bundle of the named space from this machine's replica. An agent session passes
    ``spaces`` (the one space it answers for: any other is not found, and no other is
    named among the candidates), ``overlay`` (its own unpublished writes, read over the
    replica's), ``role`` (its delegation's, not the member's) and ``answer_bound`` (the
    bundle fits one MCP answer as sent, whatever ``max_bytes``) and ``agent`` (its name:
    what its read rules keep from it is left out, guardrails included:
    replica/app/agent_pages.py ``readable``)."""
    from replica.store.store import Store

    if not (isinstance(max_bytes, int) and MIN_BYTES <= max_bytes <= MAX_BYTES):
        raise InvalidRequest(f"max_bytes must be an integer from {MIN_BYTES} to {MAX_BYTES}")
    if persona is not None and not isinstance(persona, str):
        raise InvalidRequest("persona must be a string like persona/reviewer")
    space = pick_space(home.spaces() if spaces is None else spaces, space_ref)
    store = Store(space.store_path)
    try:
        states = store.states()
        head = store.head()
        history = _recent_batches(store)
        with store.engine.connect() as conn:  # the space's folder mapping (D152)
            folders = folders_txn(conn)
        scope = None
        if agent is not None:
            from replica.app.agent_pages import scope_txn

            with store.engine.connect() as conn:
                scope = scope_txn(conn, agent)
    finally:
        store.close()
    entries: dict[str, Entry] = {}
    guardrails: list[Entry] = []
    mine = overlay or {}
    for eid in sorted(set(states) | set(mine)):
        s = states.get(eid)
        synced = s.synced if s is not None else None
        local = mine.get(eid) or (s.local if s is not None else None)
        if scope is not None and not _readable(scope, eid, synced, local):
            continue  # outside the agent's read scope: not in its world model
        cur = local if local is not None else synced
        if cur is not None and not cur.deleted:
            entries[eid] = cur
        if eid.startswith("guardrail/") or any(  # or one by front matter or mapping
                e is not None and not e.deleted and effective_kind(e.id, e.meta, folders)
                == GUARDRAIL for e in (synced, local)):
            g = _stricter(synced, local)
            if g is not None:
                guardrails.append(g)
    recent: list[dict[str, Any]] = []
    seen: set[str] = set()
    for h in history:  # newest first
        for eid in h.get("entries") or []:
            e = entries.get(eid)
            if e is not None and eid not in seen:
                seen.add(eid)
                recent.append({"id": eid, "title": e.title, "seq": h.get("seq")})
    return bundle(space={"id": space.space_id, "name": space.name,
                         "role": role or space.role},
                  entries=entries, guardrails=guardrails,
                  head_seq=None if head is None else head.seq, recent=recent,
                  persona=persona, runtime_skills=runtime_skills,
                  runtime_guardrails=runtime_guardrails, max_bytes=max_bytes,
                  now=int(time.time() * 1000), answer_bound=answer_bound, folders=folders)
