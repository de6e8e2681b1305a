"""``quire join --only`` and ``quire scope show|add|remove|set`` through the real CLI against a
real hub process (replica/app/scope.py, replica/cli/scope_cmd.py; docs/cli.md): a partial
replica joins holding one folder, widens and narrows, keeps a local edit it narrowed away
(held, listed), refuses to publish a save outside its globs with the command that widens
them, and refuses what would do nothing. The pure rules of ``changed`` run by default; the
CLI run (a join and five commands, about 8 s) with QUIRE_LONG_E2E=1."""

from __future__ import annotations

import os

import pytest

from replica.app.scope import changed
from shared.entry import make_entry
from shared.errors import InvalidRequest
from tests.kit.cli import CliMember, CliTeam, qjson, quire

ALPHA, BETA = "projects/alpha/plan", "projects/beta/plan"


def test_what_a_scope_change_may_do() -> None:
    assert changed((), "set", ["b/*", "a/*"]) == ("a/*", "b/*")
    assert changed(("a/*",), "add", ["b/*"]) == ("a/*", "b/*")
    assert changed(("a/*", "b/*"), "remove", ["b/*"]) == ("a/*",)
    for now, verb, pats, reason in ((), "add", ["a/*"], "whole"),  \
            (("a/*",), "remove", ["b/*"], "not_in_scope"), \
            (("a/*",), "remove", ["a/*"], "empty"), \
            ((), "set", ["/etc/*"], "bad_pattern"), ((), "set", ["a,b"], "bad_pattern"):
        with pytest.raises(InvalidRequest) as e:
            changed(now, verb, pats)
        assert e.value.details["reason"] == reason


@pytest.mark.e2e
@pytest.mark.skipif(not os.environ.get("QUIRE_LONG_E2E"), reason="QUIRE_LONG_E2E=1 runs it")
def test_a_partial_replica_joins_widens_and_narrows_through_the_cli(team: CliTeam) -> None:
    alice = team.member("alice")
    for eid in (ALPHA, BETA):
        alice.write(make_entry({"id": eid, "title": eid, "body": f"{eid}\n"}))
    alice.sync()
    home, vault = team.root / "bob" / "home", team.root / "bob" / "vault"
    qjson(home, "join", team.hub.url, "--invite", team.invite(), "--vault", str(vault),
          "--device", "bob", "--only", "projects/alpha/*")
    bob = CliMember(team, "bob", home, vault)
    assert set(bob.files()) == {"projects/alpha/plan.md"}
    shown = qjson(home, "scope", "show")
    assert shown["only"] == ["projects/alpha/*"] and shown["entries"] == 1
    # a save outside: kept, not published, the way to widen named
    bob.write(make_entry({"id": "projects/beta/idea", "title": "Idea", "body": "mine\n"}))
    res = bob.sync()
    (d,) = [d for d in res["sync"]["policy_denied"] if d["id"] == "projects/beta/idea"]
    assert d["rule"] == "outside_scope" and "quire scope add" in d["message"]
    # widening: what is new comes in, and the idea is inside now: published
    res = qjson(home, "scope", "add", "projects/beta/*")
    assert res["only"] == ["projects/alpha/*", "projects/beta/*"] and res["sync"]["snapshot"]
    assert {"projects/alpha/plan.md", "projects/beta/plan.md"} <= set(bob.files())
    # narrowing with a local edit: the edit is held, listed, never lost
    bob.write(make_entry({"id": BETA, "title": BETA, "body": "bob's beta edit\n"}))
    res = qjson(home, "scope", "remove", "projects/beta/*")
    assert {d["id"]: d["held"] for d in res["sync"]["left_scope"]}[BETA] is True
    assert res["held_outside"] == [BETA] and "bob's beta edit" in bob.path(BETA).read_text()
    human = quire(home, "scope", "show").stdout
    assert "projects/alpha/*" in human and BETA in human
    # what would do nothing is refused, nothing changed
    p = quire(home, "scope", "remove", "projects/alpha/*", "--json", check=False)
    assert p.returncode != 0 and '"empty"' in p.stdout
    assert qjson(home, "scope", "show")["only"] == ["projects/alpha/*"]
