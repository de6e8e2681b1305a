"""What each remote MCP tool does, for one grant (hub/oauth/tokens.py ``RemoteGrant``): the
hub's own read functions (hub/reads.py) and proposals (hub/proposals.py) called as the
agent principal of the grant, in the grant's space only, and their answers cut to the same
bound as ``quire mcp``'s (shared/answers.py). The tool shapes follow the local server's
(docs/agents.md, "Tools"): ``read``, ``search``, ``list_entries``, ``history`` (names and
UTC times, not ids), ``bootstrap_world_model``, ``propose``, and ``write`` where the space
allows remote writes (hub/remote_mcp/writes.py).

Every function takes the hub and the grant first and returns one JSON-ready dict, or raises
a ``QuireError`` (the server turns it into the documented error object).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from hub import reads
from hub.oauth.tokens import RemoteGrant
from hub.space_kinds import show_kinds
from shared.answers import ANSWER_BUDGET, check_offset, entry_answer, fit_rows
from shared.entry import Entry, make_entry
from shared.errors import Forbidden, InvalidRequest, RateLimited, SpaceNotFound
from shared.kinds import GUARDRAIL, effective_kind
from shared.worldmodel import DEFAULT_MAX_BYTES, bundle

# which scope each tool needs (hub/oauth/scopes.py: write ⊃ propose ⊃ read)
NEEDS = {"read": "read", "search": "read", "list_entries": "read", "history": "read",
         "bootstrap_world_model": "read", "propose": "propose", "write": "write"}
WORLD_KINDS = ("guardrail/", "skill/", "persona/", "space/profile")
MAPPED_KINDS = ("skill", "persona")  # a folder the space maps to one of these is read too
MAX_WORLD_ENTRIES = 5000


def check_scope(grant: RemoteGrant, tool: str) -> None:
    need = NEEDS.get(tool, "write")
    if not grant.allows(need):
        raise Forbidden(f"this token's scopes ({' '.join(grant.scopes)}) do not include "
                        f"{need!r}, which {tool} needs; a member grants it at consent",
                        {"reason": "insufficient_scope", "scope": need})


def _iso(ms: Any) -> str | None:
    if not isinstance(ms, int):
        return None
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="seconds")


def read(hub: Any, g: RemoteGrant, entry_id: str, offset: int = 0, max_chars: int = 16384,
         fields_page: int | None = None) -> dict[str, Any]:
    check_offset(offset, max_chars)
    got = reads.get_entry(hub.store, g.principal, g.space_id, entry_id)
    return entry_answer(entry_id, got["entry"], got["version"], offset=offset,
                        max_chars=max_chars, fields_page=fields_page,
                        extra={"head": got["head"], "changed_seq": got["changed_seq"]})


def search(hub: Any, g: RemoteGrant, query: str, limit: int = 10) -> dict[str, Any]:
    got = reads.search(hub.store, g.principal, g.space_id, query, limit)
    rows = fit_rows(got["results"])
    return {"head": got["head"], "total": got["total"], "results": rows,
            "cut": len(rows) < len(got["results"])}


def list_entries(hub: Any, g: RemoteGrant, kind: str | None = None, folder: str | None = None,
                 after: str = "", limit: int = 100) -> dict[str, Any]:
    if kind and folder:
        raise InvalidRequest("give kind or folder, not both")
    prefix = f"{kind}/" if kind else (folder.rstrip("/") + "/" if folder else "")
    got = reads.list_entries(hub.store, g.principal, g.space_id, prefix=prefix, after=after,
                             limit=limit)
    rows = fit_rows([{"id": e["id"], "title": e["title"], "version": e["version"],
                      "changed_at": _iso(e["changed_at"])} for e in got["entries"]])
    more = len(rows) < len(got["entries"]) or got["next"] is not None
    return {"head": got["head"], "entries": rows,
            "next": {"after": rows[-1]["id"]} if more and rows else None}


def history(hub: Any, g: RemoteGrant, entry_id: str, limit: int = 20) -> dict[str, Any]:
    got = reads.history(hub.store, g.principal, g.space_id, entry_id, limit)
    users = {v["author"]["user"] for v in got["versions"] if v["author"]["user"]}
    names = reads.names(hub.store, g.principal, g.space_id, users)
    rows = fit_rows([{"by": names.get(v["author"]["user"], "a former member"),
                      "agent": v["author"]["agent"], "at": _iso(v["accepted_at"]),
                      "seq": v["seq"], "version": v["version"], "deleted": v["deleted"],
                      # across a rename the older versions are the old name's
                      **({"id": v["id"]} if v["id"] != entry_id else {}),
                      **({"renamed_from": v["from"]} if v.get("from") else {})}
                     for v in got["versions"]])
    return {"head": got["head"], "id": entry_id, "versions": rows}


def _world_entries(hub: Any, g: RemoteGrant, folders: dict[str, str]
                   ) -> list[dict[str, Any]]:
    """The live entries the world model reads (guardrails, skills, personas, the profile)
    with their content, at the head: the default layout's folders, and each folder the
    space's mapping ``folders`` gives a skill or persona kind (D152)."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    mapped = [f"{f}/" for f, k in sorted(folders.items()) if k in MAPPED_KINDS]
    for prefix in [*WORLD_KINDS, *mapped]:
        after = ""
        while len(out) < MAX_WORLD_ENTRIES:
            # guardrails in any folder (a front matter ``kind: guardrail`` counts, D139)
            page = reads.list_entries(hub.store, g.principal, g.space_id, prefix=prefix,
                                      after=after, limit=500,
                                      guardrails=prefix == "guardrail/")
            for e in page["entries"]:
                if e["id"] in seen:
                    continue
                seen.add(e["id"])
                got = reads.get_entry(hub.store, g.principal, g.space_id, e["id"])
                out.append({**got["entry"], "_seq": e["changed_seq"]})
            if page["next"] is None:
                break
            after = page["next"]
    return out


