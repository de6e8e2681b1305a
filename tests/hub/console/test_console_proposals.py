"""Proposals in the console (hub/console/proposal_pages.py), on the real hub app in-process:
an agent's refused change is listed with its reason and diff; a viewer (who may not make
the change) gets no button and a forged accept form is refused; a form without the CSRF
token changes nothing; the owner accepts and it is published, with a confirmation banner."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.hub.console.test_console_inproc import _csrf, _origin, members, sign_in
from tests.kit.pg import pg_database, require_pg
from tests.kit.wire import WireMember, put


@pytest.fixture(params=["sqlite"] + (["postgresql"] if os.environ.get("QUIRE_LONG_E2E")
                                     else []))
def db_url(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """SQLite; PostgreSQL too with QUIRE_LONG_E2E (the default run keeps within its time
    budget)."""
    if request.param == "sqlite":
        yield None
        return
    require_pg()
    with pg_database() as url:
        yield url


def test_a_member_accepts_a_proposal_in_the_console(hub_app: dict[str, Any]) -> None:
    t = members(hub_app)
    owner, ed, viewer, space = t["owner"], t["ed"], t["viewer"], t["space"]
    g = put("guardrail/prod", "never push to prod\n", title="prod", meta={"severity": "block"})
    assert owner.publish(space, [g]).status_code == 201
    d = ed.post("/v1/delegations", {"space": space, "agent": "scout", "scope": "write",
                                    "ttl_seconds": 3600}).json()
    agent = WireMember(hub_app["client"], d["token"], ed.key, ed.user_id, ed.device_id)
    lowered = put("guardrail/prod", "push with care\n", base=g.entry.version, title="prod",
                  meta={"severity": "warn"})
    r = agent.post(f"/v1/spaces/{space}/proposals",
                   {"op": lowered.to_wire(), "reason": "the <b>runbook</b> says warn"})
    assert r.status_code == 201, r.text
    pid = r.json()["proposal"]["id"]
    page = f"/console/spaces/team/proposals/{pid}"

    # a viewer sees it (escaped), without the buttons; a forged accept is refused
    b = sign_in(hub_app, viewer)
    listing = b.get("/console/spaces/team/proposals").text
    assert "guardrail/prod" in listing and "scout" in listing and "editor" in listing
    html = b.get(page).text
    assert "&lt;b&gt;runbook&lt;/b&gt;" in html and "<b>runbook" not in html
    assert "Accept and publish" not in html and "You may not make this change" in html
    seq = owner.head(space)["seq"]
    r = b.post(page + "/decide", data={"csrf": _csrf(html), "decision": "accept"},
               headers=_origin(hub_app), follow_redirects=False)
    assert r.status_code == 403, r.text
    assert owner.head(space)["seq"] == seq

    # the owner: the diff and the button; without the CSRF token nothing changes
    o = sign_in(hub_app, owner)
    html = o.get(page).text
    assert "Accept and publish" in html
    assert re.search(r"<del>-meta: \{&#34;severity&#34;: &#34;block&#34;\}</del>", html), html
    r = o.post(page + "/decide", data={"decision": "accept"}, headers=_origin(hub_app),
               follow_redirects=False)
    assert r.status_code == 403 and owner.head(space)["seq"] == seq
    r = o.post(page + "/decide", data={"csrf": _csrf(html), "decision": "accept"},
               headers=_origin(hub_app), follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].endswith(f"{pid}?done=accepted")
    done = o.get(r.headers["location"]).text
    assert "Accepted: the change is published" in done and "published at seq" in done
    assert owner.head(space)["seq"] == seq + 1
    e = owner.get(f"/v1/spaces/{space}/entry", params={"id": "guardrail/prod"}).json()
    assert e["version"] == lowered.entry.version
    # decided: no more buttons, and a second accept is refused
    assert "Accept and publish" not in done
    r = o.post(page + "/decide", data={"csrf": _csrf(done), "decision": "accept"},
               headers=_origin(hub_app), follow_redirects=False)
    assert r.status_code == 409
