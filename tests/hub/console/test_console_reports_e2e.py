"""End to end: a real ``quire hub serve`` process and the real ``quire`` CLI. Two members'
replicas make a conflict; the replica holding it reports it after its ``quire sync``, and
another member sees it on the console's conflicts page (signed in with the device
approval of docs/console.md); once resolved and synced, the report is gone."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import httpx2
import pytest

from replica.machine.home import Home
from shared.entry import make_entry
from tests.kit.cli import (
    CliMember,  # noqa: F401
    CliTeam,  # noqa: F401
    FreshHub,  # noqa: F401
    hub,  # noqa: F401
    owner,  # noqa: F401
    qjson,  # noqa: F401
)

pytestmark = pytest.mark.e2e


def browser_for(t: CliTeam, m: CliMember) -> httpx2.Client:
    """A cookie jar signed in to the console, approved by ``m``'s CLI."""
    b = httpx2.Client(base_url=t.hub.url, headers={"Origin": t.hub.url})
    r = b.post("/console/signin")
    assert r.status_code == 303, r.text
    code = re.search(r"quire devices approve ([A-Z0-9-]+)", b.get("/console/signin/wait").text)
    assert code
    qjson(m.home, "devices", "approve", code.group(1), "--yes")
    assert b.get("/console/signin/wait").headers["location"] == "/console/spaces"
    return b


def write(m: CliMember, body: str) -> None:
    m.write(make_entry({"id": "page/deploy", "title": "Deploy", "body": body}))


def state(m: CliMember) -> dict[str, Any]:
    p = Home(m.home).spaces()[0].dir / "conflict_report.json"
    return json.loads(p.read_text()) if p.exists() else {}


def test_a_replicas_conflict_report_shows_on_the_console_until_resolved(
        hub: FreshHub, owner: Path, tmp_path: Path) -> None:  # noqa: F811 (fixtures)
    team = CliTeam(hub, owner, tmp_path, f"reports{os.getpid() % 10000}")
    alice, bob = team.members("alice", "bob")
    write(alice, "step one\n")
    alice.sync()
    bob.sync()
    write(bob, "step one (bob)\n")
    bob.sync()
    write(alice, "step one (alice)\n")
    held = alice.sync()
    assert held["sync"]["held"] == ["page/deploy"], held
    assert state(alice)["count"] == 1 and "last_error" not in state(alice)
    assert state(bob) == {}  # bob holds nothing and never had anything to report

    page = f"/console/spaces/{team.name}/conflicts"
    b = browser_for(team, bob)  # another member reads alice's report
    try:
        html = b.get(page).text
        rows = html.split("<tbody>")[1].split("</tbody>")[0]
        assert "page/deploy" in rows and "alice" in rows and ">edit<" in rows, rows
        assert "step one" not in html  # a summary: no content reaches the hub
        packets = qjson(alice.home, "conflicts", "list")["packets"]
        assert [p["entry"] for p in packets] == ["page/deploy"]
        assert packets[0]["packet_id"] in rows  # the id an agent resolves it by

        # an unchanged set is not reported again
        first = state(alice)["reported_at"]
        alice.sync()
        assert state(alice)["reported_at"] == first

        # resolved and synced: the report is replaced by an empty one
        qjson(alice.home, "conflicts", "resolve", "page/deploy", "--digest",
              packets[0]["digest"],
              "--take", "ours", "--agent", "tester")
        alice.sync()
        assert state(alice)["count"] == 0
        assert "No open conflicts reported" in b.get(page).text
    finally:
        b.close()
