"""Conflicts name people (issue 31, item 4; docs/decisions.md D138): ``quire conflicts
show`` and ``list`` say who made each side by display name, the agent on whose behalf, and
when in the local time zone, never a user id; an MCP packet names them the same way, without
ids. Real hub process, the real CLI and ``quire mcp``.

Before: a side said ``by 01JD…`` (the user id, when the replica had not kept the name) and
``seq 3``; ``list`` did not say whose the other side was; an MCP packet carried user and
device ids and no name."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from replica.app.service import open_desk
from replica.machine.home import Home
from replica.vault import markdown as md
from shared.entry import Entry
from tests.kit.cli import QUIRE, CliTeam, FreshHub, qjson, quire
from tests.kit.host import REPO
from tests.replica.mcp.test_mcp_agent_principal import run_session

pytestmark = [pytest.mark.e2e]

ULID = re.compile(r"\b[0-9a-hjkmnp-tv-z]{26}\b")  # as the README tour test (tests/docs)
ZONE = {"TZ": "JST-9"}  # a fixed zone without tzdata or summer time: "JST"


def _write(vault: Path, e: Entry) -> None:
    p = md.entry_path(vault, e.id)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(md.render(e))


def test_a_conflict_names_the_other_member_and_their_agent_never_an_id(
        hub: FreshHub, owner: Path, tmp_path: Path) -> None:
    team = CliTeam(hub, owner, tmp_path, "cnames-" + tmp_path.name[-6:].lower().replace("_", "-"))
    homes = {who: tmp_path / who / "home" for who in ("Alice", "Bob")}
    vaults = {who: tmp_path / who / "vault" for who in ("Alice", "Bob")}
    joins = [subprocess.Popen(
        [*QUIRE, "join", hub.url, "--invite", team.invite(), "--name", f"{who} Example",
         "--device", who.lower(), "--vault", str(vaults[who]), "--json"], cwd=REPO,
        env=dict(os.environ, QUIRE_HOME=str(homes[who])), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE) for who in homes]  # both at once: the test's time
    for p in joins:
        _out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    alice, bob = homes["Alice"], homes["Bob"]
    # Bob's page goes out through his agent's delegation; Alice wrote one of the same name
    token = qjson(bob, "delegate", "create", "--space", team.space["name"], "--agent",
                  "scout", "--write")["token"]
    _write(vaults["Bob"], Entry(id="page/deploy", title="Deploy", body="one (bob)\n"))
    quire(bob, "sync", env={"QUIRE_DELEGATION_TOKEN": token})
    _write(vaults["Alice"], Entry(id="page/deploy", title="Deploy", body="one (alice)\n"))
    assert qjson(alice, "sync")["sync"]["held"] == ["page/deploy"]

    shown = quire(alice, "conflicts", "show", "page/deploy", env=ZONE).stdout
    assert not ULID.search(shown), shown
    theirs = next(ln for ln in shown.splitlines() if ln.startswith("theirs"))
    assert re.search(r"by Bob Example for agent scout  \d{4}-\d\d-\d\d \d\d:\d\d JST", theirs), \
        shown
    assert "by Alice Example" in next(ln for ln in shown.splitlines() if ln.startswith("ours"))
    listed = quire(alice, "conflicts", "list").stdout
    assert "Bob Example for agent scout" in listed and not ULID.search(listed), listed
    # --json keeps the ids beside the name (the desk the CLI reads, in-process)
    home = Home(alice)
    with open_desk(home, home.space(team.space["name"])) as desk:
        doc = desk.show("page/deploy")
    assert ULID.fullmatch(doc["theirs"]["author"]["user"])
    assert doc["theirs"]["author"]["name"] == "Bob Example" and isinstance(doc["theirs"]["at"], int)

    # an agent reads the same packet over MCP: names and the agent, no id
    pid = doc["packet_id"]
    run = run_session(alice, ["--space", team.space["name"], "--agent", "merge-bot"],
                      [("conflicts_list", {}), ("conflict_show", {"packet": pid})])
    (err1, listed_mcp), (err2, pkt) = run["results"]
    assert not err1 and not err2, run
    assert pkt["theirs"]["author"] == {"by": "Bob Example", "agent": "scout"}, pkt["theirs"]
    assert pkt["ours"]["author"]["by"] == "Alice Example", pkt["ours"]
    assert pkt["base"]["present"] is False  # both created it: no base
    assert listed_mcp["packets"][0]["theirs_author"]["by"] == "Bob Example"
    sides = repr([pkt[s] for s in ("base", "ours", "theirs")]) + repr(listed_mcp)
    assert not ULID.search(sides), sides
