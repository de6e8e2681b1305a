"""Attachments through a real hub process and the real CLI (docs/replica.md,
"Attachments"; decisions.md D147): an image and a PDF over 1 MiB saved in one member's
vault arrive byte for byte in a second member's; a 30 MiB file is a problem naming the file
(``too_large``, exit 3) and nothing of it is published."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from replica.machine.home import Home
from shared.attachments import blob_hash
from shared.entry import Entry
from tests.kit.cli import CliMember, CliTeam, FreshHub, qjson, quire

# ~9 s of CLI processes (two joins, three syncs): the default run shows the same round
# trip in-process (tests/replica/attachments/test_attachments_inproc.py)
pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(not os.environ.get("QUIRE_LONG_E2E"),
                                 reason="real CLI processes: with QUIRE_LONG_E2E=1")]


def _attachments(m: CliMember) -> dict[str, bytes]:
    return {p.relative_to(m.vault).as_posix(): p.read_bytes()
            for p in sorted(m.vault.rglob("*"))
            if p.is_file() and not p.name.endswith(".md") and not p.name.startswith(".")}


def test_an_image_and_a_pdf_round_trip_byte_identical_and_30_mib_is_refused(
        hub: FreshHub, owner: Path, tmp_path: Path) -> None:
    team = CliTeam(hub, owner, tmp_path, "att-" + tmp_path.name[-6:].lower().replace("_", "-"))
    ann, bob = team.members("ann", "bob")
    png = b"\x89PNG\r\n\x1a\n" + os.urandom(200_000)
    pdf = b"%PDF-1.7\n" + os.urandom(1_500_000) + b"\n%%EOF\n"  # over 1 MiB
    (ann.vault / "Meeting Notes").mkdir(parents=True, exist_ok=True)
    (ann.vault / "Meeting Notes" / "Diagram.png").write_bytes(png)
    (ann.vault / "Meeting Notes" / "Release Plan.pdf").write_bytes(pdf)
    big = ann.vault / "video" / "talk.mp4"
    big.parent.mkdir()
    with open(big, "wb") as f:  # 30 MiB, sparse
        f.truncate(30 * 1024 * 1024)
    p = quire(ann.home, "sync", "--json", check=False)
    assert p.returncode == 3, (p.returncode, p.stdout, p.stderr)  # a problem is listed
    human = quire(ann.home, "status", check=False).stdout
    assert "video/talk.mp4" in human and "too_large" in human, human
    bob.sync()
    assert _attachments(bob) == {"Meeting Notes/Diagram.png": png,
                                 "Meeting Notes/Release Plan.pdf": pdf}
    live = {e.id: e for e in _live(bob)}
    assert "video/talk.mp4" not in live
    assert live["Meeting Notes/Release Plan.pdf"].meta["sha256"] == blob_hash(pdf)
    # a member who keeps attachments on the hub until read: none in the vault after the
    # clone, the file (checked) at its first 'quire read'
    home, vault = tmp_path / "carl" / "home", tmp_path / "carl" / "vault"
    quire(home, "join", hub.url, "--invite", team.invite(), "--vault", str(vault),
          "--device", "carl", "--attachments", "lazy", "--json")
    carl = CliMember(team, "carl", home, vault)
    assert _attachments(carl) == {}
    doc = qjson(home, "read", "Meeting Notes/Release Plan.pdf")
    assert doc["sha256"] == blob_hash(pdf) and doc["size"] == len(pdf)
    assert _attachments(carl) == {"Meeting Notes/Release Plan.pdf": pdf}
    carl.sync()  # a sync leaves the other one on the hub, and publishes nothing
    assert _attachments(carl) == {"Meeting Notes/Release Plan.pdf": pdf}


def _live(m: CliMember) -> list[Entry]:
    """The hub's live entries, as a snapshot lists them."""
    space = Home(m.home).spaces()[0].space_id
    with m.client() as c:
        return [line[0] for line in c.snapshot(space) if isinstance(line, tuple)]
