"""Vault faults stay local to the entries they touch (issue 12 items 8 and 9), on the real
hub in-process: a folder that is a symlink, a file that cannot be read, a new file that
races a remote create."""

from __future__ import annotations

import os
import shutil

from shared.entry import Entry
from tests.kit.host import acting_as_nobody, folder_for_anyone
from tests.kit.inproc import InprocHub

PAGE = Entry(id="page/deploy", title="Deploy", body="ship it\n")
NOTE = Entry(id="note/a", title="A", body="a\n")
NOTE2 = Entry(id="note/b", title="B", body="b\n")


def _edit(e: Entry, body: str) -> Entry:
    return Entry(id=e.id, title=e.title, body=body, tags=e.tags, links=e.links, meta=e.meta)


def test_a_symlinked_folder_makes_only_its_entries_problems(space, tmp_path):
    a = space.replica(tmp_path, "a")
    b = space.replica(tmp_path, "b")
    for e in (PAGE, NOTE, NOTE2):
        b.write(e)
    b.sync()
    a.sync()
    # note/ becomes a link to a folder elsewhere (holding copies of the files)
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(a.vault / "note", elsewhere)
    shutil.rmtree(a.vault / "note")
    os.symlink(elsewhere, a.vault / "note")

    # others keep publishing: a page edit here, a page and a note edit there
    a.write(_edit(PAGE, "local edit\n"))
    report = a.sync()
    assert {p.path for p in report.problems} == {"note"}
    hub = space.live()
    assert hub[PAGE.id].body == "local edit\n"  # published
    assert NOTE.id in hub and NOTE2.id in hub  # nothing under the link was deleted
    b.sync()
    b.write(_edit(PAGE, "remote edit\n"))
    b.write(_edit(NOTE, "remote note\n"))
    b.sync()
    report = a.sync()  # pulls the page; the note under the link is left alone
    assert a.read(PAGE.id).body == "remote edit\n"
    assert {p.path for p in report.problems} == {"note"}
    assert (elsewhere / "a.md").read_text().endswith("a\n")  # never written through the link
    assert space.live()[NOTE.id].body == "remote note\n"

    # the folder is a folder again (the person moves it back): the remote edit it missed
    # lands, nothing else changes
    os.unlink(a.vault / "note")
    shutil.move(elsewhere, a.vault / "note")
    report = a.sync()
    assert not report.problems
    assert a.read(NOTE.id).body == "remote note\n"
    assert a.read(NOTE2.id).body == "b\n"


def test_an_unreadable_file_makes_only_its_entry_a_problem():
    """Root reads every file, so the sync that meets the locked file runs as uid 65534
    (``acting_as_nobody``), on a hub and replicas of its own that user may enter."""
    with folder_for_anyone() as root:
        hub = InprocHub(root)
        try:
            space = hub.space()
            a = space.replica(root, "a")
            b = space.replica(root, "b")
            b.write(PAGE)
            b.write(NOTE)
            b.sync()
            a.sync()
            a.write(_edit(NOTE, "edited, then locked\n"))
            os.chmod(a.path(NOTE.id), 0)
            a.write(_edit(PAGE, "local edit\n"))
            with acting_as_nobody(root):
                report = a.sync()
            assert [p.entry_id for p in report.problems] == [NOTE.id]
            assert space.live()[PAGE.id].body == "local edit\n"
            assert space.live()[NOTE.id].body == "a\n"
            os.chmod(a.path(NOTE.id), 0o644)
            a.sync()
            assert space.live()[NOTE.id].body == "edited, then locked\n"
            for r in (a, b):
                r.close()
            space.close()
        finally:
            hub.close()


def test_a_new_file_that_did_not_parse_meets_a_remote_create_as_a_held_conflict(space,
                                                                                 tmp_path):
    """Before: the pull recorded the hub's version as local while the file did not parse;
    once fixed, the file went out as an update over a version its author never saw."""
    a = space.replica(tmp_path, "a")
    b = space.replica(tmp_path, "b")
    a.sync()
    path = a.path(NOTE.id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("---\ntitle: [unclosed\n---\nmine\n")
    report = a.sync()
    assert [p.entry_id for p in report.problems] == [NOTE.id]
    b.write(_edit(NOTE, "theirs\n"))
    b.sync()
    a.sync()
    assert path.read_text().endswith("mine\n")  # the person's file is never overwritten
    mine = Entry(id=NOTE.id, title="Mine", body="mine\n")
    a.write(mine)  # fixed
    report = a.sync()
    assert NOTE.id in report.held
    (c,) = a.store.conflicts()
    assert c.fields == ["create"]
    assert c.ours.body == "mine\n" and c.theirs.body == "theirs\n"
    assert space.live()[NOTE.id].body == "theirs\n"  # nothing pushed over it


def test_a_file_appearing_during_a_clone_meets_the_hub_version_as_a_held_conflict(
        space, tmp_path, monkeypatch):
    b = space.replica(tmp_path, "b")
    b.write(_edit(NOTE, "theirs\n"))
    b.write(PAGE)
    b.sync()
    a = space.replica(tmp_path, "a")
    mine = Entry(id=NOTE.id, title="Mine", body="mine\n")
    import replica.engine.clone as clone_mod

    def appear(name: str) -> None:  # the person saves a file while the clone writes
        if name == "before_vault_write" and not a.path(NOTE.id).exists():
            a.write(mine)
    monkeypatch.setattr(clone_mod, "crash_point", appear)
    report = a.sync()
    assert NOTE.id in report.held
    (c,) = a.store.conflicts()
    assert c.fields == ["create"]
    assert c.ours.body == "mine\n" and c.theirs.body == "theirs\n"
    assert a.read(PAGE.id).body == PAGE.body
    monkeypatch.undo()
    a.sync()
    assert space.live()[NOTE.id].body == "theirs\n"
