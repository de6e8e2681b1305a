"""An agent that knows only the tool descriptions resolves conflicts over a real MCP stdio
session (``quire mcp --agent … --write``) against a real hub process:

- a body conflict in three calls after listing the tools: conflicts_list, conflict_claim
  (the packet comes with the claim), conflict_resolve with publish: true (the receipt);
- a merged object missing fields is refused listing them (nothing emptied by omission);
- a wrong digest with a wrong token names both problems; claiming again in the same
  session returns the same claim;
- a packet of three ~16 KB candidates is read completely in pages, and no answer exceeds
  the MCP cap (before: the packet could not be read at all: "result too large");
- a guardrail packet says which side weakens it.
Before this change the resolve took five calls (list, claim, show, resolve, sync) and
``merged: {"body": …}`` emptied title, tags, links and meta."""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

import pytest
from mcp import Client

from replica.mcp.bound import MAX_RESULT_BYTES
from tests.kit.mcp_answer import answer, sent_bytes
from tests.replica.conflicts.test_e2e import GUARD, SCENE, _mcp, scene_of, sync  # noqa: F401

pytestmark = pytest.mark.e2e


async def call(client: Client, log: list[str], name: str, args: dict[str, Any]
               ) -> tuple[bool, dict[str, Any]]:
    r = await client.call_tool(name, args)
    assert sent_bytes(r) <= MAX_RESULT_BYTES, (name, sent_bytes(r))  # never over the cap
    log.append(name)
    return r.is_error, answer(r)


def test_agent_resolves_a_body_conflict_in_three_calls(scene_of) -> None:  # noqa: F811
    scene = scene_of("page/deploy", "page/huge", GUARD)
    alice, bob = scene.alice, scene.bob

    async def session() -> dict[str, Any]:
        out: dict[str, Any] = {}
        log: list[str] = []
        async with Client(_mcp(alice, "fixer")) as client:
            await client.list_tools()
            # 1-3: list, claim (with the packet), resolve and publish
            err, lst = await call(client, log, "conflicts_list", {})
            assert not err, lst
            pid = next(p["packet_id"] for p in lst["packets"] if p["entry"] == "page/deploy")
            err, got = await call(client, log, "conflict_claim", {"packet": pid})
            assert not err, got
            pkt, claim = got["packet"], got["claim"]
            ours = pkt["ours"]
            merged = {"title": ours["title"], "body": "step one (alice and bob)\nstep two\n",
                      "tags": ours["tags"], "links": ours["links"], "meta": ours["meta"]}
            # the errors first (not counted: an agent that gets it right skips them)
            err, miss = await call(client, [], "conflict_resolve", {
                "packet": pid, "digest": pkt["digest"], "resolution": "merged",
                "claim_token": claim["token"], "merged": {"body": merged["body"]}})
            out["missing"] = miss
            err, both = await call(client, [], "conflict_resolve", {
                "packet": pid, "digest": "0" * 64, "resolution": "ours",
                "claim_token": "not-the-token"})
            out["both"] = both
            err, again = await call(client, [], "conflict_claim", {"packet": pid})
            out["reclaim"] = (again["claim"]["token"], claim["token"])
            err, res = await call(client, log, "conflict_resolve", {
                "packet": pid, "digest": pkt["digest"], "resolution": "merged",
                "claim_token": claim["token"], "merged": merged, "publish": True})
            assert not err, res
            out["resolved"], out["calls"] = res, list(log)

            # the huge packet: every part paged, read completely
            err, lst = await call(client, log, "conflicts_list", {})
            hid = next(p["packet_id"] for p in lst["packets"] if p["entry"] == "page/huge")
            err, got = await call(client, log, "conflict_claim", {"packet": hid})
            assert not err, got
            huge = got["packet"]
            parts: dict[str, list[str]] = {}
            for n in range(1, huge["page_count"] + 1):
                err, page = await call(client, log, "conflict_show", {"packet": hid,
                                                                      "page": n})
                assert not err, page
                parts.setdefault(page["part"], []).append(page["text"])
            out["huge"], out["huge_parts"] = huge, {k: "".join(v) for k, v in parts.items()}

            err, gl = await call(client, log, "conflict_claim", {"packet": GUARD})
            out["guard"] = gl
        return out

    out = asyncio.run(session())
    assert out["calls"] == ["conflicts_list", "conflict_claim", "conflict_resolve"]
    pub = out["resolved"]["publish"]
    assert pub["published"] is True and pub["receipt"]["head"]["seq"] >= 1, pub
    sync(bob)
    assert bob.read("page/deploy").body == "step one (alice and bob)\nstep two\n"
    assert bob.read("page/deploy").title == "Deploy"  # nothing emptied (ours kept)

    miss = out["missing"]["error"]
    assert miss["code"] == "invalid_request"
    assert miss["details"]["missing"] == ["title", "tags", "links", "meta"], miss
    both = out["both"]["error"]
    assert {p["code"] for p in both["details"]["problems"]} == {"claim_held", "packet_stale"}
    assert "another token" in both["message"] and "digest" in both["message"]
    assert out["reclaim"][0] == out["reclaim"][1]

    huge, got = out["huge"], out["huge_parts"]
    assert huge["inline_limit"] == 0
    base, mine, theirs = SCENE["page/huge"]
    assert got["base"] == base and got["ours"] == mine and got["theirs"] == theirs
    assert hashlib.sha256(got["merged"].encode()).hexdigest() == \
        huge["merged_body"]["sha256"]

    stakes = out["guard"]["packet"]["stakes"]
    assert stakes["ours"]["weakens"] and "lowers its severity" in stakes["ours"]["how"]
    assert stakes["strictest_severity"] == "block"
    json.dumps(out)  # plain data only
