"""Attachments through the real hub in-process (docs/architecture.md, "Attachments";
decisions.md D147): a non-Markdown file is published as an entry naming its bytes by hash,
the bytes go up before the batch and come down checked; a hub that serves other bytes is
refused with nothing written; over the limit is a problem naming the file."""

from __future__ import annotations

import os
from pathlib import Path

import httpx2
import pytest

from replica.store.blobs import BlobCache
from shared.attachments import blob_hash
from shared.errors import HubUnverified
from tests.kit.hostile import Hostile
from tests.kit.inproc import Local, Space

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40


def _vault_bytes(local: Local) -> dict[str, bytes]:
    return {p.relative_to(local.vault).as_posix(): p.read_bytes()
            for p in sorted(local.vault.rglob("*")) if p.is_file()
            and not p.name.startswith(".")}


def _contains(root: Path, needle: bytes) -> list[str]:
    found = []
    for folder, _dirs, files in os.walk(root):
        for name in files:
            p = Path(folder, name)
            try:
                if needle in p.read_bytes():
                    found.append(str(p))
            except OSError:
                pass
    return found


def test_attachments_round_trip_byte_identical(tmp_path: Path, space: Space) -> None:
    a = space.replica(tmp_path, "a")
    b = space.replica(tmp_path, "b")
    try:
        pdf = b"%PDF-1.4\n" + os.urandom(300_000) + b"\n%%EOF\n"
        (a.vault / "img").mkdir(parents=True)
        (a.vault / "img" / "diagram.png").write_bytes(PNG)
        (a.vault / "Meeting Notes").mkdir()
        (a.vault / "Meeting Notes" / "Release Plan.pdf").write_bytes(pdf)
        report = a.sync()
        assert not report.problems, report.problems
        live = space.live()
        png = live["img/diagram.png"]
        assert png.kind == "attachment"
        assert png.meta == {"kind": "attachment", "sha256": blob_hash(PNG),
                            "size": len(PNG), "media_type": "image/png"}
        assert live["Meeting Notes/Release Plan.pdf"].meta["media_type"] == "application/pdf"
        b.sync()
        assert _vault_bytes(b) == _vault_bytes(a)
        # an edit of the bytes is a new version; the other replica gets the new bytes
        (a.vault / "img" / "diagram.png").write_bytes(PNG + b"more")
        a.sync()
        b.sync()
        assert (b.vault / "img" / "diagram.png").read_bytes() == PNG + b"more"
        # (a purge removes the file on the other replica: the purge test below)
        # quire vault rebuild writes an attachment's bytes from the blob cache
        from replica.app.rebuild import expected_files

        want = expected_files(b.store, BlobCache(tmp_path / "b" / "blobs"))
        assert want["img/diagram.png"] == PNG + b"more"
        assert want["Meeting Notes/Release Plan.pdf"] == pdf
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("path", [
    pytest.param("clone", marks=pytest.mark.skipif(
        not os.environ.get("QUIRE_LONG_E2E"), reason="the pull's path by default; the "
        "snapshot's with QUIRE_LONG_E2E=1 (the test-time budget)")),
    "pull"])
def test_hub_serving_other_bytes_is_refused_and_nothing_is_written(tmp_path: Path,
                                                                   space: Space,
                                                                   path: str) -> None:
    a = space.replica(tmp_path, "a")
    b = space.replica(tmp_path, "b", wrap=Hostile)
    try:
        if path == "pull":  # b holds the space already: the attachment comes as a change
            b.sync()
        a.vault.mkdir(parents=True, exist_ok=True)
        (a.vault / "photo.png").write_bytes(PNG)
        a.sync()
        evil = b"\x89PNG\r\n\x1a\nEVIL" + b"x" * (len(PNG) - 12)
        assert len(evil) == len(PNG)

        def lie(request: httpx2.Request, forward: object) -> httpx2.Response:
            return httpx2.Response(200, content=evil,
                                   headers={"Content-Type": "application/octet-stream"})

        b.transport.intercept("blobs", lie)
        with pytest.raises(HubUnverified):
            b.sync()
        assert not (b.vault / "photo.png").exists()
        assert "photo.png" not in b.store.states()
        assert BlobCache(tmp_path / "b" / "blobs").hashes() == set()
        assert _contains(tmp_path / "b", evil[:24]) == []
        b.transport.hooks.clear()  # the honest hub: the file arrives
        b.sync()
        assert (b.vault / "photo.png").read_bytes() == PNG
    finally:
        a.close()
        b.close()


