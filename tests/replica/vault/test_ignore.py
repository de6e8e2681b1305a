"""The vault's ignore file and built-in scratch names (replica/vault/ignore.py), on the real
hub in-process, and the CLI's ``status --ignored`` and refusal on a real hub process.

Before the ignore file (main at 0506cf5): an Emacs or JetBrains scratch file put the replica
in ``problems`` for good, and nothing could keep a folder of drafts from being published."""

from __future__ import annotations

import json

import pytest

from replica.vault.ignore import IGNORE_FILE, IgnoreRules, ignored_files
from shared.entry import Entry
from shared.errors import IgnoreFileInvalid

SCRATCH = ["page/#deploy.md#", "page/deploy.md___jb_tmp___", "page/deploy.md___jb_old___",
           "page/~$deploy.docx", "page/Thumbs.db", "page/desktop.ini", "page/deploy.md~",
           "page/deploy.md.kate-swp", ".obsidian/workspace.json", ".trash/old.md",
           "page/.DS_Store"]


def _page(eid: str, body: str = "text\n") -> Entry:
    return Entry(id=eid, title=eid.rsplit("/", 1)[-1], body=body)


def test_editor_scratch_and_system_files_are_not_problems(space, tmp_path):
    a = space.replica(tmp_path, "a")
    a.write(_page("page/deploy"))
    for rel in SCRATCH:
        p = a.vault / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"scratch")
    report = a.sync()
    assert report.problems == []
    assert set(space.live()) == {"page/deploy"}


def test_ignored_paths_are_never_published(space, tmp_path):
    a = space.replica(tmp_path, "a")
    a.write(_page("page/deploy"))
    (a.vault / IGNORE_FILE).write_text("# drafts stay here\ndrafts/\n*.pdf\npage/private-*\n")
    a.write(_page("drafts/idea"))  # a valid entry path, but ignored
    a.write(_page("page/private-notes"))
    (a.vault / "page" / "scan.pdf").write_bytes(b"%PDF-1.4")  # no problem: ignored
    (a.vault / "drafts" / "Rough Notes.md").write_text("not a valid entry name\n")
    report = a.sync()
    assert report.problems == []
    assert set(space.live()) == {"page/deploy"}
    listed = ignored_files(a.vault)
    assert "drafts/" in listed and "page/scan.pdf" in listed
    assert "page/private-notes.md" in listed


def test_a_page_that_becomes_ignored_keeps_its_edits_and_delete_local(space, tmp_path):
    a = space.replica(tmp_path, "a")
    b = space.replica(tmp_path, "b")
    a.write(_page("page/shared", "v1\n"))
    a.write(_page("page/other", "v1\n"))
    a.sync()
    b.sync()
    (a.vault / IGNORE_FILE).write_text("page/shared.md\n")
    a.write(_page("page/shared", "local only\n"))
    a.sync()
    assert space.live()["page/shared"].body == "v1\n"  # the edit stayed here
    a.path("page/shared").unlink()
    a.write(_page("page/other", "v2\n"))  # the rest of the vault syncs as before
    a.sync()
    live = space.live()
    assert live["page/shared"].body == "v1\n"  # the delete stayed here too
    assert live["page/other"].body == "v2\n"
    b.sync()
    assert b.read("page/shared").body == "v1\n"


@pytest.mark.parametrize("content, line", [
    (b"drafts/\n!\n", 2),  # a bare negation
    (b"ok/\nfoo\\\n", 2),  # a trailing backslash escapes nothing
    (b"caf\xe9/\n", 1),  # not UTF-8
])
def test_a_bad_ignore_file_refuses_the_sync_and_publishes_nothing(space, tmp_path, content,
                                                                   line):
    a = space.replica(tmp_path, "a")
    a.write(_page("page/deploy", "v1\n"))
    a.sync()
    seq = space.head()["seq"]
    (a.vault / IGNORE_FILE).write_bytes(content)
    a.write(_page("page/deploy", "v2\n"))
    a.write(_page("drafts/idea"))
    with pytest.raises(IgnoreFileInvalid) as e:
        a.sync()
    assert e.value.code == "ignore_file_invalid"
    assert e.value.details["line"] == line and str(a.vault / IGNORE_FILE) in e.value.message
    assert space.head()["seq"] == seq  # nothing published
    assert a.read("page/deploy").body == "v2\n"  # nothing lost
    (a.vault / IGNORE_FILE).write_text("drafts/\n")  # fixed: the edit goes out
    a.sync()
    assert set(space.live()) == {"page/deploy"}
    assert space.live()["page/deploy"].body == "v2\n"


def test_an_over_long_ignore_file_is_refused(tmp_path):
    (tmp_path / IGNORE_FILE).write_text("x/\n" * 30_000)
    with pytest.raises(IgnoreFileInvalid) as e:
        IgnoreRules.load(tmp_path)
    assert "larger than" in e.value.message


def test_status_lists_ignored_files_and_says_why_a_sync_is_refused(team):
    from tests.kit.cli import quire

    m = team.member("ig")
    m.write(_page("page/deploy"))
    (m.vault / "page" / "#deploy.md#").write_text("autosave")
    (m.vault / IGNORE_FILE).write_text("drafts/\n")
    (m.vault / "drafts").mkdir()
    (m.vault / "drafts" / "x.md").write_text("x")
    m.sync()
    out = quire(m.home, "status", "--ignored")
    assert out.returncode == 0, out.stderr
    assert "page/#deploy.md#" in out.stdout and "drafts/" in out.stdout
    (m.vault / IGNORE_FILE).write_text("bad\\\n")
    r = quire(m.home, "sync", "--json", check=False)
    assert r.returncode == 1
    assert json.loads(r.stdout)["error"]["code"] == "ignore_file_invalid"
    st = quire(m.home, "status", "--json", "--strict", check=False)
    doc = json.loads(st.stdout)
    assert st.returncode == 1 and doc["state"] == "error"
    assert doc["ignore_file_invalid"]["line"] == 1
