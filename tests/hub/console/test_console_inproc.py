"""The console on the real hub app (in-process): device-approval sign-in, the team browser,
CSRF and origin checks, sign-out, and what a viewer is shown and allowed."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.kit.wire import put, redeem


def _origin(h: dict[str, Any]) -> dict[str, str]:
    return {"Origin": h["settings"].url.rstrip("/")}


def _invites(team: dict[str, Any]) -> int:
    return len(team["owner"].get(f"/v1/spaces/{team['space']}/invites").json()["invites"])


def _csrf(html: str) -> str:
    m = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert m, html
    return m.group(1)


def sign_in(h: dict[str, Any], approver: Any, keep_waiting_secret: bool = False) -> Any:
    """A browser (its own cookie jar) signs in, approved by ``approver``'s device
    (``keep_waiting_secret``: its session secret before sign-in is kept as
    ``browser.waiting_secret``)."""
    from starlette.testclient import TestClient

    from hub.console import sessions

    browser = TestClient(h["app"], base_url=h["settings"].url.rstrip("/"))
    r = browser.post("/console/signin", headers=_origin(h), follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/console/signin/wait", r.text
    if keep_waiting_secret:
        browser.waiting_secret = browser.cookies[sessions.COOKIE]
    wait = browser.get("/console/signin/wait")
    code = re.search(r"quire devices approve ([A-Z0-9-]+)", wait.text)
    assert code, wait.text
    assert 'http-equiv="refresh"' in wait.text
    r = approver.post("/v1/device/approve", {"user_code": code.group(1)})
    assert r.status_code == 200, r.text
    r = browser.get("/console/signin/wait", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/console/spaces"
    return browser


def members(hub_app: dict[str, Any]) -> dict[str, Any]:
    """The owner, a space "team", an editor and a viewer of it: every console test's cast."""
    owner = redeem(hub_app["client"], hub_app["code"], "owner-laptop")
    space = owner.create_space("team")
    ed = redeem(hub_app["client"], owner.invite(space, "editor"), "editor-laptop")
    viewer = redeem(hub_app["client"], owner.invite(space, "viewer"), "viewer-laptop")
    return {"owner": owner, "ed": ed, "viewer": viewer, "space": space}


@pytest.fixture
def team(hub_app: dict[str, Any]) -> dict[str, Any]:
    t = members(hub_app)
    owner, space, ed, viewer = t["owner"], t["space"], t["ed"], t["viewer"]
    v1 = put("page/deploy", "Deploy with the blue button.\n", title="How we deploy")
    assert ed.publish(space, [v1]).status_code == 201
    v2 = put("page/deploy", "Deploy with the green <b>button</b>.\n", base=v1.entry.version,
             title="How we deploy")
    assert ed.publish(space, [v2]).status_code == 201
    return {"owner": owner, "ed": ed, "viewer": viewer, "space": space}


