"""Issue 28, Deliver items 4 and 8, as an agent host meets them: ``quire mcp`` driven over
stdio by the official MCP client against a real hub process, on a replica that holds a
guardrail packet, a page packet and others (tests/replica/mcp/scene.py).

What each test prevents (the hole it showed on 0506cf5):

- a guardrail resolution was checked only for a lowered severity (replica/conflicts/desk.py
  ``_apply``): a merged one that changed the text was applied, closing the packet, and then
  refused at publication "on the next sync", which never came; ``stakes`` judged each side
  against the base, so both sides read as weakening and the model could not tell that
  ``theirs`` is the answer that publishes;
- ``write`` took a change the rules refuse (a guardrail lowered) into the overlay; it was
  refused only at ``sync`` (replica/mcp/session.py ``write``);
- a stale packet's error said ``read pk-…``, which ``read`` refuses (not an entry id);
- a runtime guardrail with an unknown severity became ``severity: null``, one without a
  severity was taken (replica/app/worldmodel.py ``_added_guardrails``);
- a session without ``--write`` reported the member's role (``editor``);
- ``conflict_claim``'s ``agent`` argument let a session take a lease under another agent's
  name;
- every result went out twice (structured content and the same JSON as text), the server
  reported an empty version, and no tool carried read-only, destructive or idempotent hints.
"""

from __future__ import annotations

import asyncio
from importlib.metadata import version
from typing import Any

import pytest
from mcp import Client

from tests.kit.cli import CliMember, CliTeam
from tests.kit.mcp_answer import answer
from tests.replica.conflicts.test_e2e import _mcp
from tests.replica.mcp.scene import GUARD, PAGE

pytestmark = pytest.mark.e2e

async def call(client: Client, name: str, args: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    r = await client.call_tool(name, args)
    return bool(r.is_error), answer(r)


def test_guardrail_stakes_resolutions_writes_and_the_small_items(
        held_scene: tuple[CliTeam, CliMember]) -> None:
    team, alice = held_scene

    async def writer() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with Client(_mcp(alice, "fixer")) as client:
            out["version"] = client.server_info.version
            out["tools"] = {t.name: t.annotations for t in (await client.list_tools()).tools}
            r = await client.call_tool("status", {})
            out["once"] = (r.structured_content, len(r.content))
            out["pages"], offset = [], 0
            while offset is not None:  # conflicts_list in pages of one
                page = (await call(client, "conflicts_list", {"limit": 1, "offset": offset}))[1]
                out["pages"].append(page)
                offset = page["next_offset"]
            err, got = await call(client, "conflict_claim", {"packet": GUARD})
            assert not err, got
            pkt, token = got["packet"], got["claim"]["token"]
            out["stakes"] = pkt["stakes"]
            # a merged answer that keeps block but rewrites the text: refused, nothing applied
            out["merged"] = await call(client, "conflict_resolve", {
                "packet": pkt["packet_id"], "digest": pkt["digest"], "resolution": "merged",
                "claim_token": token, "merged": {
                    "title": "G", "body": "Force-push only on Fridays.\n", "tags": [],
                    "links": [], "meta": {"severity": "block"}}})
            out["still_open"] = await call(client, "conflicts_list", {})
            # the side stakes name as publishable goes through
            out["theirs"] = await call(client, "conflict_resolve", {
                "packet": pkt["packet_id"], "digest": pkt["digest"], "resolution": "theirs",
                "claim_token": token})
            # a write that lowers the guardrail: refused at the call, nothing recorded
            out["lower"] = await call(client, "write", {
                "entry_id": GUARD, "title": "G", "body": "Never force-push main.\n",
                "meta": {"severity": "info"}})
            err, st = await call(client, "status", {})
            out["after_lower"] = st
            # a stale digest: the advice names a call that works
            err, lst = await call(client, "conflicts_list", {})
            pid = next(p["packet_id"] for p in lst["packets"] if p["entry"] == PAGE)
            out["stale"] = await call(client, "conflict_resolve", {
                "packet": pid, "digest": "0" * 64, "resolution": "ours"})
            details = out["stale"][1]["error"]["details"]
            out["advised"] = await call(client, "conflict_show",
                                        {"packet": details["packet_id"]})
            out["as_other"] = await call(client, "conflict_claim",
                                         {"packet": pid, "agent": "someone-else"})
            out["runtime"] = [await call(client, "bootstrap_world_model", {
                "space": team.name, "runtime_guardrails": [g]}) for g in (
                {"key": "prod", "severity": "critical", "body": "x"},
                {"key": "prod", "body": "x"},
                {"key": "prod", "severity": "block", "body": "x"})]
        return out

    async def reader() -> dict[str, Any]:
        params = _mcp(alice, "reader")
        params.args = [a for a in params.args if a != "--write"]
        async with Client(params) as client:
            before = (await call(client, "status", {}))[1]["role"]
            await call(client, "sync", {})
            after = (await call(client, "status", {}))[1]["role"]
            wm = (await call(client, "bootstrap_world_model", {"space": team.name}))[1]
        return {"roles": (before, after, wm["space"]["role"])}

    out = asyncio.run(writer())
    ro = asyncio.run(reader())

    # item 4: stakes say which side publishes; what would not publish is refused first
    stakes = out["stakes"]
    assert stakes["publishable"] == ["theirs"], stakes
    assert stakes["ours"]["publishable"] is False and stakes["ours"]["refused"]["rule"] == \
        "default:guardrails-additive"
    err, merged = out["merged"]
    assert err and merged["error"]["code"] == "policy_denied", merged
    assert "changes its" in merged["error"]["message"], merged
    assert GUARD in [p["entry"] for p in out["still_open"][1]["packets"]]  # nothing applied
    err, theirs = out["theirs"]
    assert not err and theirs["resolved"] == "theirs", theirs
    err, lower = out["lower"]
    assert err and lower["error"]["code"] == "policy_denied", lower
    assert out["after_lower"]["agent_unpublished"] == 0

    # item 8
    err, stale = out["stale"]
    assert err and stale["error"]["code"] == "packet_stale"
    assert "conflict_show" in stale["error"]["message"] and "read pk-" not in \
        stale["error"]["message"]
    assert not out["advised"][0], out["advised"]
    err, other = out["as_other"]
    assert err and other["error"]["details"]["fields"][0]["field"] == "agent"
    (e1, unknown), (e2, missing), (e3, fine) = out["runtime"]
    assert e1 and "unknown severity 'critical'" in unknown["error"]["message"]
    assert e2 and "severity is missing" in missing["error"]["message"]
    assert not e3 and any(g["key"] == "prod" and g["severity"] == "block"
                          for g in fine["guardrails"])
    assert ro["roles"] == ("viewer", "viewer", "viewer"), ro
    pages = out["pages"]  # conflicts_list pages too: one packet each, all of them once
    assert len(pages) == pages[0]["total"] >= 2 and pages[0]["next_offset"] == 1
    assert len({p["packets"][0]["entry"] for p in pages}) == len(pages)
    assert out["once"] == (None, 1)  # one copy of the answer, as text
    assert out["version"] == version("quire")
    for name, hints in out["tools"].items():
        assert hints is not None, name
        assert None not in (hints.read_only_hint, hints.destructive_hint,
                            hints.idempotent_hint), name
    assert out["tools"]["read"].read_only_hint and out["tools"]["write"].destructive_hint
