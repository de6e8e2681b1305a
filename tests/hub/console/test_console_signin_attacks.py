"""Attacks on the console's sign-in, on the real hub app (in-process): a session secret
planted in a browser before sign-in (session fixation) and a flood of sign-in starts."""

from __future__ import annotations

from typing import Any

from starlette.testclient import TestClient

from hub.console import sessions
from tests.hub.console.test_console_inproc import _origin, members, sign_in


def test_a_session_secret_planted_before_sign_in_signs_no_one_in(
        hub_app: dict[str, Any]) -> None:
    t = members(hub_app)
    victim = sign_in(hub_app, t["owner"], keep_waiting_secret=True)
    planted = victim.waiting_secret  # what an attacker started and planted in the browser
    assert victim.cookies[sessions.COOKIE] != planted  # rotated at sign-in
    assert victim.get("/console/spaces", follow_redirects=False).status_code == 200
    attacker = TestClient(hub_app["app"], base_url=hub_app["settings"].url.rstrip("/"))
    attacker.cookies.set(sessions.COOKIE, planted)
    for path in ("/console/spaces", "/console/devices", "/console/signin/wait"):
        r = attacker.get(path, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/console/signin", (path, r)


def test_sign_in_starts_are_limited_per_address_and_change_nothing_when_refused(
        hub_app: dict[str, Any]) -> None:
    b = TestClient(hub_app["app"], base_url=hub_app["settings"].url.rstrip("/"))
    limit = hub_app["settings"].device_codes_per_min
    codes = []
    for _ in range(limit + 20):
        r = b.post("/console/signin", headers=_origin(hub_app), follow_redirects=False)
        codes.append(r.status_code)
    assert codes[:limit] == [303] * limit
    assert set(codes[limit:]) == {429}, codes
    r = b.post("/console/signin", headers=_origin(hub_app), follow_redirects=False)
    assert r.status_code == 429 and "too many sign-ins" in r.text
    assert int(r.headers["retry-after"]) >= 1
    with hub_app["hub"].store.read() as conn:  # refused starts stored nothing
        from sqlalchemy import text
        n = conn.execute(text("SELECT count(*) FROM console_sessions")).scalar()
    assert n == limit
