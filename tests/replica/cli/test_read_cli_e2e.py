"""`quire read` and `quire search`, end to end with a real hub process and the real CLI:
--remote reads what the hub has (at a seq, history, diff) without touching the replica;
without it, the local replica answers with the same word-matching rule."""

from __future__ import annotations

from typing import Any

import pytest

from shared.entry import make_entry
from tests.kit.cli import qjson, quire
from tests.kit.host import REPO
from tests.kit.mcp_answer import answer

pytestmark = pytest.mark.e2e


def test_remote_and_local_reads_agree_and_change_nothing(team) -> None:  # type: ignore[no-untyped-def]
    alice, bob = team.members("alice", "bob")
    alice.write(make_entry({"id": "page/deploy", "title": "How we deploy",
                            "body": "Deploy with the blue button.\n"}))
    alice.sync()
    alice.write(make_entry({"id": "page/deploy", "title": "How we deploy",
                            "body": "Deploy with the green button.\n"}))
    alice.sync()
    before = bob.files()  # bob never synced since joining: his vault is empty
    seq = qjson(alice.home, "status")["head"]["seq"]

    found = qjson(bob.home, "search", "green", "button", "--remote")
    assert [r["id"] for r in found["results"]] == ["page/deploy"]
    assert found["head"]["seq"] == seq
    doc = qjson(bob.home, "read", "page/deploy", "--remote")
    assert doc["entry"]["body"] == "Deploy with the green button.\n"
    old = qjson(bob.home, "read", "page/deploy", "--remote", "--seq", str(seq - 1))
    assert old["entry"]["body"] == "Deploy with the blue button.\n"
    hist = qjson(bob.home, "read", "page/deploy", "--remote", "--history")
    assert [v["seq"] for v in hist["versions"]] == [seq, seq - 1]
    diff = qjson(bob.home, "read", "page/deploy", "--remote", "--diff", f"{seq - 1}:{seq}")
    assert "+Deploy with the green button." in diff["body"]
    human = quire(bob.home, "read", "page/deploy", "--remote").stdout
    assert human.startswith("# How we deploy") and "green button" in human
    assert bob.files() == before  # reading at the hub wrote nothing into the vault

    # locally: bob's replica does not have it yet; alice's does, with the same rule
    assert qjson(bob.home, "search", "green")["total"] == 0
    local = qjson(alice.home, "search", "GREEN", "button")
    assert [r["id"] for r in local["results"]] == ["page/deploy"] and local["local"] is True
    assert "green button" in qjson(alice.home, "read", "page/deploy")["text"]


def test_remote_read_errors_are_documented_codes(team) -> None:  # type: ignore[no-untyped-def]
    bob = team.member("bob")
    # a page the hub does not have is an error (exit 1), as a local read of one: not 5,
    # "the hub refuses you" (docs/cli.md, Exit codes; before: 5)
    p = quire(bob.home, "read", "page/none", "--remote", "--json", check=False)
    assert p.returncode == 1 and '"not_found"' in p.stdout and '"no_entry"' in p.stdout, p
    p = quire(bob.home, "read", "page/none", "--remote", "--history", check=False)
    assert p.returncode == 1 and "page/none" in p.stderr + p.stdout, p
    p = quire(bob.home, "search", "!!!", "--remote", "--json", check=False)
    assert p.returncode != 0 and '"invalid_request"' in p.stdout
    p = quire(bob.home, "read", "page/none", "--history", "--json", check=False)
    assert p.returncode != 0 and "--remote" in p.stdout


def test_mcp_search_and_read_at_the_hub_see_what_the_replica_has_not_pulled(team) -> None:  # type: ignore[no-untyped-def]
    """`quire mcp --agent A`: search/read with at_hub ask the hub under the agent's own
    delegation; without it they answer from the local replica."""
    import asyncio
    import os
    import sys

    from mcp import Client, StdioServerParameters

    alice, bob = team.members("alice", "bob")
    alice.write(make_entry({"id": "page/kraken", "title": "Sea notes",
                            "body": "Here be a kraken.\n"}))
    alice.sync()
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "replica.cli.main", "mcp", "--agent", "reader"],
        env={"QUIRE_HOME": str(bob.home), "PATH": os.environ.get("PATH", "")},
        cwd=str(REPO))

    async def session() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with Client(params) as client:
            for name, args in (("local", {"query": "kraken"}),
                               ("hub", {"query": "kraken", "at_hub": True}),
                               ("read", {"entry_id": "page/kraken", "at_hub": True})):
                tool = "read" if name == "read" else "search"
                r = await client.call_tool(tool, args)
                out[name] = (r.is_error, answer(r))
        return out

    out = asyncio.run(session())
    assert out["local"][1]["total"] == 0  # bob has not pulled it
    err, hub = out["hub"]
    assert not err and [r["id"] for r in hub["results"]] == ["page/kraken"] and hub["at_hub"]
    err, doc = out["read"]
    assert not err and doc["body"] == "Here be a kraken.\n"
    assert bob.files() == {}  # nothing written locally
