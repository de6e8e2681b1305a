"""Read scopes in the console (hub/console/scope_pages.py, decisions.md D151): the scope
page says what each member may read (rules, counts) and, for one member or their agent,
which entries; the rule editor's preview of a read rule says who would stop or start
reading how many entries, with examples, before anything is written. Through the real
console app; SQLite alone (the scopes themselves are tested on both in
tests/hub/test_read_scope.py)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from hub.console.http import CSP
from tests.hub.console.test_console_inproc import _csrf, _origin, members, sign_in
from tests.kit.wire import put


@pytest.fixture
def db_url() -> None:
    return None


def _no_inline_script(html: str) -> None:
    assert "default-src 'none'" in CSP and "script" not in CSP  # no script runs at all
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", html), "an inline script"
    assert not re.search(r"\son[a-z]+=", html), "an inline event handler"


def test_a_read_rule_is_previewed_then_each_members_scope_is_shown(
        hub_app: dict[str, Any]) -> None:
    t = members(hub_app)
    owner, space, ed, viewer = t["owner"], t["space"], t["ed"], t["viewer"]
    assert ed.publish(space, [put("page/hr/pay", "pay bands\n"),
                              put("page/hr/leave", "leave\n"),
                              put("page/deploy", "deploy\n")]).status_code == 201
    b = sign_in(hub_app, owner)
    members_url = "/console/spaces/team/members"
    rule = {"effect": "deny", "who": "viewer", "actions": "read", "entries": "page/hr/*"}

    def preview(**form: str) -> str:
        r = b.post("/console/spaces/team/rules", data={
            "csrf": _csrf(b.get(members_url).text), **form}, headers=_origin(hub_app))
        assert r.status_code == 200, r.text
        return str(r.text)

    # a write rule's preview says nothing of reading; a read rule's with a tag no entry
    # holds says nobody would read differently
    assert "Who would read differently" not in preview(
        effect="deny", who="editor", actions="delete", entries="page/*")
    tagged = preview(effect="deny", who="viewer", actions="read", entries="*", tags="secret")
    assert "Nobody: no member or agent would read anything more or less." in tagged
    assert "tagged secret" in tagged and 'name="tags" value="secret"' in tagged

    # the preview: who stops reading what; nothing written yet
    r = b.post("/console/spaces/team/rules",
               data={"csrf": _csrf(b.get(members_url).text), **rule}, headers=_origin(hub_app))
    assert r.status_code == 200, r.text
    assert "Who would read differently" in r.text
    line = re.search(r"<li>([^<]*stops reading[^<]*)</li>", r.text)
    assert line and "(viewer) stops reading 2 entries: page/hr/leave, page/hr/pay" in line[1]
    assert "(editor)" not in r.text  # the editor's reading does not change
    _no_inline_script(r.text)
    assert viewer.get(f"/v1/spaces/{space}/entry", params={"id": "page/hr/pay"}
                      ).status_code == 200  # a preview changes nothing
    r = b.post("/console/spaces/team/rules",
               data={"csrf": _csrf(b.get(members_url).text), **rule, "confirm": "yes"},
               headers=_origin(hub_app), follow_redirects=False)
    assert r.status_code == 303, r.text

    # the scope page: every member, the rules that decide, the counts
    scope_url = "/console/admin/spaces/team/scope"
    page = b.get(scope_url)
    assert page.status_code == 200, page.text
    assert page.headers["content-security-policy"] == CSP
    _no_inline_script(page.text)
    rows = {m[0]: m[1] for m in re.findall(
        r"<tr><td>[^<]*</td><td>(viewer|editor|admin)</td><td>([^<]*)</td>", page.text)}
    assert rows == {"viewer": "1 of 3", "editor": "3 of 3", "admin": "3 of 3"}, rows
    assert "deny read page/hr/*" in page.text and "none: reads everything" in page.text
    # one member in detail: the entries they read and the ones hidden
    one = b.get(scope_url, params={"user": viewer.user_id}).text
    readable = one.split('class="scope-readable"')[1].split("</ul>")[0]
    hidden = one.split('class="scope-hidden"')[1].split("</ul>")[0]
    assert "page/deploy" in readable and "page/hr" not in readable
    assert "page/hr/leave" in hidden and "page/hr/pay" in hidden

    # an agent of the editor, narrowed to one folder: its own scope
    for body in ({"effect": "deny", "who": "agent:scout", "actions": ["read"],
                  "entries": "*"},
                 {"effect": "allow", "who": "agent:scout", "actions": ["read"],
                  "entries": "page/hr/*"}):
        assert owner.post(f"/v1/spaces/{space}/rules", body).status_code in (200, 201)
    agent = b.get(scope_url, params={"user": ed.user_id, "agent": "scout"}).text
    readable = agent.split('class="scope-readable"')[1].split("</ul>")[0]
    assert "page/hr/pay" in readable and "page/deploy" not in readable
    assert "through agent scout" in agent

    # removing a read rule is previewed the same way: who would start reading
    rid = next(r["id"] for r in owner.get(f"/v1/spaces/{space}/rules").json()["rules"]
               if r["who"] == "viewer")
    rules_page = "/console/admin/spaces/team/rules"
    r = b.post(f"{rules_page}/{rid}/remove", data={"csrf": _csrf(b.get(rules_page).text)},
               headers=_origin(hub_app))
    assert "(viewer) starts reading 2 entries: page/hr/leave, page/hr/pay" in r.text, r.text

    # only admins see scopes
    vb = sign_in(hub_app, viewer)
    assert vb.get(scope_url).status_code == 403

