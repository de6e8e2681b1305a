"""An agent session scoped by read rules, through the real MCP path (the ``quire mcp`` server
and its tools, driven by the official MCP client in memory; a real hub process; replica/app/agent_pages.py ``readable``, decisions.md D149): with
``deny read *``, ``allow read projects/alpha/*`` and ``allow read guardrail/*`` for
``agent:scout``, its bootstrap holds exactly those entries and guardrails, its searches,
lists, links, reads and history never name another, the audit's record of its delegation
names the read rules it reads under, while the member's own session on the
same machine still sees everything (the rules name the agent, not the member)."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest
from mcp import Client

from replica.hubclient.client import HubClient
from replica.machine.home import Home
from replica.mcp.server import build_server
from replica.mcp.session import Session
from tests.kit.cli import CliTeam, device_auth
from tests.kit.mcp_answer import answer
from tests.replica.conflicts.conftest import entry

# a real hub process, a CLI join and sync, two MCP sessions: about 7 s, beyond the default
# run's budget for this change; run with QUIRE_LONG_E2E=1
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(not os.environ.get("QUIRE_LONG_E2E"),
                                                  reason="QUIRE_LONG_E2E=1 runs it")]

ALPHA = "projects/alpha/plan"
GUARD = "guardrail/no-force-push"
HIDDEN = ("projects/beta/plan", "page/hr/pay")
INSIDE = {ALPHA, GUARD}


def _owner(team: CliTeam) -> HubClient:
    h = Home(team.owner).hubs()[0]
    return HubClient(h.url, auth=device_auth(h), hub_key=h.public_key)


def _rules(team: CliTeam, *rules: dict[str, Any]) -> None:
    with _owner(team) as c:
        for r in rules:
            c.admin_post(f"/v1/spaces/{team.space['id']}/rules",
                         dict(r, actions=["read"], who="agent:scout"))


def _server(home: Any, agent: str) -> tuple[Any, Session]:
    """``quire mcp --agent AGENT`` as its process builds it (replica/mcp/server.py)."""
    session = Session(None, agent, Home(home))
    return build_server(session), session


async def _session(params: Any, space: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with Client(params) as client:
        async def call(name: str, args: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
            r = await client.call_tool(name, args)
            return bool(r.is_error), answer(r)

        wm = (await call("bootstrap_world_model", {"space": space, "max_bytes": 64 * 1024}))[1]
        out["wm"] = wm
        out["search"] = (await call("search", {"query": "plan"}))[1]
        out["search_pay"] = (await call("search", {"query": "pay"}))[1]
        out["list"] = (await call("list_entries", {}))[1]
        out["read_hidden"] = await call("read", {"entry_id": HIDDEN[0]})
        out["read_alpha"] = await call("read", {"entry_id": ALPHA})
        out["links"] = (await call("links", {"entry_id": ALPHA}))[1]
        out["history_hidden"] = await call("history", {"entry_id": HIDDEN[1]})
        out["activity"] = (await call("activity", {}))[1]
    return out


def _ids_of(wm: dict[str, Any]) -> set[str]:
    text = repr(wm)
    return {eid for eid in (*INSIDE, *HIDDEN) if eid in text}


def test_an_agent_scoped_to_its_project_and_the_guardrails_sees_exactly_those(team: CliTeam
                                                                              ) -> None:
    alice = team.member("alice")
    alice.write(entry(ALPHA, "alpha plan, links [[plan]] and [[pay]]\n", title="Alpha plan",
                      links=list(HIDDEN)))
    alice.write(entry(HIDDEN[0], "beta plan\n", title="Beta plan"))
    alice.write(entry(HIDDEN[1], "pay bands\n", title="Pay"))
    alice.write(entry(GUARD, "Never force-push main.\n", title="No force push",
                      meta={"severity": "block"}))
    alice.sync()
    _rules(team, {"effect": "deny", "entries": "*"},
           {"effect": "allow", "entries": "projects/alpha/*"},
           {"effect": "allow", "entries": "guardrail/*"})
    server, session = _server(alice.home, "scout")
    try:
        scout = asyncio.run(_session(server, team.name))
    finally:
        session.close()
    assert _ids_of(scout["wm"]) == INSIDE, scout["wm"]
    assert GUARD in repr(scout["wm"]["guardrails"])
    assert {h["id"] for h in scout["search"]["results"]} == {ALPHA}
    assert {h["id"] for h in scout["search_pay"]["results"]} <= {ALPHA}  # links to "pay"
    assert {e["id"] for e in scout["list"]["entries"]} == INSIDE
    err, got = scout["read_hidden"]
    assert err and got["error"]["code"] == "not_found"
    assert not scout["read_alpha"][0]
    assert "linked_from" in scout["links"] and not (set(HIDDEN) & {
        t["id"] for t in scout["links"]["links_to"] if t["exists"]})
    err, got = scout["history_hidden"]
    assert err and got["error"]["code"] == "not_found"
    assert not set(HIDDEN) & {e for c in scout["activity"]["changes"]
                              for e in c.get("entries", [])}
    # the audit: the session's delegation names the read rules its reads were scoped by
    with _owner(team) as c:
        made = [e for e in c.audit(team.space["id"]) if e.get("action") ==
                "delegation.create" and (e.get("details") or {}).get("agent") == "scout"]
    assert made and made[-1]["details"]["read_scope"]["rules"] == [
        "deny read *", "allow read projects/alpha/*", "allow read guardrail/*"]
    # the member's own agent (no rule names it) on the same machine sees everything
    server, session = _server(alice.home, "helper")
    try:
        other = asyncio.run(_session(server, team.name))
    finally:
        session.close()
    assert _ids_of(other["wm"]) == INSIDE | set(HIDDEN)
