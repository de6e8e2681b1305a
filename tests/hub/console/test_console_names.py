"""The console shows people's names and UTC times, never ids (docs/console.md, "Names and times"):
the entry history, the diff, the audit, the members and devices pages; and the history's
links of an older epoch open that epoch's version and change (they answered 404)."""

from __future__ import annotations

import html as htmllib
import re
from typing import Any

import pytest

from tests.hub.console.test_console_inproc import _csrf, sign_in
from tests.kit.wire import WireMember, put

# a canonical id (lowercase Crockford base32, 26 characters: shared/ids.py), in any case
ULID = re.compile(r"(?<![0-9A-Za-z])[0-9A-HJKMNP-TV-Z]{26}(?![0-9A-Za-z])", re.IGNORECASE)
TIME = re.compile(r'<time datetime="\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ">[^<]* UTC</time>')


def _redeem(client: Any, code: str, user_name: str, device: str) -> WireMember:
    from shared.signing import new_private_key, public_b64

    key = new_private_key()
    r = client.post("/v1/invites/redeem", json={
        "code": code, "device_name": device, "user_name": user_name,
        "device_key": public_b64(key)})
    assert r.status_code == 201, r.text
    d = r.json()
    return WireMember(client, d["access_token"], key, d["user_id"], d["device_id"],
                      refresh_token=d["refresh_token"])


@pytest.fixture
def cast(hub_app: dict[str, Any]) -> dict[str, Any]:
    c = hub_app["client"]
    owner = _redeem(c, hub_app["code"], "Olga Owner", "olga-laptop")
    space = owner.create_space("team")
    ann = _redeem(c, owner.invite(space, "editor"), "Ann Lee", "ann-laptop")
    bo = _redeem(c, owner.invite(space, "viewer"), "Bo Diaz", "bo-desktop")
    v1 = put("page/deploy", "Deploy with the blue button.\n", title="How we deploy")
    assert ann.publish(space, [v1]).status_code == 201
    v2 = put("page/deploy", "Deploy with the green button.\n", base=v1.entry.version,
             title="How we deploy")
    assert owner.publish(space, [v2]).status_code == 201
    return {"owner": owner, "ann": ann, "bo": bo, "space": space, "v2": v2}


def _text(page: str) -> str:
    """What a reader sees: the page without its tags (attributes hold ids for forms)."""
    return htmllib.unescape(re.sub(r"<[^>]+>", " ", page))


def _no_ids(page: str, cast: dict[str, Any], hub_app: dict[str, Any]) -> None:
    text = _text(page)
    found = ULID.search(text)
    assert not found, text[max(0, found.start() - 200):found.end() + 50]
    with hub_app["hub"].store.read() as conn:
        from hub.store.spaces_sql import get_space_txn

        epoch = get_space_txn(conn, cast["space"]).epoch
    for m in ("owner", "ann", "bo"):
        for i in (cast[m].user_id, cast[m].device_id):
            assert i[:8].lower() not in text.lower(), (m, i)
    for i in (cast["space"], epoch):
        assert i[:8].lower() not in text.lower(), i


def test_history_and_diff_show_names_and_utc_times(hub_app: dict[str, Any],
                                                   cast: dict[str, Any]) -> None:
    b = sign_in(hub_app, cast["bo"])
    r = b.get("/console/spaces/team/entry", params={"id": "page/deploy"})
    assert r.status_code == 200, r.text
    text = _text(r.text)
    assert "Ann Lee" in text and "Olga Owner" in text and "ann-laptop" in r.text
    assert "last changed" in text and "seq" not in text.replace("sequence", "")
    assert len(TIME.findall(r.text)) >= 3, r.text  # the header and both history rows
    _no_ids(r.text, cast, hub_app)
    r = b.get("/console/spaces/team")  # the entries list: when, not a seq or the epoch
    assert "page/deploy" in r.text and TIME.search(r.text) and "seq" not in _text(r.text)
    _no_ids(r.text, cast, hub_app)
    r = b.get("/console/spaces/team/entry", params={"id": "page/deploy"})
    diff = re.search(r'href="(/console/spaces/team/diff\?[^"]+)">changes<', r.text)
    assert diff, r.text
    r = b.get(htmllib.unescape(diff.group(1)))
    assert r.status_code == 200 and "-Deploy with the blue button." in r.text
    assert "Olga Owner" in r.text and TIME.search(r.text)
    _no_ids(r.text, cast, hub_app)


