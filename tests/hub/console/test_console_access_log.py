"""Console requests on the access line (hub/api/observe.py): their route template, the
signed-in member's user and device, and the client address, as for API requests.

On 0506cf5 every console request was logged and measured as route ``(unmatched)`` with no
user or device, and no access line carried the client's address."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from tests.hub.console.test_console_inproc import members, sign_in


def _access(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [r.quire for r in caplog.records  # type: ignore[attr-defined]
            if r.name == "quire.hub.access" and hasattr(r, "quire")]


def test_console_requests_name_their_route_member_and_client(
        hub_app: dict[str, Any], caplog: pytest.LogCaptureFixture) -> None:
    team = members(hub_app)
    with caplog.at_level(logging.INFO, logger="quire.hub"):
        browser = sign_in(hub_app, team["owner"])
    # a successful sign-in is logged (before: absent from the log)
    signins = [r.quire for r in caplog.records  # type: ignore[attr-defined]
               if r.getMessage() == "console_signin"]
    assert len(signins) == 1 and signins[0]["user"] == team["owner"].user_id
    assert signins[0]["method"] == "device_approval" and signins[0]["device"]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="quire.hub.access"):
        assert browser.get("/console/spaces").status_code == 200
        assert hub_app["client"].get("/console/signin").status_code == 200
        assert hub_app["client"].get("/healthz").status_code == 200
    lines = _access(caplog)
    spaces = [x for x in lines if x["route"] == "/console/spaces"]
    assert len(spaces) == 1, lines
    assert spaces[0]["user"] == team["owner"].user_id and spaces[0]["device"]
    assert any(x["route"] == "/console/signin" for x in lines), lines
    assert all(x["route"] != "(unmatched)" for x in lines), lines
    assert all(x.get("client") == "testclient" for x in lines), lines
