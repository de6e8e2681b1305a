"""Attachments' bytes at the hub (hub/blobs.py), SQLite and PostgreSQL: uploaded before the
batch that names them, checked on receipt, counted by quotas; the guard refuses a batch
naming bytes the space does not hold (``blob_missing``) or over the space's limit on one
attachment (``too_large``, naming the file). Nothing is written by a refusal."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shared.attachments import attachment_dict, blob_hash
from shared.entry import make_entry
from shared.wire import Op
from tests.kit.pg import pg_database, require_pg
from tests.kit.wire import WireMember, WireTeam, make_wire_team

PNG = b"\x89PNG\r\n\x1a\n" + b"pixels" * 1000


LONG = bool(os.environ.get("QUIRE_LONG_E2E"))


# SQLite; PostgreSQL too with QUIRE_LONG_E2E=1 (the default run keeps within its budget)
@pytest.fixture(params=["sqlite"] + (["postgresql"] if LONG else []))
def team(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[WireTeam]:
    if request.param == "sqlite":
        yield from make_wire_team(tmp_path / "data", None)
        return
    require_pg()
    with pg_database() as url:
        yield from make_wire_team(tmp_path / "data", url)


def _put_blob(m: WireMember, space: str, data: bytes, sha: str | None = None):  # noqa: ANN202
    return m.client.put(f"/v1/spaces/{space}/blobs/{sha or blob_hash(data)}", content=data,
                        headers=m.auth)


def _attach(eid: str, data: bytes) -> Op:
    return Op(make_entry(attachment_dict(eid, data)), None)


def test_blobs_upload_before_the_batch_checked_limited_and_counted(team: WireTeam) -> None:
    """One hub, several refusals (a hub a test costs its setup on each database)."""
    t, ed = team, team.editor
    before = ed.head(t.space)
    r = ed.publish(t.space, [_attach("img/diagram.png", PNG)])
    assert r.status_code == 409, r.text
    err = r.json()["error"]
    assert err["code"] == "blob_missing"
    assert err["details"]["missing"] == [{"id": "img/diagram.png", "sha256": blob_hash(PNG)}]
    assert ed.head(t.space)["digest"] == before["digest"]  # nothing written
    assert t.viewer.client.put(f"/v1/spaces/{t.space}/blobs/{blob_hash(PNG)}", content=PNG,
                               headers=t.viewer.auth).status_code == 403  # viewers read only
    r = _put_blob(ed, t.space, PNG)
    assert r.status_code == 201 and r.json() == {"sha256": blob_hash(PNG), "size": len(PNG),
                                                 "stored": True}, r.text
    assert _put_blob(ed, t.space, PNG).json()["stored"] is False  # idempotent by hash
    assert ed.publish(t.space, [_attach("img/diagram.png", PNG)]).status_code == 201
    got = t.viewer.get(f"/v1/spaces/{t.space}/blobs/{blob_hash(PNG)}",
                       params={"name": "img/diagram.png"})
    assert got.status_code == 200 and got.content == PNG
    assert got.headers["content-type"] == "image/png"
    assert got.headers["x-content-type-options"] == "nosniff"
    assert got.headers["content-disposition"].startswith('attachment; filename="diagram.png"')
    assert "sandbox" in got.headers["content-security-policy"]
    # a blob is the space's: another space's members get not_found for the same hash
    other = t.owner.create_space("other")
    assert t.owner.get(f"/v1/spaces/{other}/blobs/{blob_hash(PNG)}").status_code == 404
    _refuses_bytes_that_do_not_hash_to_the_url(t)
    _refuses_a_range_that_does_not_follow_the_bytes_received(t)
    _refuses_an_attachment_over_the_limit_naming_the_file(t)
    _refuses_a_malformed_attachment_entry(t)


def _refuses_a_range_that_does_not_follow_the_bytes_received(t: WireTeam) -> None:
    ed, data = t.editor, b"%PDF" + bytes(range(256)) * 8
    url = f"/v1/spaces/{t.space}/blobs/{blob_hash(data)}"

    def put(start: int, end: int) -> Any:
        return ed.client.put(url, content=data[start:end + 1], headers={
            **ed.auth, "Content-Range": f"bytes {start}-{end}/{len(data)}"})

    assert put(0, 999).json()["received"] == 1000
    r = put(1500, 1599)  # a gap: where to resume is in the refusal
    assert r.status_code == 422 and r.json()["error"]["details"]["received"] == 1000, r.text
    assert ed.get(url + "/upload").json() == {"sha256": blob_hash(data), "received": 1000,
                                              "stored": False}
    r = put(1000, len(data) - 1)
    assert r.status_code == 201 and r.json()["stored"] is True, r.text
    assert ed.get(url).content == data


def _refuses_bytes_that_do_not_hash_to_the_url(t: WireTeam) -> None:
    ed = t.editor
    r = _put_blob(ed, t.space, PNG, sha=blob_hash(b"something else"))
    assert r.status_code == 422 and r.json()["error"]["code"] == "blob_mismatch", r.text
    assert ed.get(f"/v1/spaces/{t.space}/blobs/{blob_hash(b'something else')}"
                  ).status_code == 404


def _refuses_an_attachment_over_the_limit_naming_the_file(t: WireTeam) -> None:
    ed = t.editor
    big = b"\0" * (30 * 1024 * 1024)  # 30 MiB against the default 25 MiB
    before = ed.head(t.space)
    r = _put_blob(ed, t.space, big)
    assert r.status_code == 413 and r.json()["error"]["code"] == "too_large", r.text
    assert r.json()["error"]["details"]["limit"] == 25 * 1024 * 1024
    r = ed.publish(t.space, [_attach("video/talk.mp4", big)])  # the entry alone, too
    assert r.status_code == 413, r.text
    err = r.json()["error"]
    assert err["code"] == "too_large" and err["details"]["id"] == "video/talk.mp4"
    assert "video/talk.mp4" in err["message"]
    assert ed.head(t.space)["digest"] == before["digest"]
    with t.hub.store.read() as conn:
        from hub.store.blobs_sql import all_hashes_txn

        assert blob_hash(big) not in all_hashes_txn(conn, t.space)
    # a space may set its own limit; the blob counts in its bytes when stored
    assert t.owner.post(f"/v1/spaces/{t.space}/quota",
                        {"max_attachment_bytes": 1000}).status_code == 200
    assert _put_blob(ed, t.space, PNG).status_code == 413
    assert t.owner.post(f"/v1/spaces/{t.space}/quota",
                        {"max_attachment_bytes": None}).status_code == 200
    used = ed.get(f"/v1/spaces/{t.space}/usage").json()["bytes"]
    jpg = b"\xff\xd8\xff" + b"jpeg" * 100
    assert _put_blob(ed, t.space, jpg).status_code == 201
    assert ed.get(f"/v1/spaces/{t.space}/usage").json()["bytes"] == used + len(jpg)


def _refuses_a_malformed_attachment_entry(t: WireTeam) -> None:
    ed = t.editor
    d = attachment_dict("img/x.png", PNG)
    d["body"] = "<script>"  # an attachment is its bytes, nothing else
    r = ed.publish(t.space, [Op(make_entry(d), None)])
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request", r.text


@pytest.mark.skipif(not LONG, reason="a restore costs ~8 s: with QUIRE_LONG_E2E=1")
def test_backup_and_restore_carry_attachments(tmp_path: Path) -> None:
    """A SQLite backup holds the blobs table; a restore brings back a purged attachment
    with its bytes (``hub/restore.py``; PostgreSQL: ``pg_dump`` holds the table alike)."""
    from hub.backup import take
    from hub.restore import restore

    for t in make_wire_team(tmp_path / "data", None):
        ed = t.editor
        assert _put_blob(ed, t.space, PNG).status_code == 201
        assert ed.publish(t.space, [_attach("img/diagram.png", PNG)]).status_code == 201
        out = tmp_path / "hub.backup"
        take(t.hub.settings.database_url, out, t.hub.now())
        r = t.owner.post(f"/v1/spaces/{t.space}/purge",
                         {"entries": ["img/diagram.png"], "reason": "test"})
        assert r.status_code == 200 and r.json()["blobs_removed"] == 1, r.text
        assert ed.get(f"/v1/spaces/{t.space}/blobs/{blob_hash(PNG)}").status_code == 404
        doc = restore(t.hub.settings, str(out), t.hub.now())
        assert [d["space"] for d in doc["restored"]] == [t.space]
        got = ed.get(f"/v1/spaces/{t.space}/blobs/{blob_hash(PNG)}")
        assert got.status_code == 200 and got.content == PNG
