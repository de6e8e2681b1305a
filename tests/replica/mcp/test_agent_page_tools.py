"""Issue 28, Deliver items 3 and 5, as an agent host runs them: a real ``quire hub serve``
process, members on the real ``quire`` CLI, and ``quire mcp --agent … --write`` driven over
stdio by the official MCP client. The scripted agent knows only what ``list_tools`` says:

- it deletes a page it created by mistake (published, then gone from the hub), and a delete
  the space rules refuse is refused at the call with nothing recorded;
- it reads who changed a page last: a member's display name (``quire admin users name``)
  and a local time, not an id;
- it edits one line of a 300 KB page with ``read_lines`` (find) and ``edit`` (replace_text)
  without sending the page: each request is under 1 KB, and the member's copy differs from
  the original in that line only;
- it follows a backlink (``links``, then ``read``), lists by kind, reads several entries at
  once, finds a page by a phrase with OR and by a date range, restores a page at a seq
  from its hub history;
- a create the rules refuse (an admin denied it after it was written) keeps the session
  ``pending`` (its ``policy_denied`` row) until ``revert_local`` drops it: then
  ``agent_state`` is ``ok`` and nothing is left to publish;
- with the hub stopped, ``history`` and ``activity`` still answer, with the names learned.

Before this change none of these tools existed (``unknown tool``): the only way to change a
page was ``write`` with the whole entry, and a refused create stayed pending for good."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from replica.mcp.page_tools import PAGE_TOOLS
from shared.entry import make_entry
from tests.kit.cli import CliTeam, qjson
from tests.kit.hubproc import init_hub, serve_hub
from tests.replica.mcp.test_mcp_agent_principal import add_rule, hub_entry, mcp_params

pytestmark = pytest.mark.e2e

ULID = re.compile(r"\b[0-9a-hjkmnp-tv-z]{26}\b")
BIG_LINES = 6000  # ~300 KB of body
TARGET_LINE = 4321


def big_body() -> str:
    return "".join(f"line {i:05d}: the quick brown fox jumps over the lazy dog, again\n"
                   for i in range(BIG_LINES))


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("page-tools")
    code = init_hub(root / "hub")
    proc = serve_hub(root / "hub")
    owner = root / "owner"
    qjson(owner, "join", proc.url, "--invite", code, "--device", "owner")
    team = CliTeam(proc, owner, root, "pages-" + uuid.uuid4().hex[:8])
    alice, bob = team.members("alice", "bob")
    qjson(bob.home, "admin", "users", "name", "me", "Bob Builder")
    qjson(alice.home, "admin", "users", "name", "me", "Alice Doe")
    bob.write(make_entry({"id": "page/target", "title": "Deploy target",
                          "body": "The first text of the target.\n"}))
    bob.write(make_entry({"id": "page/source", "title": "Runbook",
                          "body": "Before you deploy, read [[target]].\n"}))
    bob.write(make_entry({"id": "page/big", "title": "Big log", "body": big_body()}))
    bob.write(make_entry({"id": "page/keep", "title": "Keep me", "body": "kept\n"}))
    bob.sync()
    bob.write(make_entry({"id": "page/target", "title": "Deploy target",
                          "body": "The second text of the target: blue button.\n"}))
    bob.sync()
    alice.sync()
    add_rule(team, "deny", "delete", "agents", "page/keep")
    yield {"team": team, "alice": alice, "bob": bob, "hub": proc}
    proc.stop()


async def _session(home: Path, team: CliTeam) -> dict[str, Any]:
    out: dict[str, Any] = {"sent": {}}

    async with Client(mcp_params(home, ["--space", team.name, "--agent", "scribe",
                                        "--write"])) as client:
        async def call(name: str, **args: Any) -> tuple[bool, dict[str, Any]]:
            out["sent"].setdefault(name, []).append(len(json.dumps(args).encode()))
            r = await client.call_tool(name, args)
            # one JSON object, as structured content or (sent once) as the text
            doc = r.structured_content or json.loads(r.content[0].text)  # type: ignore[union-attr]
            out.setdefault("recv", {}).setdefault(name, []).append(
                len(r.content[0].text.encode()))  # type: ignore[union-attr]
            return bool(r.is_error), dict(doc)

        tools = {t.name: t for t in (await client.list_tools()).tools}
        out["tools"] = {n: (t.description or "", t.annotations) for n, t in tools.items()}

        # a page created by mistake, published, then deleted
        await call("write", entry_id="page/oops", title="Oops", body="wrong space\n")
        err, s = await call("sync")
        assert not err and s.get("pushed_changes") == 1, s
        err, out["delete"] = await call("delete", entry_id="page/oops")
        err, out["delete_sync"] = await call("sync")
        out["refused_delete"] = await call("delete", entry_id="page/keep")
        err, out["after_refused"] = await call("status")

        # who changed a page last
        out["history"] = await call("history", entry_id="page/target")
        out["activity"] = await call("activity", kind="page", limit=5)
        err, p1 = await call("activity", limit=2)
        assert not err and p1["next"], p1
        err, p2 = await call("activity", limit=2, before=p1["next"]["before"])
        out["activity_pages"] = (p1, p2)

        # one line of a 300 KB page
        err, found = await call("read_lines", entry_id="page/big",
                                find=f"line {TARGET_LINE:05d}:")
        assert not err and found["matches"] == 1, found
        line = found["lines"][0]
        out["found"] = line
        out["edit"] = await call("edit", entry_id="page/big", replace_text={
            "old": line["text"], "new": f"line {TARGET_LINE:05d}: edited by the agent"})
        err, out["edit_sync"] = await call("sync")

        # follow a backlink
        out["links"] = await call("links", entry_id="page/target", direction="in")
        back = out["links"][1]["linked_from"][0]["id"]
        out["followed"] = await call("read", entry_id=back)
        out["list"] = await call("list_entries", kind="page", limit=2)
        out["many"] = await call("read_many", entry_ids=["page/source", "page/target",
                                                         "page/none"], max_bytes=4096)
        out["search"] = await call("search", query='"blue button" OR nothingatall')
        today = datetime.now().astimezone().date()
        out["since"] = await call("search", query="target", since=today.isoformat())
        out["until"] = await call("search", query="target",
                                  until=(today - timedelta(days=1)).isoformat())
        out["hub_dates"] = await call("search", query="target", since=today.isoformat(),
                                      at_hub=True)

        # restore the first text of the target from the hub's history
        err, hh = await call("history", entry_id="page/target", at_hub=True)
        assert not err, hh
        first = [c for c in hh["changes"] if c["restorable"]][-1]["seq"]
        out["restore"] = await call("restore", entry_id="page/target", seq=first)
        err, out["restore_sync"] = await call("sync")

        # a create the rules refuse once it is written (an admin denies it meanwhile)
        # stays pending until revert_local
        err, w = await call("write", entry_id="secret/key", title="k", body="not yet\n")
        assert not err, w
        add_rule(team, "deny", "create,update,delete", "agents", "secret/*")
        err, out["denied_sync"] = await call("sync")
        err, out["pending"] = await call("status")
        out["revert"] = await call("revert_local", entry_ids=["secret/key"])
        err, out["cleared"] = await call("status")
    return out


def test_a_scripted_agent_deletes_reads_history_edits_a_line_and_follows_backlinks(
        scene: dict[str, Any]) -> None:
    team, alice, bob = scene["team"], scene["alice"], scene["bob"]
    out = asyncio.run(asyncio.wait_for(_session(alice.home, team), 240))

    # every new tool is offered with a description and its hints
    for name in PAGE_TOOLS:
        desc, hints = out["tools"][name]
        assert len(desc) > 60, name
        assert hints is not None and hints.read_only_hint is not None, name
        assert hints.destructive_hint is not None and hints.idempotent_hint is not None, name
    assert out["tools"]["delete"][1].destructive_hint is True
    assert out["tools"]["history"][1].read_only_hint is True

    # deleted by mistake: gone from the hub, published as the agent
    assert out["delete"]["deleted"] is True, out["delete"]
    assert out["delete_sync"]["pushed_changes"] == 1, out["delete_sync"]
    assert hub_entry(team, "page/oops") is None
    err, refused = out["refused_delete"]
    assert err and refused["error"]["code"] == "policy_denied", refused
    assert out["after_refused"]["agent_unpublished"] == 0  # nothing recorded
    assert hub_entry(team, "page/keep") is not None

    # who changed it last: a name and a local time
    err, h = out["history"]
    assert not err, h
    last = h["changes"][0]
    assert last["by"] == "Bob Builder" and not ULID.search(last["by"]), last
    assert "user_id" not in last and not ULID.search(json.dumps(h["changes"])), last
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d$", last["at"]), last
    err, act = out["activity"]
    assert not err and any(c["by"] == "Bob Builder" for c in act["changes"]), act
    p1, p2 = out["activity_pages"]
    seqs = [c["seq"] for c in p1["changes"] + p2["changes"]]
    assert seqs == sorted(seqs, reverse=True) and len(set(seqs)) == len(seqs) == 4, seqs

    # one line of 300 KB, without sending the page
    assert out["found"]["n"] == TARGET_LINE + 1
    err, ed = out["edit"]
    assert not err, ed
    assert max(out["sent"]["edit"]) < 1024 and max(out["sent"]["read_lines"]) < 1024
    assert max(out["recv"]["edit"]) < 4096 and max(out["recv"]["read_lines"]) < 4096
    assert out["edit_sync"]["pushed_changes"] == 1, out["edit_sync"]
    bob.sync()
    got = bob.read("page/big")
    assert got is not None
    want = big_body().splitlines(keepends=True)
    want[TARGET_LINE] = f"line {TARGET_LINE:05d}: edited by the agent\n"
    assert got.body == "".join(want)
    assert len(got.body.encode()) > 300_000

    # a backlink followed
    err, links = out["links"]
    assert not err and links["linked_from"] == [
        {"id": "page/source", "title": "Runbook", "via": "wikilink"}], links
    err, followed = out["followed"]
    assert not err and "[[target]]" in followed["body"]
    err, lst = out["list"]
    assert not err and [e["id"] for e in lst["entries"]] == ["page/big", "page/keep"]
    assert lst["next"] == {"after": "page/keep"}
    err, many = out["many"]
    assert not err and [e["id"] for e in many["entries"]] == ["page/source", "page/target"]
    assert many["missing"] == ["page/none"]
    err, found = out["search"]
    assert not err and [r["id"] for r in found["results"]] == ["page/target"], found
    err, since = out["since"]
    assert not err and {"page/target", "page/source"} <= {r["id"] for r in since["results"]}
    assert all(r["changed_at"].startswith(str(datetime.now().date())[:4])
               for r in since["results"])
    err, until = out["until"]
    assert not err and until["results"] == [], until
    err, refused = out["hub_dates"]  # the hub's search has no dates: refused, not dropped
    assert err and refused["error"]["code"] == "invalid_request", refused

    # restored from the hub's history, published as a normal edit
    err, res = out["restore"]
    assert not err and res["restored"], res
    assert out["restore_sync"]["pushed_changes"] == 1
    assert hub_entry(team, "page/target").body == "The first text of the target.\n"

    # refused create: pending, then cleared by revert_local
    assert [d["id"] for d in out["denied_sync"]["policy_denied"]] == ["secret/key"]
    pending = out["pending"]
    assert pending["agent_state"] == "pending" and pending["agent_unpublished"] == 1
    assert any("publication refused" in s for s in pending["signals"]), pending
    err, rv = out["revert"]
    assert not err and [r["id"] for r in rv["reverted"]] == ["secret/key"], rv
    cleared = out["cleared"]
    assert cleared["agent_state"] == "ok" and cleared["agent_unpublished"] == 0, cleared
    assert cleared["agent_changes"] == []
    assert not any("not yet published" in s or "refused" in s for s in cleared["signals"])
    assert hub_entry(team, "secret/key") is None

    # offline: the hub stopped, history and activity still answer, with the names learned
    scene["hub"].stop()
    off = asyncio.run(asyncio.wait_for(_offline(alice.home, team.name), 120))
    err, h = off["history"]
    assert not err, h
    assert [(c["by"], c["agent"]) for c in h["changes"]] == [
        ("Alice Doe", "scribe"), ("Bob Builder", None)], h
    err, act = off["activity"]
    assert not err and act["changes"], act


async def _offline(home: Path, team: str) -> dict[str, Any]:
    async with Client(mcp_params(home, ["--space", team, "--agent", "scribe"])) as client:
        out = {}
        for name, args in (("history", {"entry_id": "page/big"}), ("activity", {})):
            r = await client.call_tool(name, args)
            doc = r.structured_content or json.loads(r.content[0].text)  # type: ignore[union-attr]
            out[name] = (bool(r.is_error), dict(doc))
        return out

