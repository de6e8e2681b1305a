"""Device-approval phishing: a stranger starts a device login named like one of the
victim's own devices and gets the victim to approve the code ("your laptop needs
re-approving").

Attack (issue 29): ``POST /v1/device/approve`` approved at once; nothing showed who asked
(address, time) before, and the requester's name was taken as is, so the stranger's
machine became a full device of the victim called exactly like the victim's laptop. Now
``POST /v1/device/preview`` shows the request (name as requested, the name it will get,
address, time, code) and a name that reads like one of the approver's active devices is
given a distinct one at approval (docs/decisions.md, D118)."""

from __future__ import annotations

from typing import Any

import pytest

from shared.dpop import make_proof
from shared.signing import new_private_key, public_b64
from tests.kit.wire import WireMember, WireTeam


def _start(t: WireTeam, name: str) -> tuple[Any, dict[str, Any]]:
    key = new_private_key()
    r = t.raw.post("/v1/device/code", json={"device_name": name,
                                            "device_key": public_b64(key)})
    assert r.status_code == 201, r.text
    return key, r.json()


def _token(t: WireTeam, key: Any, code: str) -> Any:
    return t.raw.post("/v1/token", json={
        "grant_type": "urn:ietf:params:oauth:grant-type:device_code", "device_code": code},
        headers={"DPoP": make_proof(key, "POST", t.url + "/v1/token")})


def _names(m: WireMember) -> list[str]:
    r = m.get("/v1/devices")
    assert r.status_code == 200, r.text
    return [d["name"] for d in r.json()["devices"] if not d.get("revoked_at")]


@pytest.mark.parametrize("requested", [
    "victim-laptop",  # the same name
    "Victim-Laptop ",  # case and a trailing space
    "victim-l\u0430ptop",  # a Cyrillic a
    "victim\uff0dlaptop",  # a full-width hyphen
])
def test_a_requested_name_cannot_pose_as_the_approvers_device(
        team: WireTeam, requested: str) -> None:
    victim = team.member("editor", "victim-laptop")
    key, start = _start(team, requested)
    # what the approver sees before approving
    r = victim.post("/v1/device/preview", {"user_code": start["user_code"]})
    assert r.status_code == 200, r.text
    seen = r.json()
    assert seen["user_code"] == start["user_code"]
    assert seen["requested_name"] == requested
    assert seen["requested_from"] == "testclient"  # the TCP peer the hub saw
    assert isinstance(seen["requested_at"], int) and isinstance(seen["expires_at"], int)
    assert seen["device_name"] != requested and seen["device_name"].startswith(requested)
    assert seen["renamed"] is True and seen["like"] == "victim-laptop"
    # approving gives the distinct name; the stranger's device never reads as the laptop
    r = victim.post("/v1/device/approve", {"user_code": start["user_code"]})
    assert r.status_code == 200, r.text
    assert r.json()["device_name"] == seen["device_name"]
    tok = _token(team, key, start["device_code"])
    assert tok.status_code == 200, tok.text
    assert tok.json()["device_name"] == seen["device_name"]
    names = _names(victim)
    assert names.count("victim-laptop") == 1 and seen["device_name"] in names


def test_a_distinct_name_is_kept_and_previewing_approves_nothing(team: WireTeam) -> None:
    m = team.member("editor", "desk")
    key, start = _start(team, "travel laptop")
    seen = m.post("/v1/device/preview", {"user_code": start["user_code"]}).json()
    assert (seen["device_name"], seen["renamed"]) == ("travel laptop", False)
    assert _token(team, key, start["device_code"]).json()["error"]["code"] == \
        "authorization_pending"  # a preview is no approval
    assert m.post("/v1/device/approve", {"user_code": start["user_code"]}).status_code == 200
    assert _token(team, key, start["device_code"]).status_code == 200
    assert "travel laptop" in _names(m)


@pytest.mark.parametrize("name", ["lap\u202etop", "a\u200bb", "tab\there", "\u00ad", " "])
def test_names_with_invisible_or_control_characters_are_refused(team: WireTeam,
                                                                name: str) -> None:
    r = team.raw.post("/v1/device/code", json={"device_name": name,
                                               "device_key": public_b64(new_private_key())})
    assert (r.status_code, r.json()["error"]["code"]) == (422, "invalid_request"), r.text
