"""Backlinks at the hub (hub/backlinks.py): the remote read API's ``backlinks`` and the
console's "Linked from", resolved as replicas resolve links (shared/links.py); a page that
only mentions the name is no backlink."""

from __future__ import annotations

from typing import Any

import pytest

from tests.hub.console.test_console_inproc import members, sign_in
from tests.kit.wire import put

pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


def test_backlinks_through_the_api_and_the_console(hub_app: dict[str, Any]) -> None:
    t = members(hub_app)
    ed, space = t["ed"], t["space"]
    assert ed.publish(space, [
        put("Projects/Release Plan", "dates\n", title="Release plan"),
        put("Projects/Release Plan Draft", "old dates\n"),
        put("Meeting Notes/Kickoff", "see [[release plan|the plan]]\n", title="Kickoff"),
        put("Home", "[p](Projects/Release%20Plan.md) and [[Release Plan Draft]]\n"),
        put("Notes", "the release plan is late, [[Kickoff]]\n"),
    ]).status_code == 201
    r = t["viewer"].get(f"/v1/spaces/{space}/backlinks",
                        params={"id": "Projects/Release Plan"})
    assert r.status_code == 200, r.text
    doc = r.json()
    assert [(b["id"], b["via"]) for b in doc["backlinks"]] == [
        ("Home", "markdown"), ("Meeting Notes/Kickoff", "wikilink")]
    assert doc["more"] is False and doc["head"]["seq"] >= 1
    r = t["viewer"].get(f"/v1/spaces/{space}/backlinks", params={"id": "Nowhere"})
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"

    page = sign_in(hub_app, t["viewer"]).get("/console/spaces/team/entry",
                                             params={"id": "Projects/Release Plan"})
    assert page.status_code == 200, page.text
    linked = page.text.split("<h2>Linked from</h2>", 1)[1].split("<h2>", 1)[0]
    assert "Kickoff" in linked and "Home" in linked and "Notes</a>" not in linked


@pytest.mark.parametrize("hidden_exists", [True, False])
def test_backlinks_under_read_rules_tell_nothing_of_hidden_pages(hub_app: dict[str, Any],
                                                                  hidden_exists: bool) -> None:
    """The viewer may not read ``Secret/*``. A hidden page that links to a visible one is
    never listed; a hidden page is ``not_found``, as one that does not exist; and a hidden
    ``Secret/Plan`` that would win ``[[Plan]]`` for a reader who sees it does not take the
    backlink from the visible ``Projects/Deep/Plan`` for the viewer, whether or not it
    exists (its absence from the answer would tell that it does)."""
    t = members(hub_app)
    owner, ed, viewer, space = t["owner"], t["ed"], t["viewer"], t["space"]
    pages = [put("Projects/Deep/Plan", "visible\n"), put("Home", "see [[Plan]]\n"),
             put("Secret/Notes", "about [[Projects/Deep/Plan]]\n")]
    if hidden_exists:
        pages.append(put("Secret/Plan", "hidden\n"))
    assert ed.publish(space, pages).status_code == 201
    r = owner.post(f"/v1/spaces/{space}/rules", {"effect": "deny", "who": "viewer",
                                                 "actions": ["read"], "entries": "Secret/*"})
    assert r.status_code in (200, 201), r.text

    def back(m: Any, eid: str) -> Any:
        return m.get(f"/v1/spaces/{space}/backlinks", params={"id": eid})

    assert [b["id"] for b in back(viewer, "Projects/Deep/Plan").json()["backlinks"]] == [
        "Home"]
    seen = [b["id"] for b in back(owner, "Projects/Deep/Plan").json()["backlinks"]]
    assert seen == (["Secret/Notes"] if hidden_exists else ["Home", "Secret/Notes"])
    for eid in ("Secret/Plan", "Secret/Nothing"):
        r = back(viewer, eid)
        assert r.status_code == 404 and r.json()["error"]["details"] == {"reason": "no_entry"}