def test_history_links_of_an_older_epoch_open_that_version(hub_app: dict[str, Any],
                                                           cast: dict[str, Any]) -> None:
    owner, ann, space = cast["owner"], cast["ann"], cast["space"]
    assert owner.post(f"/v1/spaces/{space}/epoch", {"reason": "rotate"}).status_code in (
        200, 201)
    v3 = put("page/deploy", "Deploy by merging.\n", base=cast["v2"].entry.version,
             title="How we deploy")
    assert ann.publish(space, [v3]).status_code == 201
    b = sign_in(hub_app, cast["bo"])
    r = b.get("/console/spaces/team/entry", params={"id": "page/deploy"})
    assert r.status_code == 200 and "Deploy by merging." in r.text
    versions = [htmllib.unescape(h) for h in re.findall(
        r'href="(/console/spaces/team/entry\?[^"]+)">this version<', r.text)]
    diffs = [htmllib.unescape(h) for h in re.findall(
        r'href="(/console/spaces/team/diff\?[^"]+)">(?:changes|created)<', r.text)]
    assert len(versions) == 3 and len(diffs) == 3, r.text
    bodies = ["Deploy by merging.", "Deploy with the green button.",
              "Deploy with the blue button."]
    for link, body in zip(versions, bodies, strict=True):  # newest first
        got = b.get(link)
        assert got.status_code == 200 and body in got.text, (link, got.text)
        assert "An earlier version" in got.text or link == versions[0]
    for link, (new, old) in zip(diffs, [(bodies[0], bodies[1]), (bodies[1], bodies[2]),
                                        (bodies[2], None)], strict=True):
        got = b.get(link)
        assert got.status_code == 200, (link, got.text)
        assert f"+{new}" in got.text and (old is None or f"-{old}" in got.text), got.text
        _no_ids(got.text, cast, hub_app)


def test_audit_members_and_devices_show_names_not_ids(hub_app: dict[str, Any],
                                                      cast: dict[str, Any]) -> None:
    r = cast["owner"].post(f"/v1/spaces/{cast['space']}/rules", {
        "effect": "deny", "who": cast["ann"].user_id, "actions": ["delete"],
        "entries": "page/*"})
    assert r.status_code in (200, 201), r.text
    rule = r.json()["rule"]["id"]
    r = cast["owner"].post(f"/v1/spaces/{cast['space']}/screening/allows", {
        "entry": "page/deploy", "version": cast["v2"].entry.version, "rule": "*"})
    assert r.status_code in (200, 201), r.text
    b = sign_in(hub_app, cast["owner"])
    r = b.get("/console/spaces/team/screening")
    assert "Olga Owner" in r.text.split("<main", 1)[1]
    r = b.get("/console/admin/spaces/team/rules", params={
        "user": cast["ann"].user_id, "entry": "page/deploy"})
    assert "Ann Lee" in _text(r.text) and "(a space rule)" in r.text
    _no_ids(r.text, cast, hub_app)
    r = b.post(f"/console/admin/spaces/team/rules/{rule}/remove", data={"csrf": _csrf(r.text)},
               headers={"Origin": hub_app["settings"].url.rstrip("/")})
    assert "Remove a rule" in r.text and "deny Ann Lee delete" in r.text  # a preview
    _no_ids(r.text, cast, hub_app)
    for path in ("/console/spaces/team/screening", "/console/admin/spaces/team/audit", "/console/admin/audit",
                 "/console/spaces/team/members", "/console/devices",
                 "/console/admin/spaces/team/access"):
        r = b.get(path)
        assert r.status_code == 200, (path, r.text)
        _no_ids(r.text, cast, hub_app)
        assert TIME.search(r.text), path
    r = b.get("/console/admin/spaces/team/audit")
    text = _text(r.text)
    assert "Ann Lee" in text and "Olga Owner" in text and "publish" in text
    # the actor filter still finds a person by name; the export keeps the ids
    r = b.get("/console/admin/spaces/team/audit", params={"actor": "ann"})
    rows = r.text[r.text.index('<table class="audit"'):]
    assert "Ann Lee" in rows and "Olga Owner" not in rows
    hub_text = _text(b.get("/console/admin/audit").text)
    assert "invite.create" in hub_text and "expires_at: 20" in hub_text  # a time, not ms
    r = b.get("/console/admin/spaces/team/audit.jsonl")
    assert cast["ann"].user_id in r.text
