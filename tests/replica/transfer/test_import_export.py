"""``quire import`` and ``quire export`` on the real hub app, in process (replica/app/
importer.py, replica/app/exporter.py): a small generated corpus (tests/kit/corpus.py) with
every kind of bad input; the dry run lists what is imported, mapped, ignored and refused;
the import publishes in bounded batches and a second run imports nothing again; another
member's clone has the files; an export imported into a new space gives the same state
root. The killed import and the 2,000-note corpus: test_import_cli_e2e.py."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest

from replica.app import exporter, importer
from replica.store.links import live_ids_txn
from replica.trust.verify import state_root_txn
from shared.errors import IgnoreFileInvalid
from tests.kit import corpus
from tests.kit.inproc import InprocHub, Local, Space


def _plan(src: Path, local: Local) -> importer.Plan:
    with local.store.tx() as conn:
        live = live_ids_txn(conn)
    return importer.plan(src, local.vault, local.store, live)


def _bad_inputs(src: Path) -> None:
    (src / "Notes").mkdir()
    (src / "Notes/Plan.md").write_bytes(b"plan\n")
    (src / "Notes/plan.md").write_bytes(b"the other plan\n")  # one file on macOS
    (src / unicodedata.normalize("NFD", "Notes/Café.md")).write_bytes(b"nfd\n")
    (src / "Notes/Latin.md").write_bytes(b"caf\xe9\n")  # not UTF-8
    (src / "Notes/CON.md").write_bytes(b"reserved\n")
    with open(src / "Notes/scan.pdf", "wb") as f:  # 30 MiB: over the 25 MiB default limit
        f.truncate(30 << 20)


def test_dry_run_import_resume_clone_and_export(space: Space, tmp_path: Path,
                                                inproc_hub: InprocHub) -> None:
    src = tmp_path / "vault to import"
    c = corpus.build(src, notes=50, attachments=6, big_every=6)
    _bad_inputs(src)
    alice = space.replica(tmp_path, "alice")
    alice.sync()

    p = _plan(src, alice)
    refused = {r["path"]: r["code"] for r in p.refused}
    nfd = unicodedata.normalize("NFD", "Notes/Café.md")
    assert refused == {"Notes/plan.md": "name_collision", nfd: "invalid_entry_id",
                       "Notes/Latin.md": "not_utf8", "Notes/CON.md": "non_portable_id",
                       "Notes/scan.pdf": "too_large"}
    assert all(r["path"] in r["reason"] or r["code"] != "not_utf8" for r in p.refused)
    ignored = {i["path"] for i in p.ignored}
    assert {".obsidian/", ".trash/", ".DS_Store", "Inbox/#draft.md#", "private/",
            "Inbox/today.md___jb_tmp___", ".quireignore"} <= ignored
    files = [i for i in p.imported if i.kind == "attachment"]
    assert len(files) == 6 and any(i.size > 1 << 20 for i in files)
    assert {i.path for i in p.imported} == set(c.notes) | set(c.attachments) | {
        "Notes/Plan.md"}
    assert p.imported[-1].kind == "attachment"  # Markdown first
    assert {(i.kind, i.mapped) for i in p.imported} >= {("skill", "front matter"),
                                                        ("skill", "folder"),
                                                        ("page", "default")}
    assert space.live() == {}  # a dry run publishes nothing

    cut = list(importer.batches([importer.Item(str(n), str(n), "page", "default",
                                               3 << 20, "") for n in range(7)]))
    assert [len(b) for b in cut] == [2, 2, 2, 1]  # 8 MiB a batch

    doc = importer.run(p, alice.vault, alice.store, alice.sync)
    assert doc["published"] == len(p.imported) and doc["held"] == []
    assert set(space.live()) == {i.id for i in p.imported}
    again = _plan(src, alice)
    assert again.imported == [] and len(again.done) == len(p.imported)
    assert importer.run(again, alice.vault, alice.store, alice.sync)["batches"] == 0

    bob = space.replica(tmp_path, "bob")
    bob.sync()
    got = corpus.files(bob.vault)
    want = {k: v for k, v in corpus.files(src).items() if k in {i.path for i in p.imported}}
    assert got == want  # byte for byte (D132 part 3): CRLF, BOM, front matter, attachments

    out = tmp_path / "exported"
    assert exporter.export(alice.store, alice.vault, out)["entries"] == len(want)
    with pytest.raises(Exception, match="not an empty folder"):
        exporter.export(alice.store, alice.vault, out)
    other = inproc_hub.space()
    try:
        carol = other.replica(tmp_path, "carol")
        carol.sync()
        importer.run(_plan(out, carol), carol.vault, carol.store, carol.sync)
        with alice.store.tx() as a, carol.store.tx() as b:
            assert state_root_txn(a) == state_root_txn(b)
    finally:
        other.close()


def test_a_bad_ignore_file_refuses_the_import_naming_it(space: Space, tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.md").write_bytes(b"a\n")
    (src / ".quireignore").write_bytes(b"drafts/\n!\n")
    alice = space.replica(tmp_path, "alice")
    with pytest.raises(IgnoreFileInvalid) as e:
        _plan(src, alice)
    assert e.value.details["line"] == 2 and ".quireignore" in e.value.message
