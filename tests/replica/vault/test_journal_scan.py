"""A scan scoped by a watcher's journal finds exactly what a walk of the whole vault finds
(replica/vault/journal_scan.py): for each way a vault can change, given the paths its file events
name (a folder moved out, in or renamed is ONE event, for the folder alone), the journal
scan's changed files, missing entries and problems equal ``vaultscan.scan_changes``' and the
status the next sync would report is the same. A table of attacks: each row is a change a
journal of entry files alone would miss."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from replica.engine import pending
from replica.engine.report import SyncReport
from replica.engine.sync import Replica
from replica.store import store as st
from replica.store.store import Store
from replica.vault import markdown as md
from replica.vault import walk as vaultscan
from replica.vault.journal_scan import Journal, changes_txn, scoped_txn

OLD = time.time_ns() - 3600 * 10**9  # settled: older than the racy window


def page(title: str, body: str = "body\n") -> str:
    return f"---\ntitle: {title}\n---\n{body}"


FILES = {
    "page/a.md": page("a"), "page/b.md": page("b"), "page/sub/c.md": page("c"),
    "page/sub/deep/d.md": page("d"), "note/e.md": page("e"), "note/f.md": page("f"),
    # problems: a file that is no entry, one outside a kind folder, a bad slug, a file
    # that does not parse (a read problem: only the read of a changed file finds it)
    "page/x.txt": "not an entry", "loose.md": page("loose"), "page/Bad Name.md": page("bad"),
    "page/broken.md": "---\ntitle: [unclosed\n---\nbody\n",
}


def _write(vault: Path, rel: str, text: str) -> None:
    p = vault / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    os.utime(p, ns=(OLD, OLD))


@pytest.fixture
def synced(tmp_path: Path) -> tuple[Replica, Path, list[md.Problem]]:
    """A vault scanned into a store (every file's stat recorded and settled) and the
    problems that scan found: the scan a journal starts from."""
    vault = tmp_path / "vault"
    for rel, text in FILES.items():
        _write(vault, rel, text)
    os.symlink(vault / "page" / "a.md", vault / "page" / "link.md")
    rep = Replica(space_id="s", replica_id="r", vault=vault, store=Store(tmp_path / "s.db"),
                  client=None, key=None)  # type: ignore[arg-type]
    report = SyncReport()
    rep.scan(report)
    return rep, vault, list(report.problems)


def _same_as_walk(rep: Replica, vault: Path, problems: list[md.Problem],
                  events: list[str]) -> None:
    journal = Journal([os.fspath(vault / e) if e else os.fspath(vault) for e in events],
                      [p.path for p in problems])
    with rep.store.engine.connect() as conn:
        walk = vaultscan.scan_changes(vault, st.file_index_txn(conn))
        scoped = scoped_txn(conn, vault, journal)
        assert scoped is not None, "the journal should vouch for this"
        # and what the next sync would report: the same problems (with those of the files
        # that do not parse, re-read by both) and the same entries to publish
        by_walk = pending.unpublished_txn(conn, vault)
        by_journal = pending.unpublished_txn(conn, vault, journal=journal)
    assert [tuple(c) for c in scoped.changed] == [tuple(c) for c in walk.changed]
    assert scoped.missing == walk.missing
    assert scoped.problems == walk.problems
    assert by_journal.source == "journal" and by_walk.source == "scan"
    assert by_journal.problems == by_walk.problems
    assert by_journal.entries == by_walk.entries


def _mv(vault: Path, a: str, b: str) -> None:
    os.rename(vault / a, vault / b)


CASES: dict[str, tuple[Callable[[Path, Path], None], list[str]]] = {
    "nothing": (lambda v, t: None, []),
    "file edited": (lambda v, t: (v / "page/a.md").write_text(page("a", "new\n")),
                    ["page/a.md"]),
    "file touched": (lambda v, t: os.utime(v / "page/b.md"), ["page/b.md"]),
    "file deleted": (lambda v, t: (v / "note/e.md").unlink(), ["note/e.md"]),
    "new entry": (lambda v, t: _write(v, "page/new.md", page("n")), ["page/new.md"]),
    "new problem file": (lambda v, t: _write(v, "page/y.txt", "x"), ["page/y.txt"]),
    "problem file removed": (lambda v, t: (v / "page/x.txt").unlink(), ["page/x.txt"]),
    "bad slug renamed good": (lambda v, t: _mv(v, "page/Bad Name.md", "page/good.md"),
                              ["page/Bad Name.md", "page/good.md"]),
    "symlink removed": (lambda v, t: (v / "page/link.md").unlink(), ["page/link.md"]),
    "folder moved out": (lambda v, t: shutil.move(v / "page/sub", t / "away"), ["page/sub"]),
    "kind folder moved out": (lambda v, t: shutil.move(v / "note", t / "away"), ["note"]),
    "folder renamed": (lambda v, t: _mv(v, "page/sub", "page/moved"),
                       ["page/sub", "page/moved"]),
    "folder hidden": (lambda v, t: _mv(v, "page/sub", "page/.sub"),
                      ["page/sub", "page/.sub"]),
    "folder replaced by a link": (
        lambda v, t: (shutil.rmtree(v / "page/sub"), os.symlink(v / "note", v / "page/sub")),
        ["page/sub/c.md", "page/sub/deep/d.md", "page/sub/deep", "page/sub"]),
    "entry file replaced by a folder": (
        lambda v, t: ((v / "page/a.md").unlink(), _write(v, "page/a.md/z.md", page("z"))),
        ["page/a.md"]),
    "kind folder replaced by a file": (
        lambda v, t: (shutil.rmtree(v / "note"), _write(v, "note", "x")),
        ["note/e.md", "note/f.md", "note"]),
}


def _folder_in(v: Path, t: Path) -> None:
    """A folder made outside (entries, a problem file, a link) moved into the vault."""
    for rel, text in (("n1.md", page("n1")), ("deep/n2.md", page("n2")), ("z.txt", "x"),
                      ("Bad One.md", page("b"))):
        _write(t / "incoming", rel, text)
    os.symlink(v / "page/a.md", t / "incoming" / "l.md")
    shutil.move(t / "incoming", v / "page/incoming")


CASES["folder moved in"] = (_folder_in, ["page/incoming"])


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_journal_scan_finds_what_a_walk_finds(synced, tmp_path: Path, case: str) -> None:
    rep, vault, problems = synced
    change, events = CASES[case]
    change(vault, tmp_path)
    _same_as_walk(rep, vault, problems, events)


def test_a_folder_moved_out_is_every_entry_under_it_missing(synced, tmp_path: Path) -> None:
    """The attack on a journal of entry files: one event, for the folder, and every
    recorded entry under it must count as deleted."""
    rep, vault, problems = synced
    shutil.move(vault / "page/sub", tmp_path / "away")
    with rep.store.engine.connect() as conn:
        scoped = scoped_txn(conn, vault, Journal([os.fspath(vault / "page/sub")],
                                                 [p.path for p in problems]))
    assert scoped is not None and scoped.missing == {"page/sub/c", "page/sub/deep/d"}


def test_a_racily_clean_entry_is_looked_at_without_an_event(synced) -> None:
    """A file recorded with an unknown stat (written within the racy window, or a vault
    write a person's edit skipped) is re-read by every walk: the journal scan too."""
    rep, vault, problems = synced
    with rep.store.tx() as conn:
        s = st.get_state_txn(conn, "note/f")
        s.file_mtime_ns = None
        st.put_state_txn(conn, s)
    (vault / "note/f.md").write_text(page("f", "changed, no event\n"))
    os.utime(vault / "note/f.md", ns=(OLD, OLD))
    _same_as_walk(rep, vault, problems, [])
    with rep.store.engine.connect() as conn:
        scoped = scoped_txn(conn, vault, Journal([], [p.path for p in problems]))
    # (with the file that does not parse, which every walk re-reads)
    assert scoped is not None and [c.entry_id for c in scoped.changed] == [
        "note/f", "page/broken"]


@pytest.mark.parametrize("events", [[""], ["/elsewhere/page/a.md"]])
def test_what_the_journal_cannot_place_is_walked(synced, events: list[str]) -> None:
    rep, vault, problems = synced
    paths = [os.fspath(vault) if not e else e for e in events]
    with rep.store.engine.connect() as conn:
        j = Journal(paths, [p.path for p in problems])
        assert scoped_txn(conn, vault, j) is None
        assert changes_txn(conn, vault, j)[1] == "scan"
        assert changes_txn(conn, vault, None)[1] == "scan"


def test_a_journal_without_its_problems_is_not_trusted() -> None:
    assert Journal.from_json({"valid": True, "paths": [], "problem_paths": None}) is None
    assert Journal.from_json({"valid": False, "paths": [], "problem_paths": []}) is None
    assert Journal.from_json({"valid": True, "paths": [1], "problem_paths": []}) is None
    assert Journal.from_json({"valid": True, "paths": ["/v/page/a.md"],
                              "problem_paths": ["page/x.txt"]}) == Journal(
        ["/v/page/a.md"], ["page/x.txt"])
