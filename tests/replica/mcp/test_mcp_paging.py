"""Issue 28, Deliver item 2: every packet and every entry is readable at any size through
``quire mcp``, driven by the official MCP client over stdio against a real hub process.

What each test prevents (the hole it showed on 0506cf5, replica/mcp):

- a packet whose sides carry three 5,000-character meta fields could not be opened:
  ``conflict_claim`` and ``conflict_show`` failed with "result too large … (smaller limit,
  max_chars, or a page)", parameters these tools do not have (session.py ``_packet`` paged
  bodies only), and the claim was committed before the size check, so the lease held the
  packet for 120 s under a token the agent never received;
- the 48 KiB bound was counted in characters of one copy of the answer, which went out
  twice (structured content and text): a CJK read came back near 100 KB, and an answer full
  of quotes or newlines grew again when the JSON-RPC message escaped it;
- ``read`` never paged title, tags, links or meta (256 links and a 16 KiB meta together do
  not fit one answer).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

import pytest
from mcp import Client

from replica.app.service import open_desk
from replica.machine.home import Home
from replica.mcp import bound
from replica.mcp.bound import MAX_RESULT_BYTES
from replica.mcp.session import Session
from shared.errors import TooLarge
from tests.kit.cli import CliMember, CliTeam
from tests.kit.mcp_answer import answer, sent_bytes
from tests.replica.conflicts.test_e2e import _mcp
from tests.replica.mcp.scene import CJK, HUGE, META, SIDES, WIDE

pytestmark = pytest.mark.e2e

PAGED = (META, HUGE)  # the packets read here (the scene holds more)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


async def call(client: Client, sizes: list[int], name: str, args: dict[str, Any]
               ) -> dict[str, Any]:
    r = await client.call_tool(name, args)
    sizes.append(sent_bytes(r))
    assert r.structured_content is None  # sent once: as text
    doc = answer(r)
    assert not r.is_error, (name, args, doc)
    return doc


async def read_packet(client: Client, sizes: list[int], ref: str) -> dict[str, Any]:
    """Claim the packet and fetch every page it lists: each part's joined text."""
    got = await call(client, sizes, "conflict_claim", {"packet": ref})
    pkt, parts = got["packet"], {}
    for n in range(1, pkt["page_count"] + 1):
        page = await call(client, sizes, "conflict_show", {"packet": pkt["packet_id"],
                                                           "page": n})
        parts.setdefault(page["part"], []).append(page["text"])
    return {"claim": got["claim"], "packet": pkt,
            "parts": {k: "".join(v) for k, v in parts.items()}}


async def read_entry(client: Client, sizes: list[int], eid: str) -> dict[str, Any]:
    """Every slice of the body and every page of the fields, joined."""
    first = await call(client, sizes, "read", {"entry_id": eid, "max_chars": 32768})
    doc, chunks = first, [first["body"]]
    while doc["more"]:
        doc = await call(client, sizes, "read", {"entry_id": eid, "max_chars": 32768,
                                                  "offset": doc["next_offset"]})
        chunks.append(doc["body"])
    fields = {k: first[k] for k in ("title", "tags", "links", "meta")}
    if first.get("fields"):
        text = "".join([(await call(client, sizes, "read", {"entry_id": eid,
                                                             "fields_page": n}))["text"]
                        for n in range(1, first["fields"]["pages"] + 1)])
        assert sha(text) == first["fields"]["sha256"]
        fields = json.loads(text)
    return {"first": first, "body": "".join(chunks), "fields": fields,
            "slices": len(chunks)}


def test_every_packet_and_entry_is_read_completely_in_pages_within_the_bound(
        held_scene: tuple[CliTeam, CliMember]) -> None:
    _team, alice = held_scene
    sizes: list[int] = []

    async def session() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with Client(_mcp(alice, "pager")) as client:
            for eid in PAGED:
                out[eid] = await read_packet(client, sizes, eid)
            for eid in (CJK, WIDE):
                out[eid] = await read_entry(client, sizes, eid)
            for eid in PAGED:  # give the leases back: every one was answered
                await call(client, sizes, "conflict_release", {
                    "packet": eid, "claim_token": out[eid]["claim"]["token"]})
            out["list"] = await call(client, sizes, "conflicts_list", {})
        return out

    out = asyncio.run(session())
    assert max(sizes) <= MAX_RESULT_BYTES, max(sizes)

    for eid in PAGED:
        sides, pkt, parts = SIDES[eid], out[eid]["packet"], out[eid]["parts"]
        for side, (text, m) in zip(("base", "ours", "theirs"), sides, strict=True):
            assert sha(parts[side]) == sha(text) == pkt[side]["body"]["sha256"], (eid, side)
            fields = (json.loads(parts[side + "_fields"]) if pkt["fields_paged"] else
                      {k: pkt[side][k] for k in ("title", "tags", "links", "meta")})
            assert fields == {"title": "Deploy", "tags": [], "links": [], "meta": m}
        assert sha(parts["merged"]) == pkt["merged_body"]["sha256"]
    assert out[META]["packet"]["fields_paged"] is True  # the meta alone would not fit
    assert all(p["claim"] is None for p in out["list"]["packets"])  # none left dangling

    cjk = out[CJK]
    assert cjk["body"] == alice.read(CJK).body and cjk["slices"] >= 3
    wide = out[WIDE]
    w = alice.read(WIDE)
    assert wide["first"]["fields"]["truncated"] and wide["first"]["title"] is None
    assert wide["fields"] == {"title": w.title, "tags": list(w.tags),
                              "links": list(w.links), "meta": w.meta}
    assert wide["body"] == "short"

    # a claim whose packet cannot be answered is not taken (before: the lease was
    # committed, then the answer refused as too large, and the packet stayed claimed for
    # 120 s under a token nobody had)
    home = Home(alice.home)
    s = Session(home.spaces()[0].space_id, "squeezed", home, delegate=False, env={})
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bound, "PACKET_BUDGET", 100)  # no packet fits
        with pytest.raises(TooLarge):
            s.conflict_claim(META)
    with open_desk(home, home.spaces()[0]) as desk:
        assert all(p["claim"] is None for p in desk.list_packets())
