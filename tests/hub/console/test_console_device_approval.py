"""The console's device approval: the Devices page takes a new machine's code, shows what
approving it means (name as requested and as it will be, address, time, the code) and
approves only on the confirming POST, as ``quire devices approve`` does. Attack (issue 29,
device-approval phishing): a stranger's login named like the member's own device."""

from __future__ import annotations

from typing import Any

from shared.dpop import make_proof
from shared.signing import new_private_key, public_b64
from tests.hub.console.test_console_inproc import _csrf, _origin, members, sign_in


def _token(h: dict[str, Any], key: Any, code: str) -> Any:
    return h["client"].post("/v1/token", json={
        "grant_type": "urn:ietf:params:oauth:grant-type:device_code", "device_code": code},
        headers={"DPoP": make_proof(key, "POST", h["settings"].url.rstrip("/") + "/v1/token")})


def test_the_console_shows_a_login_before_approving_it(hub_app: dict[str, Any]) -> None:
    t = members(hub_app)
    browser = sign_in(hub_app, t["owner"])
    key = new_private_key()
    start = hub_app["client"].post("/v1/device/code", json={
        "device_name": "owner-laptop", "device_key": public_b64(key)}).json()
    csrf = _csrf(browser.get("/console/devices").text)
    r = browser.post("/console/devices/approve", headers=_origin(hub_app),
                     data={"csrf": csrf, "code": start["user_code"].lower()})
    assert r.status_code == 200, r.text
    page = r.text.replace("&#39;", "'")
    assert "Approve a new device" in page and start["user_code"] in page
    assert "'owner-laptop'" in page and "this one will be 'owner-laptop (2)'" in page
    assert "testclient" in page  # the address the login came from
    assert _token(hub_app, key, start["device_code"]).json()["error"]["code"] == \
        "authorization_pending"  # the preview approved nothing
    r = browser.post("/console/devices/approve", headers=_origin(hub_app), follow_redirects=False,
                     data={"csrf": csrf, "code": start["user_code"], "confirm": "yes"})
    assert r.status_code == 303, r.text
    assert r.headers["location"] == "/console/devices?done=device_approved"
    tok = _token(hub_app, key, start["device_code"])
    assert tok.status_code == 200 and tok.json()["device_name"] == "owner-laptop (2)"
    names = [d["name"] for d in t["owner"].get("/v1/devices").json()["devices"]]
    assert names.count("owner-laptop") == 1 and "owner-laptop (2)" in names
