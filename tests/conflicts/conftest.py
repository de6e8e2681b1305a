"""Fixtures for the conflict tests: the replica's end-to-end fixtures (real ``quire hub
serve`` processes, the real CLI, one ``QUIRE_HOME`` per member) plus a helper that makes
two members edit the same entry so the later one holds a conflict."""

from __future__ import annotations

from typing import Any

import pytest

from shared.entry import Entry, make_entry
from tests.replica.conftest import Member, Team, hub, owner, qjson, quire, team  # noqa: F401


def entry(eid: str, body: str, title: str = "Deploy", **kw: Any) -> Entry:
    return make_entry({"id": eid, "title": title, "body": body, **kw})


def overlap(team: Team, eid: str = "page/deploy", *, base: str = "step one\n",
            mine: str = "step one by alice\n", theirs: str = "step one by bob\n",
            **kw: Any) -> tuple[Member, Member]:
    """alice and bob both edit line 1 of ``eid``; bob syncs first, alice holds the conflict."""
    alice, bob = team.member("alice"), team.member("bob")
    alice.write(entry(eid, base, **kw))
    alice.sync()
    bob.sync()
    bob.write(entry(eid, theirs, **kw))
    bob.sync()
    alice.write(entry(eid, mine, **kw))
    alice.sync()
    return alice, bob


def packets(m: Member) -> list[dict[str, Any]]:
    return qjson(m.home, "conflicts", "list")["packets"]


@pytest.fixture
def pair(team: Team) -> tuple[Member, Member]:
    return overlap(team)