def test_pages_need_a_session(hub_app: dict[str, Any]) -> None:
    c = hub_app["client"]
    for path in ("/console/spaces", "/console/spaces/team", "/console/devices"):
        r = c.get(path, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/console/signin", path


def test_an_approved_browser_reads_searches_and_diffs(hub_app: dict[str, Any],
                                                      team: dict[str, Any]) -> None:
    b = sign_in(hub_app, team["viewer"])
    r = b.get("/console/spaces")
    assert r.status_code == 200 and ">team<" in r.text
    assert "default-src 'none'" in r.headers["content-security-policy"]
    assert "<script" not in r.text
    r = b.get("/console/spaces/team")
    assert "page/deploy" in r.text and "Members, invites and rules" not in r.text
    r = b.get("/console/spaces/team/search", params={"q": "green"})
    assert "page/deploy" in r.text and "1 entry holds" in r.text
    r = b.get("/console/spaces/team/entry", params={"id": "page/deploy"})
    # entry content is escaped, never markup
    assert "&lt;b&gt;button&lt;/b&gt;" in r.text and "<b>button</b>" not in r.text
    r = b.get("/console/spaces/team/diff", params={"id": "page/deploy", "from": 1, "to": 2})
    assert "-Deploy with the blue button." in r.text


def test_a_viewer_is_refused_the_admin_pages_and_actions(hub_app: dict[str, Any],
                                                         team: dict[str, Any]) -> None:
    b = sign_in(hub_app, team["viewer"])
    before = _invites(team)
    r = b.get("/console/spaces/team/members")
    assert r.status_code == 403 and "forbidden" in r.text
    csrf = _csrf(b.get("/console/spaces").text)
    r = b.post("/console/spaces/team/invites", data={"csrf": csrf, "role": "admin"},
               headers=_origin(hub_app))
    assert r.status_code == 403
    assert _invites(team) == before


def test_forms_without_csrf_or_from_another_origin_change_nothing(
        hub_app: dict[str, Any], team: dict[str, Any]) -> None:
    b = sign_in(hub_app, team["owner"])
    csrf = _csrf(b.get("/console/spaces/team/members").text)
    before = _invites(team)
    for data, headers in (({"role": "editor"}, _origin(hub_app)),
                          ({"role": "editor", "csrf": "0" * 64}, _origin(hub_app)),
                          ({"role": "editor", "csrf": csrf}, {"Origin": "https://evil.example"}),
                          ({"role": "editor", "csrf": csrf}, {})):
        r = b.post("/console/spaces/team/invites", data=data, headers=headers)
        assert r.status_code == 403, (data, headers, r.text)
    assert _invites(team) == before
    r = b.post("/console/spaces/team/invites", data={"role": "editor", "csrf": csrf,
                                                      "confirm": "yes"},
               headers=_origin(hub_app))
    assert r.status_code == 200 and re.search(r"qi_[A-Za-z0-9_-]+", r.text)
    assert _invites(team) == before + 1


def test_an_admin_revokes_a_device_from_the_console(hub_app: dict[str, Any],
                                                    team: dict[str, Any]) -> None:
    b = sign_in(hub_app, team["owner"])
    page = b.get("/console/devices").text
    assert "editor-laptop" in page
    path = f"/console/devices/{team['ed'].device_id}/revoke"
    # the first POST previews: nothing is revoked until the confirming one
    r = b.post(path, data={"csrf": _csrf(page)}, headers=_origin(hub_app))
    assert r.status_code == 200 and "Confirm revoke" in r.text
    assert team["ed"].get(f"/v1/spaces/{team['space']}/head").status_code == 200
    r = b.post(path, data={"csrf": _csrf(page), "confirm": "yes"}, headers=_origin(hub_app),
               follow_redirects=False)
    assert r.status_code == 303
    r = team["ed"].get(f"/v1/spaces/{team['space']}/head")
    assert r.status_code == 401 and r.json()["error"]["details"]["reason"] == "device_revoked"


def test_a_cookie_used_after_sign_out_is_refused(hub_app: dict[str, Any],
                                                 team: dict[str, Any]) -> None:
    b = sign_in(hub_app, team["ed"])
    cookie = b.cookies.get("quire_console")
    assert cookie and b.get("/console/spaces").status_code == 200
    r = b.post("/console/signout", data={"csrf": _csrf(b.get("/console/spaces").text)},
               headers=_origin(hub_app), follow_redirects=False)
    assert r.status_code == 303
    from starlette.testclient import TestClient

    thief = TestClient(hub_app["app"], base_url=hub_app["settings"].url.rstrip("/"))
    thief.cookies.set("quire_console", cookie, path="/console")
    r = thief.get("/console/spaces", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/console/signin"


def test_the_session_cookie_is_httponly_and_strict(hub_app: dict[str, Any]) -> None:
    from starlette.testclient import TestClient

    b = TestClient(hub_app["app"], base_url=hub_app["settings"].url.rstrip("/"))
    r = b.post("/console/signin", headers=_origin(hub_app), follow_redirects=False)
    cookies = r.headers.get_list("set-cookie")
    session = next(c for c in cookies if c.startswith("quire_console="))
    assert "HttpOnly" in session and "SameSite=strict" in session and "Path=/console" in session
    r = b.post("/console/signin", headers={"Origin": "https://evil.example"},
               follow_redirects=False)
    assert r.status_code == 403
