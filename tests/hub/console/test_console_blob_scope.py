"""Read rules reach an attachment's bytes (hub/blob_scope.py, decisions.md D151): a member
whose rules hide ``hr/**`` cannot fetch ``hr/salary.pdf``'s bytes by their hash, through
the blob endpoint, the remote read API or the console, and is answered exactly as for a
hash the space does not hold; a reader the rules allow still gets them (also after the
entry naming them was deleted: history). An upload of the hidden bytes is answered as new
bytes and writes nothing: the caller learns no more than it proved by sending them; a batch
naming the hidden hash without that upload is ``blob_missing``, as for bytes not held.
Through the real hub app; SQLite alone (the blobs' storage is tested on both in
tests/hub/test_blobs.py)."""

from __future__ import annotations

from typing import Any

import pytest

from shared.attachments import attachment_dict, blob_hash
from shared.entry import make_entry
from shared.wire import Op
from tests.hub.console.test_console_inproc import members, sign_in
from tests.kit.wire import delete, redeem

PDF = b"%PDF-1.7 salary bands: 1, 2, 3" * 50
LOGO = b"\x89PNG\r\n\x1a\n" + b"logo" * 200
ABSENT = blob_hash(b"no space holds these bytes")


@pytest.fixture
def db_url() -> None:
    return None


def _attach(m: Any, space: str, eid: str, data: bytes) -> Op:
    r = m.client.put(f"/v1/spaces/{space}/blobs/{blob_hash(data)}", content=data,
                     headers=m.auth)
    assert r.status_code in (200, 201), r.text
    op = Op(make_entry(attachment_dict(eid, data)), None)
    assert m.publish(space, [op]).status_code == 201
    return op


def _deny_hr(owner: Any, space: str, who: str) -> None:
    r = owner.post(f"/v1/spaces/{space}/rules", {"effect": "deny", "who": who,
                                                 "actions": ["read"], "entries": "hr/**"})
    assert r.status_code in (200, 201), r.text


def _error(r: Any) -> tuple[int, str, str]:
    err = r.json()["error"]
    return r.status_code, err["code"], err["message"]


def test_a_hidden_attachments_bytes_are_not_served_by_their_hash(
        hub_app: dict[str, Any]) -> None:
    t = members(hub_app)
    owner, space, ed, viewer = t["owner"], t["space"], t["ed"], t["viewer"]
    _attach(owner, space, "hr/salary.pdf", PDF)
    _deny_hr(owner, space, "viewer")
    url = f"/v1/spaces/{space}/blobs/{blob_hash(PDF)}"

    # the attack: the viewer knows (or guesses) the hash
    hidden = viewer.get(url)
    absent = viewer.get(f"/v1/spaces/{space}/blobs/{ABSENT}")
    assert _error(hidden) == _error(absent) == (404, "not_found", absent.json()["error"][
        "message"]), hidden.text
    assert PDF not in hidden.content
    # the remote read API and the console hide the entry, and its bytes with it
    assert viewer.get(f"/v1/spaces/{space}/entry", params={"id": "hr/salary.pdf"}
                      ).status_code == 404
    vb = sign_in(hub_app, viewer)
    assert vb.get("/console/spaces/team/file", params={"id": "hr/salary.pdf"}
                  ).status_code == 404

    # readers the rules allow still get the bytes, every way
    assert ed.get(url).content == PDF
    doc = owner.get(f"/v1/spaces/{space}/entry", params={"id": "hr/salary.pdf"}).json()
    assert owner.get(doc["blob_url"]).content == PDF
    ob = sign_in(hub_app, owner)
    assert ob.get("/console/spaces/team/file", params={"id": "hr/salary.pdf"}
                  ).content == PDF

    # the same bytes under a name the viewer may read: served, also once that entry is
    # deleted (its history names them)
    op = _attach(owner, space, "public/salary-template.pdf", PDF)
    assert viewer.get(url).content == PDF
    assert owner.publish(space, [delete("public/salary-template.pdf", op.entry.version)]
                         ).status_code == 201
    assert viewer.get(url).content == PDF


def test_an_upload_does_not_tell_whether_hidden_bytes_are_held(
        hub_app: dict[str, Any]) -> None:
    t = members(hub_app)
    owner, space, ed = t["owner"], t["space"], t["ed"]
    _attach(owner, space, "hr/salary.pdf", PDF)
    _deny_hr(owner, space, ed.user_id)
    before = _held(hub_app, space)
    url = f"/v1/spaces/{space}/blobs/{blob_hash(PDF)}"
    # the batch path: naming the hidden hash (and size) without sending the bytes is
    # refused as for bytes not held, so it neither tells nor (once named) serves them
    copy = Op(make_entry(attachment_dict("mine/copy.pdf", PDF)), None)
    r = ed.publish(space, [copy])
    assert r.status_code == 409 and r.json()["error"]["code"] == "blob_missing", r.text
    assert r.json()["error"]["details"]["missing"] == [{"id": "mine/copy.pdf",
                                                       "sha256": blob_hash(PDF)}]
    assert ed.get(url).status_code == 404
    # the upload status, and a whole PUT, answer as for bytes the space does not hold
    assert ed.get(url + "/upload").json() == {"sha256": blob_hash(PDF), "received": 0,
                                              "stored": False}
    r = ed.client.put(url, content=PDF, headers=ed.auth)
    assert r.status_code == 201 and r.json() == {"sha256": blob_hash(PDF), "size": len(PDF),
                                                 "stored": True}, r.text
    # a resumable upload the same: its last range is "stored", as new bytes
    part = ed.client.put(url, content=PDF[:100], headers={
        **ed.auth, "Content-Range": f"bytes 0-99/{len(PDF)}"})
    assert part.json()["received"] == 100 and part.json()["stored"] is False, part.text
    rest = ed.client.put(url, content=PDF[100:], headers={
        **ed.auth, "Content-Range": f"bytes 100-{len(PDF) - 1}/{len(PDF)}"})
    assert rest.status_code == 201 and rest.json()["stored"] is True, rest.text
    assert _held(hub_app, space) == before  # nothing written twice, nothing counted
    # still not readable by its hash: sending the bytes proves only that one has them
    assert ed.get(url).status_code == 404
    # another editor under the same rules: the proof is the sender's alone
    other = redeem(hub_app["client"], owner.invite(space, "editor"), "other-laptop")
    _deny_hr(owner, space, other.user_id)
    theirs = Op(make_entry(attachment_dict("theirs/copy.pdf", PDF)), None)
    assert other.publish(space, [theirs]).json()["error"]["code"] == "blob_missing"
    # having sent them, the editor attaches them under a name of its own, and reads them
    # there; so may anyone who may read that name
    assert ed.publish(space, [copy]).status_code == 201
    assert ed.get(url).content == PDF
    assert other.publish(space, [theirs]).status_code == 201
    # a reader the rules allow sees the idempotent answer it always had
    again = owner.client.put(url, content=PDF, headers=owner.auth)
    assert again.status_code == 200 and again.json()["stored"] is False


def _held(hub_app: dict[str, Any], space: str) -> tuple[list[str], int]:
    """The space's blob hashes and its bytes counted by quotas."""
    from hub import quotas
    from hub.store.blobs_sql import all_hashes_txn
    from hub.store.spaces_sql import find_space_txn

    with hub_app["hub"].store.read() as conn:
        sid = find_space_txn(conn, space).id
        return sorted(all_hashes_txn(conn, sid)), quotas.usage_txn(conn, sid)["bytes"]
