"""Attachments in the console and the remote read API (docs/console.md; decisions.md
D147): an image is shown inline from the console's own origin (its CSP allows
``img-src 'self'``), any other file is a download link; the file is never served as a
page (``nosniff``, a sandboxing CSP, a download unless a raster image); the remote read of
the entry answers its metadata and where its bytes are."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from shared.attachments import attachment_dict, blob_hash
from shared.entry import make_entry
from shared.wire import Op
from tests.hub.console.test_console_inproc import members, sign_in

PNG = b"\x89PNG\r\n\x1a\n" + b"img" * 300
HTML = b"<html><script>alert(document.cookie)</script></html>"


@pytest.fixture
def db_url() -> Iterator[None]:
    """SQLite only (the storage is tested on both in tests/hub/test_blobs.py)."""
    yield None


def _attach(ed: Any, space: str, eid: str, data: bytes) -> None:
    r = ed.client.put(f"/v1/spaces/{space}/blobs/{blob_hash(data)}", content=data,
                      headers=ed.auth)
    assert r.status_code == 201, r.text
    assert ed.publish(space, [Op(make_entry(attachment_dict(eid, data)), None)]
                      ).status_code == 201


def test_an_image_shows_inline_and_other_files_download_never_as_pages(
        hub_app: dict[str, Any]) -> None:
    t = members(hub_app)
    ed, space = t["ed"], t["space"]
    _attach(ed, space, "img/diagram.png", PNG)
    _attach(ed, space, "evil.html", HTML)
    b = sign_in(hub_app, t["viewer"])
    page = b.get("/console/spaces/team/entry", params={"id": "img/diagram.png"})
    assert page.status_code == 200
    assert '<img src="/console/spaces/team/file?id=img/diagram.png"' in page.text
    img = b.get("/console/spaces/team/file", params={"id": "img/diagram.png"})
    assert img.status_code == 200 and img.content == PNG
    assert img.headers["content-type"] == "image/png"
    assert img.headers["content-disposition"].startswith("inline;")
    assert img.headers["x-content-type-options"] == "nosniff"
    page = b.get("/console/spaces/team/entry", params={"id": "evil.html"})
    assert "<img" not in page.text and "Download evil.html" in page.text
    f = b.get("/console/spaces/team/file", params={"id": "evil.html"})
    assert f.content == HTML
    assert f.headers["content-type"] == "application/octet-stream"
    assert f.headers["content-disposition"].startswith("attachment;")
    assert "sandbox" in f.headers["content-security-policy"]
    # the remote read API: the entry's metadata, and where its bytes are
    doc = t["viewer"].get(f"/v1/spaces/{space}/entry", params={"id": "img/diagram.png"}
                          ).json()
    assert doc["entry"]["meta"]["sha256"] == blob_hash(PNG)
    assert doc["blob_url"] == (f"/v1/spaces/{space}/blobs/{blob_hash(PNG)}"
                               "?name=img%2Fdiagram.png")
    got = t["viewer"].get(doc["blob_url"])
    assert got.content == PNG and got.headers["content-type"] == "image/png"
