"""The journal's paths as real file events give them (inotify through watchfiles, the
watcher's own files thread) are enough for a journal scan to find what a walk finds: rounds
of random vault changes (entries made, edited, deleted; folders made, renamed, moved out and
in; files that cannot be entries, links, bad names), each followed by a cookie (every event
before it delivered) and a comparison of the journal scan with the walk, then a scan into
the store, from which the next round's journal starts. Seeded: the same changes every run;
only the events' timing is the machine's."""

from __future__ import annotations

import os
import queue
import random
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from replica.engine import pending
from replica.engine.report import SyncReport
from replica.engine.sync import Replica
from replica.ipc.journal import COOKIE
from replica.store import store as st
from replica.store.store import Store
from replica.vault import walk as vaultscan
from replica.vault.journal_scan import Journal, scoped_txn
from replica.watch.daemon import files_thread

DEADLINE_S = 60.0
OLD = time.time_ns() - 3600 * 10**9


def _page(title: str) -> str:
    return f"---\ntitle: {title}\n---\nbody of {title}\n"


def _write(p: Path, text: str) -> None:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    os.utime(p, ns=(OLD, OLD))  # settled: only an event can make a journal scan look


class Events:
    """The files thread on a vault; ``until_now()`` returns every path reported before a
    cookie written now."""

    def __init__(self, vault: Path):
        self.vault, self.inbox = vault, queue.Queue()  # type: queue.Queue[tuple[Any, ...]]
        self.stop = threading.Event()
        self.thread = threading.Thread(target=files_thread, args=(vault, self.inbox, self.stop),
                                       daemon=True)
        self.thread.start()
        self.paths: set[str] = set()
        self._wait(lambda m: m[0] == "armed")

    def _wait(self, done: Any) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while True:
            assert time.monotonic() < deadline, "no file events"
            try:
                msg = self.inbox.get(timeout=0.1)
            except queue.Empty:
                continue
            if msg[0] == "local":
                self.paths.update(msg[2])
            assert msg[0] != "files_down"
            if done(msg):
                return

    def until_now(self) -> list[str]:
        name = f"{COOKIE}{time.monotonic_ns()}"
        (self.vault / name).write_bytes(b"")
        self._wait(lambda m: m[0] == "cookie" and m[1] == name)
        (self.vault / name).unlink()
        out, self.paths = sorted(self.paths), set()
        return out

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)


def _folders(vault: Path) -> list[Path]:
    return sorted(p for p in vault.rglob("*") if p.is_dir() and not p.is_symlink()
                  and not any(part.startswith(".") for part in p.relative_to(vault).parts)
                  and p.relative_to(vault).parts[0] in ("page", "note"))


def _files(vault: Path) -> list[Path]:
    return sorted(p for p in vault.rglob("*") if (p.is_file() or p.is_symlink())
                  and p.relative_to(vault).parts[0] in ("page", "note"))


def _change(rnd: random.Random, vault: Path, outside: Path, n: int) -> None:
    """One random change of the vault (``n`` makes names unique)."""
    folders, files = _folders(vault), _files(vault)
    kind = rnd.choice(["new", "new", "edit", "delete", "folder_new", "folder_rename",
                       "folder_out", "folder_in", "problem", "link", "bad_name", "unlink"])
    if kind == "new" and folders:
        _write(rnd.choice(folders) / f"n{n}.md", _page(f"n{n}"))
    elif kind == "edit" and files:
        f = rnd.choice(files)
        if not f.is_symlink():
            _write(f, _page(f"edited {n}"))
    elif kind in ("delete", "unlink") and files:
        rnd.choice(files).unlink()
    elif kind == "folder_new":
        _write(vault / "page" / f"f{n}" / "deep" / "x.md", _page(f"x{n}"))
    elif kind == "folder_rename" and len(folders) > 2:
        f = rnd.choice([f for f in folders if f.parent != vault])
        f.rename(f.parent / f"r{n}")
    elif kind == "folder_out" and len(folders) > 2:
        f = rnd.choice([f for f in folders if f.parent != vault])
        shutil.move(f, outside / f"out{n}")
    elif kind == "folder_in":
        src = outside / f"in{n}"
        _write(src / "a.md", _page("a"))
        _write(src / "sub" / "b.md", _page("b"))
        _write(src / "notes.tmp", "not an entry")  # (a .txt is an attachment)
        shutil.move(src, (rnd.choice(folders) if folders else vault / "page") / f"in{n}")
    elif kind == "problem" and folders:
        _write(rnd.choice(folders) / f"p{n}.tmp", "x")
    elif kind == "link" and folders and files:
        os.symlink(rnd.choice(files), rnd.choice(folders) / f"l{n}.md")
    elif kind == "bad_name" and folders:
        _write(rnd.choice(folders) / f"Bad {n}.md", _page("bad"))


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_journal_scans_from_real_events_find_what_a_walk_finds(tmp_path: Path,
                                                                seed: int) -> None:
    vault, outside = tmp_path / "vault", tmp_path / "outside"
    outside.mkdir()
    for rel in ("page/a.md", "page/sub/b.md", "page/sub/deep/c.md", "note/d.md", "note/e.md"):
        _write(vault / rel, _page(rel))
    _write(vault / "page" / "broken.md", "---\ntitle: [unclosed\n---\n")
    rep = Replica(space_id="s", replica_id="r", vault=vault, store=Store(tmp_path / "s.db"),
                  client=None, key=None)  # type: ignore[arg-type]
    report = SyncReport()
    rep.scan(report)
    events = Events(vault)
    rnd = random.Random(seed)
    n = 0
    seen: list[tuple[int, int, int]] = []
    try:
        for _round in range(8):
            for _ in range(5):
                n += 1
                _change(rnd, vault, outside, n)
            journal = Journal(events.until_now(), sorted({p.path for p in report.problems}))
            with rep.store.engine.connect() as conn:
                walk = vaultscan.scan_changes(vault, st.file_index_txn(conn))
                scoped = scoped_txn(conn, vault, journal)
                assert scoped is not None, journal
                assert [tuple(c) for c in scoped.changed] == [tuple(c) for c in walk.changed]
                assert scoped.missing == walk.missing
                assert scoped.problems == walk.problems
                by_walk = pending.unpublished_txn(conn, vault)
                by_journal = pending.unpublished_txn(conn, vault, journal=journal)
            assert (by_journal.entries, by_journal.problems) == (by_walk.entries,
                                                                 by_walk.problems)
            seen.append((len(walk.changed), len(walk.missing), len(walk.problems)))
            report = SyncReport()
            rep.scan(report)  # the next round's journal starts from this scan
        # (the rounds did change things: files found changed, entries missing, problems)
        assert all(sum(x[i] for x in seen) > 0 for i in range(3)), seen
    finally:
        events.close()
