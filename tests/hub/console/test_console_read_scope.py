"""The console under read rules (hub/scope.py, D142): a viewer's pages leave out what it
may not read (the entries list, search, the entry page, the activity), and the rules page
says, beside the write verdicts, whether a member or their agent may read an entry.
Template-level: SQLite alone (the scope's storage is tested on both in
tests/hub/test_read_scope.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.hub.console.test_console_inproc import members, sign_in
from tests.kit.wire import put


@pytest.fixture
def db_url() -> None:
    return None


def test_console_pages_follow_read_rules(hub_app: dict[str, Any]) -> None:
    t = members(hub_app)
    owner, space, ed, viewer = t["owner"], t["space"], t["ed"], t["viewer"]
    assert ed.publish(space, [put("page/hr/pay", "zebra pay bands\n", title="Pay bands"),
                              put("page/deploy", "zebra deploy\n", title="Deploy")]
                      ).status_code == 201
    r = owner.post(f"/v1/spaces/{space}/rules", {"effect": "deny", "who": "viewer",
                                                 "actions": ["read"], "entries": "page/hr/*"})
    assert r.status_code in (200, 201), r.text

    b = sign_in(hub_app, viewer)
    for path, params in (("/console/spaces/team", {}),
                         ("/console/spaces/team/search", {"q": "zebra"}),
                         ("/console/spaces/team/activity", {})):
        page = b.get(path, params=params)
        assert page.status_code == 200, page.text
        assert "Pay bands" not in page.text and "page/hr/pay" not in page.text, path
    assert "Deploy" in b.get("/console/spaces/team").text
    assert b.get("/console/spaces/team/entry", params={"id": "page/hr/pay"}).status_code == 404

    a = sign_in(hub_app, owner)
    rules = "/console/admin/spaces/team/rules"
    hidden = a.get(rules, params={"user": viewer.user_id, "entry": "page/hr/pay"}).text
    assert "not readable" in hidden and "deny read page/hr/*" in hidden
    shown = a.get(rules, params={"user": ed.user_id, "entry": "page/hr/pay"}).text
    assert ">readable<" in shown and "no read rule narrows it" in shown


@pytest.mark.parametrize("hidden_exists", [True, False])
def test_a_wiki_link_does_not_tell_whether_a_hidden_entry_exists(
        hub_app: dict[str, Any], hidden_exists: bool) -> None:
    """A probe page links ``[[hr/salaries]]`` next to a visible decoy ``notes/hr/salaries``:
    the viewer, who may not read ``hr/*``, sees the link go to the decoy whether or not
    ``hr/salaries`` exists (a hidden candidate that won the pick and was dropped after
    would turn the link into text, and tell)."""
    t = members(hub_app)
    owner, space, ed, viewer = t["owner"], t["space"], t["ed"], t["viewer"]
    pages = [put("notes/hr/salaries", "decoy\n"), put("notes/probe", "[[hr/salaries]]\n")]
    if hidden_exists:
        pages.append(put("hr/salaries", "the real one\n"))
    assert ed.publish(space, pages).status_code == 201
    r = owner.post(f"/v1/spaces/{space}/rules", {"effect": "deny", "who": "viewer",
                                                 "actions": ["read"], "entries": "hr/*"})
    assert r.status_code in (200, 201), r.text
    page = sign_in(hub_app, viewer).get("/console/spaces/team/entry",
                                        params={"id": "notes/probe"}).text
    assert 'href="/console/spaces/team/entry?id=notes/hr/salaries"' in page, page