def test_attachment_over_the_limit_is_a_problem_naming_the_file(tmp_path: Path,
                                                                space: Space) -> None:
    a = space.replica(tmp_path, "a")
    try:
        a.sync()  # the head tells the limit (25 MiB by default)
        big = a.vault / "video" / "talk.mp4"
        big.parent.mkdir(parents=True)
        with open(big, "wb") as f:  # 30 MiB, sparse: nothing to write or read
            f.truncate(30 * 1024 * 1024)
        (a.vault / "page").mkdir()
        (a.vault / "page" / "ok.md").write_text("---\ntitle: OK\n---\nfine\n")
        # ignored files stay ignored (D130): neither published nor problems
        (a.vault / ".quireignore").write_text("drafts/\n*.psd\n")
        (a.vault / "drafts").mkdir()
        (a.vault / "drafts" / "sketch.png").write_bytes(PNG)
        (a.vault / "cover.psd").write_bytes(b"8BPS" + PNG)
        report = a.sync()
        [p] = [p for p in report.problems if p.path == "video/talk.mp4"]
        assert "too_large" in p.reason and "video/talk.mp4" in p.reason, p.reason
        assert [p.path for p in report.problems] == ["video/talk.mp4"]
        live = space.live()
        assert "video/talk.mp4" not in live and "page/ok" in live  # the rest published
        assert "drafts/sketch.png" not in live and "cover.psd" not in live
        assert BlobCache(tmp_path / "a" / "blobs").hashes() == set()
    finally:
        a.close()


def test_purge_of_an_attachment_leaves_its_bytes_nowhere(tmp_path: Path,
                                                         space: Space) -> None:
    a = space.replica(tmp_path, "a")
    b = space.replica(tmp_path, "b")
    try:
        needle = os.urandom(64)  # in no other file anywhere
        secret = b"%PDF-1.4\n" + needle * 64 + b"\n%%EOF\n"
        keep = b"%PDF-1.4\nstays\n%%EOF\n"
        a.vault.mkdir(parents=True, exist_ok=True)
        (a.vault / "leaked.pdf").write_bytes(secret)
        (a.vault / "kept.pdf").write_bytes(keep)
        a.sync()
        b.sync()
        assert (b.vault / "leaked.pdf").read_bytes() == secret
        out = space.admin.purge(space.id, ["leaked.pdf"], "a secret was attached")
        assert out["blobs_removed"] == 1, out
        a.sync()
        b.sync()
        for r in (a, b):
            assert not (r.vault / "leaked.pdf").exists()
            assert (r.vault / "kept.pdf").read_bytes() == keep
        assert _contains(space.hub.root, needle) == []  # database files, WAL included
        assert _contains(tmp_path, needle) == []  # homes, stores, blob caches, vaults
    finally:
        a.close()
        b.close()


def test_an_upload_cut_by_a_lost_connection_resumes_where_the_hub_stopped(
        tmp_path: Path, space: Space, monkeypatch: pytest.MonkeyPatch) -> None:
    from replica.engine import blobs as lane
    from shared.errors import TransferFailed

    monkeypatch.setattr(lane, "RANGE_BYTES", 64 * 1024)  # 5 ranges for the file below
    a = space.replica(tmp_path, "a", wrap=Hostile)
    try:
        data = b"%PDF-1.4\n" + os.urandom(300_000)
        a.vault.mkdir(parents=True, exist_ok=True)
        (a.vault / "big.pdf").write_bytes(data)
        ranges: list[str] = []

        def cut_after_two(request: httpx2.Request, forward: object) -> httpx2.Response:
            if request.method == "PUT":
                ranges.append(request.headers.get("content-range", ""))
                if len(ranges) == 3:  # the connection drops during the third range
                    raise httpx2.RemoteProtocolError("connection lost (hostile)")
            return forward()  # type: ignore[operator]

        hook = a.transport.intercept("blobs", cut_after_two)
        with pytest.raises(TransferFailed):
            a.sync()
        assert "big.pdf" not in space.live()  # no batch without its bytes
        a.transport.remove(hook)
        sent: list[str] = []
        a.transport.intercept("blobs", lambda r, f: (sent.append(
            r.headers.get("content-range", "")) if r.method == "PUT" else None, f())[1])
        a.sync()
        assert sent[0].startswith(f"bytes {2 * 64 * 1024}-"), (ranges, sent)  # resumed
        assert len(sent) == 3
        assert space.live()["big.pdf"].meta["sha256"] == blob_hash(data)
    finally:
        a.close()


def test_an_attachment_changed_on_both_sides_keeps_both_files(tmp_path: Path,
                                                              space: Space) -> None:
    a = space.replica(tmp_path, "a")
    b = space.replica(tmp_path, "b")
    try:
        a.vault.mkdir(parents=True, exist_ok=True)
        (a.vault / "img").mkdir()
        (a.vault / "img" / "logo.png").write_bytes(PNG)
        a.sync()
        b.sync()
        (a.vault / "img" / "logo.png").write_bytes(PNG + b"ann")
        (b.vault / "img" / "logo.png").write_bytes(PNG + b"bob")
        a.sync()
        report = b.sync()  # bytes cannot be merged: nothing held, both kept
        assert not report.held and not b.held()
        a.sync()
        want = {"img/logo.png": PNG + b"bob", "img/logo (theirs).png": PNG + b"ann"}
        assert _vault_bytes(a) == _vault_bytes(b) == want
        assert {k for k in space.live() if k.startswith("img/")} == set(want)
    finally:
        a.close()
        b.close()
