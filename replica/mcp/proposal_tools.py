"""The proposal tools of ``quire mcp`` (docs/agents.md, "Proposals"): what to do with a
change your rules refuse.

    propose    the change (the whole entry, as ``write`` takes it, or a delete) and your
               reason, filed on the hub under this session's delegation (never the device's
               credential), on the version this replica last synced of the entry
    proposals  your proposals and what members decided (accepted, rejected with a reason,
               withdrawn, stale)
    withdraw   take one of yours back

A member who may make the change accepts it (console or ``quire proposals accept``): the
hub publishes it with the member and you in the audit, and your next ``sync`` pulls it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from replica.app import agent_pages as pages
from replica.app import proposals
from replica.mcp.calls import _result, hints
from replica.mcp.page_tools import fit
from shared.entry import EntryError, make_entry, tombstone
from shared.errors import BaseMismatch, InvalidRequest
from shared.ids import entry_id_problem

PROPOSAL_TOOLS = ("propose", "proposals", "withdraw")
MAX_REASON = 2000


def _row(x: dict[str, Any]) -> dict[str, Any]:
    """A proposal as an agent reads it: no ids of people, local times, no content."""
    return {"proposal": x["id"], "entry_id": x["entry_id"], "op": x["op"],
            "state": x["state"], "reason": x["reason"],
            "filed_at": pages.local_time(x["created_at"]),
            "decided_by": x.get("decided_by_name") if x.get("decided_at") else None,
            "decided_at": pages.local_time(x["decided_at"]) if x.get("decided_at") else None,
            "note": x.get("note"), "seq": x.get("seq")}


class ProposalTools:
    """What each proposal tool answers, for one session (replica/mcp/session.py)."""

    def __init__(self, session: Any):
        self.s = session

    def propose(self, entry_id: str, reason: str, title: str | None, body: str | None,
                tags: list[str] | None, links: list[str] | None,
                meta: dict[str, Any] | None, delete: bool) -> dict[str, Any]:
        problem = entry_id_problem(entry_id)
        if problem:
            raise InvalidRequest(f"invalid entry id {entry_id!r}: {problem}")
        if not reason.strip():
            raise InvalidRequest("reason: say why the change is right, for the member who "
                                 "decides")
        if delete:
            if any(v is not None for v in (title, body, tags, links, meta)):
                raise InvalidRequest("delete: true takes no title, body, tags, links or meta")
            entry = tombstone(entry_id)
        else:
            if title is None or body is None:
                raise InvalidRequest("give the whole entry, as write takes it (title and "
                                     "body at least), or delete: true",
                                     {"missing": [k for k, v in (("title", title),
                                                                 ("body", body)) if v is None]})
            try:
                entry = make_entry({"id": entry_id, "title": title, "body": body,
                                    "tags": tags or [], "links": links or [],
                                    "meta": meta or {}})
            except EntryError as e:
                raise InvalidRequest(f"not a valid entry: {e}") from None
        space = self.s.space()
        base = proposals.base_of(space, entry_id)
        try:
            doc = proposals.file(self.s.hub_client(), space.space_id, entry, base,
                                 reason.strip())
        except BaseMismatch as e:
            raise BaseMismatch(f"{entry_id} changed on the hub since this replica last "
                               "synced it: call sync, read it again, then propose on it",
                               e.details) from None
        return {**_row(doc["proposal"]),
                "next": "a member who may make the change decides; see it with proposals "
                        "(an accepted change reaches this replica with your next sync)"}

    def proposals(self, state: str) -> dict[str, Any]:
        doc = proposals.ask(self.s.hub_client(), self.s.space().space_id, "list",
                            state=state)
        rows = [_row(x) for x in doc["proposals"]]
        kept = fit(rows)
        return {"proposals": kept, "total": len(rows), "more": len(kept) < len(rows)}

    def withdraw(self, proposal: str) -> dict[str, Any]:
        doc = proposals.ask(self.s.hub_client(), self.s.space().space_id, "withdraw",
                            proposal)
        return _row(doc["proposal"])


ProposalRef = Annotated[str, Field(min_length=1, max_length=40,
                                   description="the proposal's id (from propose or "
                                               "proposals)")]


def register(mcp: MCPServer, session: Any) -> ProposalTools:
    """Add the proposal tools to ``mcp`` (replica/mcp/server.py calls this once)."""
    t = ProposalTools(session)

    @mcp.tool(description="Propose a change your rules refuse (write, delete or edit said "
                          "policy_denied), e.g. a stricter or clearer guardrail, with your "
                          "reason: the whole entry as write takes it (title, body, tags, "
                          "links, meta), or delete: true. Filed on the hub, made on the "
                          "version this replica last synced (base_mismatch: sync first). A "
                          "member who may make the change accepts or rejects it; nothing is "
                          "published until then. Also without --write.",
              annotations=hints(read_only=False, idempotent=False))
    def propose(entry_id: Annotated[str, Field(description="'<kind>/<slug>'", min_length=1,
                                               max_length=300)],
                reason: Annotated[str, Field(min_length=1, max_length=MAX_REASON,
                                             description="why, for the member who decides")],
                title: Annotated[str | None, Field(max_length=500)] = None,
                body: Annotated[str | None, Field(description="Markdown")] = None,
                tags: list[str] | None = None,
                links: Annotated[list[str] | None, Field(description="entry ids")] = None,
                meta: dict[str, Any] | None = None,
                delete: Annotated[bool, Field(description="propose deleting the entry")]
                = False) -> CallToolResult:
        return _result(session, lambda: t.propose(entry_id, reason, title, body, tags, links,
                                                  meta, delete))

    @mcp.tool(description="Your proposals, newest first, and what members decided: state "
                          "open, accepted (seq: published), rejected (note: why), withdrawn "
                          "or stale (the entry changed first: propose again on it).",
              annotations=hints(read_only=True))
    def proposals(state: Literal["open", "accepted", "rejected", "withdrawn", "stale",
                                 "all"] = "all") -> CallToolResult:
        return _result(session, lambda: t.proposals(state))

    @mcp.tool(description="Take one of your open proposals back (its id from propose or "
                          "proposals): a member no longer sees it; an accepted or rejected "
                          "one is proposal_closed.",
              annotations=hints(read_only=False))
    def withdraw(proposal: ProposalRef) -> CallToolResult:
        return _result(session, lambda: t.withdraw(proposal))

    return t
