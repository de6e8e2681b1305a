"""MCP and CLI report the same state: wherever the state is ``conflicts``, the held entries
are listed, through ``quire mcp`` (the official MCP client over stdio) and ``quire sync``.

The scene of the issue: an entry already held in conflict; the other member edits it again;
the MCP ``sync`` pulls that newer version. It answered ``held_in_conflict: []`` while the
state was ``conflicts``."""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from shared.entry import Entry
from tests.kit.cli import QUIRE, CliMember, CliTeam, qjson, quire
from tests.kit.host import REPO
from tests.kit.mcp_answer import answer

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

LINES = "one\ntwo\nthree\n"


def _edit(m: CliMember, who: str) -> None:
    m.write(Entry(id="page/held", title="Held", body=LINES.replace("two", f"two ({who})")))


async def _tool(m: CliMember, name: str) -> dict[str, Any]:
    params = StdioServerParameters(
        command=QUIRE[0], args=[*QUIRE[1:], "mcp", "--agent", "checker"],
        env={"QUIRE_HOME": str(m.home), "PATH": os.environ.get("PATH", "")}, cwd=str(REPO))
    async with Client(params) as client:
        r = await client.call_tool(name, {})
        assert not r.is_error, r
        return answer(r)


def mcp(m: CliMember, name: str) -> dict[str, Any]:
    return asyncio.run(_tool(m, name))


def test_a_held_entry_is_listed_wherever_the_state_is_conflicts(team: CliTeam):
    a, b = team.members("same-a", "same-b")
    a.write(Entry(id="page/held", title="Held", body=LINES))
    a.sync()
    b.sync()
    _edit(a, "a1")
    a.sync()
    _edit(b, "b")
    assert b.sync()["sync"]["held"] == ["page/held"]

    _edit(a, "a2")  # a newer remote version of the entry b holds
    a.sync()
    res = mcp(b, "sync")
    assert res["pulled_batches"] == 1 and res["state"] == "conflicts"
    assert res["held_in_conflict"] == ["page/held"]

    # nothing new to pull: still held, still listed, by MCP and by the CLI alike
    res = mcp(b, "sync")
    assert res["state"] == "conflicts" and res["held_in_conflict"] == ["page/held"]
    cli = quire(b.home, "sync", "--json", check=False)
    doc = json.loads(cli.stdout)
    assert doc["state"] == "conflicts" and [c["entry"] for c in doc["conflicts"]] == [
        "page/held"]
    assert cli.returncode == 3
    assert "held in conflict: page/held" in quire(b.home, "sync", check=False).stdout
    st = mcp(b, "status")
    assert st["state"] == "conflicts" and [c["entry"] for c in st["conflicts"]] == [
        "page/held"]
    assert qjson(b.home, "status")["state"] == "conflicts"
    listed = quire(b.home, "conflicts", "list").stdout.splitlines()  # a table for people
    assert listed[0].split() == ["packet", "entry", "kind", "fields", "theirs", "by", "claimed",
                                 "by"]  # "theirs by", "claimed by": who, by name
    assert "page/held" in listed[1]