def bootstrap_world_model(hub: Any, g: RemoteGrant, space: str | None = None,
                          persona: str | None = None,
                          runtime_skills: list[dict[str, Any]] | None = None,
                          runtime_guardrails: list[dict[str, Any]] | None = None,
                          max_bytes: int = DEFAULT_MAX_BYTES) -> dict[str, Any]:
    if space is not None and space not in (g.space_id, g.space_name):
        raise SpaceNotFound(f"this token answers for space {g.space_name!r} only",
                            {"candidates": [{"id": g.space_id, "name": g.space_name}]})
    folders = show_kinds(hub.store, g.principal, g.space_id)["kinds"]
    raw = _world_entries(hub, g, folders)
    entries: dict[str, Entry] = {}
    for r in raw:
        e = make_entry({k: v for k, v in r.items() if k != "_seq"})
        entries[e.id] = e
    recent = sorted(({"id": r["id"], "title": r.get("title", ""), "seq": r["_seq"]}
                     for r in raw), key=lambda x: -int(x["seq"] or 0))[:10]
    head = reads.list_entries(hub.store, g.principal, g.space_id, prefix="", after="",
                              limit=1)["head"]
    role = "editor" if g.allows("write") else "viewer"
    return bundle(space={"id": g.space_id, "name": g.space_name, "role": role},
                  entries=entries,
                  guardrails=[e for e in entries.values()
                              if effective_kind(e.id, e.meta, folders) == GUARDRAIL],
                  head_seq=head["seq"], recent=recent, persona=persona,
                  runtime_skills=runtime_skills, runtime_guardrails=runtime_guardrails,
                  max_bytes=max_bytes, now=hub.now(), answer_bound=ANSWER_BUDGET,
                  folders=folders)


def propose(hub: Any, g: RemoteGrant, entry_id: str, reason: str, title: str = "",
            body: str = "", tags: list[str] | None = None, links: list[str] | None = None,
            meta: dict[str, Any] | None = None, base: str | None = None,
            delete: bool = False) -> dict[str, Any]:
    if delete:
        op: dict[str, Any] = {"op": "delete", "id": entry_id, "base": base}
    else:
        op = {"op": "put", "base": base, "entry": {
            "id": entry_id, "title": title, "body": body, "tags": tags or [],
            "links": links or [], "meta": meta or {}}}
    from hub import proposals  # hub/proposals.py (D135)
    from hub import screening as screen
    take_publication(hub, g)
    got = proposals.file(hub.store, g.principal, g.space_id, {"op": op, "reason": reason},
                         hub.now(), max_body=hub.settings.max_entry_body,
                         screening=screen.config_for(hub.settings.screening_injection))
    return dict(got)


def take_publication(hub: Any, g: RemoteGrant) -> None:
    """A token of the hub's publication limit for the consent's device, as every batch a
    device pushes takes one (``publications_per_min``): a remote agent's writes and
    proposals are bounded like any device's publications."""
    ok, wait = hub.publish_limiter.allow(g.principal.device_id)
    if not ok:
        raise RateLimited("too many changes from this agent; wait and retry",
                          {"retry_after": wait})


def write(hub: Any, g: RemoteGrant, entry_id: str, title: str = "", body: str = "",
          tags: list[str] | None = None, links: list[str] | None = None,
          meta: dict[str, Any] | None = None, base: str | None = None,
          delete: bool = False) -> dict[str, Any]:
    from hub.remote_mcp import writes

    entry = None if delete else {"id": entry_id, "title": title, "body": body,
                                 "tags": tags or [], "links": links or [], "meta": meta or {}}
    take_publication(hub, g)
    return writes.write(hub, g, entry, entry_id, base)


CALLS: dict[str, Callable[..., dict[str, Any]]] = {"read": read, "search": search, "list_entries": list_entries, "history": history,
         "bootstrap_world_model": bootstrap_world_model, "propose": propose, "write": write}
